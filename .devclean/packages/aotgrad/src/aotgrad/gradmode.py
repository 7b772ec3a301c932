"""ATen ops whose outputs depend on grad mode, and running graphs that hold them.

The training forward runs inside `autograd.Function.forward`, where grad mode is off. A few
kernels read grad mode: `mkldnn_rnn_layer` (the CPU LSTM/GRU kernel) returns its `workspace`
only with grad mode on, and its backward needs that workspace. A graph holding such an op runs
with grad mode on, on inputs detached from autograd (so nothing is recorded); the partitioners
never recompute such an op in the backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx

__all__ = ["GRAD_MODE_OPS", "needs_grad_mode", "with_grad_mode"]


def _ops(*names: str) -> frozenset[object]:
    found: list[object] = []
    for name in names:
        packet_name, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is not None and hasattr(packet, overload):
            found.append(getattr(packet, overload))
    return frozenset(found)


GRAD_MODE_OPS: frozenset[object] = _ops("mkldnn_rnn_layer.default")


def needs_grad_mode(gm: fx.GraphModule) -> bool:
    """Whether `gm` calls an op whose outputs differ with grad mode off."""
    return any(n.op == "call_function" and n.target in GRAD_MODE_OPS for n in gm.graph.nodes)


def with_grad_mode(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """`compiled` run with grad mode on, on inputs detached from autograd.

    NOTE: an output that is one of the detached inputs is given back as the input itself, as
    the graph returned it (saved inputs, outputs returned as they are).
    """

    def run(*args: Any) -> Any:
        detached = [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a
                    for a in args]
        with torch.enable_grad():
            outs = compiled(*detached)
        swap = {id(d): a for d, a in zip(detached, args) if d is not a}
        if not swap:
            return outs
        return [swap.get(id(o), o) for o in outs]

    return run
