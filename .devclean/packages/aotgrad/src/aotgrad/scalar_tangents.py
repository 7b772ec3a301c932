"""Backwards for gradients that are one value broadcast to an output's shape.

`out.sum().backward()` hands the compiled backward the gradient of `out` as a scalar
expanded to `out`'s shape: every stride 0 (`.mean()`'s is divided by autograd first:
dense). The backward was compiled for a contiguous tangent, and copying the gradient to one writes and then reads a tensor of
`out`'s size: on the CPU a third of a pointwise layer's training step (ELU over 2048x1024:
4.05 ms against 2.64 with a contiguous gradient). Instead, a variant of the backward is
compiled for that tangent with zero strides (`restride_backward`: its other values derived
again on fake tensors, its gradients keeping their strides), so the kernels read the one
value; consumers that need memory (an extern matmul) get a copy inside the graph, as before.

In: the backward graph and the positions of such tangents. Out: the graph to compile for
them, or None where it cannot be made (a graph restored from disk without its nodes, an op
fake tensors cannot run): the runtime then copies the gradient as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from aotgrad.saved_layout import restride_backward

__all__ = ["expanded_scalar", "scalar_tangent_backward"]


def expanded_scalar(grad: Any) -> bool:
    """Whether `grad` is one value broadcast to a shape of more than one element, on the
    CPU.

    NOTE: CPU only for now: a GPU backward would hand the zero-stride tangent to cuDNN,
    cuBLAS, Triton templates and the CUDA graph runner, none of which has been run with one
    on a GPU; there the copy is also a small part of a step."""
    return (isinstance(grad, torch.Tensor) and grad.dim() > 0 and grad.numel() > 1
            and grad.device.type == "cpu" and not any(grad.stride()))


def scalar_tangent_backward(bw_gm: fx.GraphModule, examples: Sequence[Any],
                            positions: Sequence[int]) -> fx.GraphModule | None:
    """`bw_gm` compiled for zero-stride inputs at placeholder `positions` (tangents whose
    example values have static shapes), or None when it cannot be made."""
    strides: list[tuple[int, ...] | None] = [None] * len(examples)
    for i in positions:
        example = examples[i]
        if not isinstance(example, torch.Tensor) or not all(
                isinstance(s, int) for s in example.shape):
            return None
        strides[i] = (0,) * example.dim()
    if not any(n.op == "call_function" for n in bw_gm.graph.nodes):
        return None
    variant = restride_backward(bw_gm, strides)
    return None if variant is None or variant is bw_gm else variant
