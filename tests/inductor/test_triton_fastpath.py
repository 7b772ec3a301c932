"""The Triton launcher's fast path (`runtime/triton_launch.FastPath`): after the first launch
of a kernel, later calls go through the compiled kernel while the tensor arguments keep the
first call's 16-byte alignment, and whether the C launcher can be called directly is decided
once. Checked with a stand-in for Triton's compiled kernel (no GPU needed)."""

from __future__ import annotations

from typing import Any

import torch
from inductor.runtime.triton_launch import FastPath, _hook_set


class _Chain:
    """Triton's hook chain (3.5+): a launch hook that is never None, empty when unset."""

    def __init__(self, *calls: Any) -> None:
        self.calls = list(calls)


def test_a_hook_is_set_only_when_it_would_run() -> None:
    assert not _hook_set(None)
    assert not _hook_set(_Chain())
    assert _hook_set(_Chain(print))
    assert _hook_set(print)  # a plain callable (older Triton) runs


class _Compiled:
    """Records the launches made through `compiled[grid](*args)`."""

    def __init__(self) -> None:
        self.launches: list[tuple[tuple[int, ...], tuple[Any, ...]]] = []

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def runner(*args: Any) -> None:
            self.launches.append((grid, args))

        return runner


class _Counted(FastPath):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def _direct(self) -> tuple[Any, ...] | None:
        self.asked += 1
        return None


def test_fast_path_launches_and_asks_for_the_direct_launcher_once() -> None:
    fast = _Counted()
    base = torch.zeros(64)
    args = (base[:16], 3, base[16:32])
    assert not fast.call(args)  # nothing kept yet: the JIT launches
    compiled = _Compiled()
    fast.keep(compiled, (4,), args, (8, 1))
    for _ in range(5):
        assert fast.call(args)
    assert fast.asked == 1
    assert compiled.launches == [((4, 1, 1), (*args, 8, 1))] * 5


def test_fast_path_refuses_arguments_of_another_alignment() -> None:
    fast = _Counted()
    base = torch.zeros(64)
    fast.keep(_Compiled(), (4,), (base[:16], base[16:32]), ())
    assert fast.call((base[16:32], base[32:48]))  # 64-byte offsets: still aligned
    assert not fast.call((base[1:17], base[16:32]))  # 4-byte offset: the JIT re-specializes


def test_a_kernel_kept_for_an_unaligned_tensor_takes_only_that_alignment() -> None:
    fast = _Counted()
    base = torch.zeros(64)
    fast.keep(_Compiled(), (4,), (base[1:17], base[16:32]), ())
    assert fast.call((base[5:21], base[32:48]))  # NOTE: the same alignments
    assert not fast.call((base[16:32], base[32:48]))  # an aligned first tensor: another kernel
    assert not fast.call((base[1:17], base[17:33]))
