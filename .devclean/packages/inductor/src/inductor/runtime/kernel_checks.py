"""Bounds and zero-divisor checks of Triton kernels, read back after the kernel ran
(`ir/checks.py` defines the checks and their errors).

The wrapper calls `triton_check(err, checks)` after each checking kernel: it reads the
kernel's two error slots (a sync with the GPU) and raises what eager raises. While a CUDA
graph is recorded (`runtime/cudagraphs.py`) nothing may be read back: inside
`deferred_checks()` the slots are collected instead, and the runner checks them after every
replay (`raise_deferred`), so a replayed graph raises the same error, once per replay.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from inductor.ir.checks import KernelCheck, raise_kernel_error

Pending = list[tuple[torch.Tensor, tuple[KernelCheck, ...]]]

_state = threading.local()


def triton_check(err: torch.Tensor, checks: tuple[KernelCheck, ...]) -> None:
    """Raise the error a kernel reported in `err`, or defer the check while recording."""
    pending: Pending | None = getattr(_state, "pending", None)
    if pending is not None:
        pending.append((err, checks))
        return
    if err[0]:
        raise_kernel_error(err, checks)


@contextmanager
def deferred_checks() -> Iterator[Pending]:
    """Collect the checks of the kernels launched inside (a CUDA graph being recorded)."""
    pending: Pending = []
    previous = getattr(_state, "pending", None)
    _state.pending = pending
    try:
        yield pending
    finally:
        _state.pending = previous


def raise_deferred(pending: Sequence[tuple[torch.Tensor, tuple[KernelCheck, ...]]]) -> None:
    """After a replay: raise the first failed check's error (one sync when any exist)."""
    if not pending:
        return
    flags = torch.stack([err[0] for err, _ in pending]).cpu()
    for (err, checks), flag in zip(pending, flags.tolist()):
        if flag:
            raise_kernel_error(err, checks)
