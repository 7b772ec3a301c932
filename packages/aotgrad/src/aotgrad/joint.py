"""Joint forward+backward graphs: the functional forward and `torch.autograd.grad` traced
together on fake tensors, then functionalized.

Entry point for the partitioners: `build_joint(gm, example_inputs) -> JointGraph`.
IR in: a torch-level GraphModule (or any callable) and example inputs (real or fake tensors).
IR out: `JointGraph.gm` with placeholders `primals_1..n`, `tangents_1..m` returning
`(*forward_outputs, *grads)`: the first `num_fwd_outputs` values are the new values of mutated
inputs followed by the user outputs the graph computes, then one gradient per primal (None
where the primal does not require grad or gets no gradient). See INTERFACES.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from aotgrad.decompositions import get_decompositions
from aotgrad.functionalize import FunctionalGraph, functionalize
from aotgrad.trace import AtenTracer, fake_inputs, new_fake_mode, run_with_meta, trace

__all__ = ["JointGraph", "build_joint", "trace_forward", "joint_from_forward"]


@dataclasses.dataclass
class JointGraph:
    """A joint graph and what the runtime wrapper needs to run its partitions.

    Attributes:
        gm: the joint GraphModule (see the module docstring for its signature).
        num_fwd_outputs: how many leading outputs are forward outputs.
        requires_grad: per primal, whether it gets a gradient output (may still be None).
        tangent_outputs: indices (into the forward outputs) of the outputs with a tangent,
            in the order of `tangents_1..m`.
        forward: the functionalized forward (mutated inputs, output views) it was built from.
        fake_mode: the fake mode of every example value in `gm`.
    """

    gm: fx.GraphModule
    num_fwd_outputs: int
    requires_grad: list[bool]
    tangent_outputs: list[int]
    forward: FunctionalGraph
    fake_mode: FakeTensorMode

    @property
    def num_primals(self) -> int:
        return len(self.requires_grad)

    @property
    def mutated_inputs(self) -> list[int]:
        return self.forward.mutated_inputs


def _detached(fakes: Sequence[object]) -> list[object]:
    return [f.detach() if isinstance(f, torch.Tensor) else f for f in fakes]


def trace_forward(
    fn: Callable[..., Any],
    fake_args: Sequence[object],
    fake_mode: FakeTensorMode,
    decompositions: Mapping[Any, Callable[..., Any]],
) -> tuple[FunctionalGraph, Any]:
    """Trace `fn` to ATen without autograd and functionalize it; returns (graph, out spec)."""
    with fake_mode:
        args = _detached(fake_args)
    names = [f"primals_{i + 1}" for i in range(len(args))]
    raw, spec = trace(fn, args, fake_mode=fake_mode, decompositions=decompositions,
                      arg_names=names)
    return functionalize(raw, fake_mode), spec


def _differentiable(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def joint_from_forward(
    forward: FunctionalGraph,
    primals: Sequence[object],
    fake_mode: FakeTensorMode,
    decompositions: Mapping[Any, Callable[..., Any]],
) -> JointGraph:
    """Trace forward and backward of a functional forward graph on fake `primals`.

    `primals` are fake tensors whose `requires_grad` says which inputs get gradients.
    """
    requires_grad = [_differentiable(p) for p in primals]
    # A dry run (no recording) tells which forward outputs require grad, so that the
    # tangent placeholders can be made before tracing.
    with fake_mode, torch.enable_grad():
        dry = forward.gm(*primals)
    tangent_outputs = [i for i, v in enumerate(dry) if _differentiable(v)]
    with fake_mode:
        tangents = [torch.empty(dry[i].shape, dtype=dry[i].dtype, device=dry[i].device)
                    for i in tangent_outputs]
    del dry

    tracer = AtenTracer(fake_mode, decompositions)
    tracer.placeholders([f"primals_{i + 1}" for i in range(len(primals))], primals)
    tracer.placeholders([f"tangents_{i + 1}" for i in range(len(tangents))], tangents)
    with fake_mode, tracer, torch.enable_grad():
        outs = list(run_with_meta(forward.gm, list(primals), tracer))
        diff_inputs = [p for p, rg in zip(primals, requires_grad) if rg]
        grads: list[object] = [None] * len(primals)
        diff_outs = [outs[i] for i in tangent_outputs]
        if diff_inputs and diff_outs:
            computed = torch.autograd.grad(diff_outs, diff_inputs, tangents,
                                           allow_unused=True)
            positions = [i for i, rg in enumerate(requires_grad) if rg]
            for position, grad in zip(positions, computed):
                grads[position] = grad
        # NOTE: forward outputs leave autograd here; the joint graph is a plain value graph.
        tracer.output_flat([*outs, *grads])
    raw = tracer.graph_module()
    joint = functionalize(raw, fake_mode, keep_outputs=True)
    return JointGraph(
        gm=joint.gm,
        num_fwd_outputs=len(outs),
        requires_grad=requires_grad,
        tangent_outputs=tangent_outputs,
        forward=forward,
        fake_mode=fake_mode,
    )


def build_joint(
    gm: Callable[..., Any],
    example_inputs: Sequence[object],
    *,
    decompositions: str | Mapping[Any, Callable[..., Any]] | None = "core",
    fake_mode: FakeTensorMode | None = None,
) -> JointGraph:
    """Build the joint forward+backward graph of `gm` (a GraphModule or any callable).

    This is the entry point the partitioners use: `build_joint(gm, example_inputs).gm` is
    the joint graph of INTERFACES.md and `.num_fwd_outputs` its number of forward outputs.
    `example_inputs` may be real or fake tensors; their `requires_grad` decides which primals
    get gradients. `gm` must return a tuple/list (or a single tensor).
    """
    mode = fake_mode or new_fake_mode()
    table = get_decompositions(decompositions)
    fakes = fake_inputs(mode, example_inputs)
    forward, _ = trace_forward(gm, fakes, mode, table)
    return joint_from_forward(forward, fakes, mode, table)
