"""Helpers of the boxed-backward tests (`test_inductor_boxed_backward.py` and its warm-start
driver): whether a saved activation dies inside the backward, before its last matmul."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

MATMULS = ("mm", "addmm", "bmm", "baddbmm")


class AliveAtEachOp(TorchDispatchMode):
    """How many of `refs` are alive when each ATen op (kernels are not ops: extern calls
    and allocations are) of the backward starts."""

    def __init__(self, refs: list[weakref.ref[torch.Tensor]]) -> None:
        super().__init__()
        self.refs = refs
        self.alive: list[int] = []
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.alive.append(sum(r() is not None for r in self.refs))
        self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


def saved_alive_during_backward(step: Callable[[], torch.Tensor],
                                exclude: Sequence[torch.Tensor]) -> tuple[int, AliveAtEachOp]:
    """Run `step()` (a forward returning a loss) with every tensor saved for backward
    except `exclude` (parameters, inputs) watched by a weak reference, then the loss's
    backward: (how many were watched, what was alive at each op of the backward)."""
    refs: list[weakref.ref[torch.Tensor]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not any(t is e for e in exclude):
            refs.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    mode = AliveAtEachOp(refs)
    with mode:
        loss.backward()
    return len(refs), mode


def freed_before_last_matmul(watched: int, mode: AliveAtEachOp) -> bool:
    """All watched tensors alive when the backward started, and one of them freed before
    its last matmul started (an unboxed backward holds them all to its end)."""
    last = max(i for i, op in enumerate(mode.ops) if op.startswith(MATMULS))
    return watched > 0 and mode.alive[0] == watched and min(mode.alive[:last]) < watched
