"""The Triton launcher's fast path (`runtime/triton_fastpath.FastPath`): after the first launch
of a kernel, later calls go through the compiled kernel while the tensor arguments keep the
first call's 16-byte alignment, and whether the C launcher can be called directly is decided
once, and whether it takes data pointers (Triton 3.6's C launch, no scratch memory). Checked
with stand-ins for Triton's compiled kernel and runner (no GPU needed)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from inductor.runtime import triton_fastpath
from inductor.runtime.triton_fastpath import FastPath, _hook_set


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


class _Runner36:
    """Triton 3.6's `CudaLauncher`: `__call__(gridX, gridY, gridZ, stream, function, *args)`
    over a C `launch` that takes the scratch buffers after the cooperative and pdl flags."""

    def __init__(self, global_scratch: int = 0, profile_scratch: int = 0) -> None:
        self.global_scratch_size = global_scratch
        self.profile_scratch_size = profile_scratch
        self.launch_cooperative_grid = False
        self.launch_pdl = True
        self.launches: list[tuple[Any, ...]] = []
        self.launch = lambda *a: self.launches.append(a)

    def __call__(self, gridX: int, gridY: int, gridZ: int, stream: int, function: int,
                 *args: Any) -> None:
        raise AssertionError("the raw path calls `launch`, not the runner")


class _Runner39(_Runner36):
    """Triton 3.9's form: the metadata and hooks are named parameters."""

    def __call__(self, gridX: int, gridY: int, gridZ: int, stream: int, function: int,  # type: ignore[override]
                 kernel_metadata: Any, launch_metadata: Any, launch_enter_hook: Any,
                 launch_exit_hook: Any, *args: Any) -> None:
        raise AssertionError("not called")


class _WithRunner(FastPath):
    def __init__(self, runner: Any) -> None:
        super().__init__()
        self.runner = runner

    def _direct(self) -> tuple[Any, ...] | None:
        return (self.runner, *self.grid, "function", "packed")


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_fastpath, "_STREAM", lambda device: 1000 + device)
    monkeypatch.setattr(triton_fastpath, "_DEVICE", lambda: 7)


def test_the_raw_launch_takes_data_pointers(stream: None) -> None:
    runner = _Runner36()
    fast = _WithRunner(runner)
    base = torch.zeros(64)
    a, b = base[:16], base[16:32]
    fast.keep(_Compiled(), (4, 2), (a, b), (8, 1))
    assert fast.call((a, b))  # through the compiled kernel, which decides the launcher
    assert fast.raw is not None
    c = base[32:48]
    assert fast.call((c, a))
    assert runner.launches == [(4, 2, 1, 1007, "function", False, True, None, None, "packed",
                                None, None, None, c.data_ptr(), a.data_ptr(), 8, 1)]
    assert all(isinstance(x, int) for x in runner.launches[0][13:15])
    assert not fast.call((base[1:17], a))  # unaligned: the JIT re-specializes
    assert len(runner.launches) == 1


@pytest.mark.parametrize("why", ["scalar", "scratch", "profile", "other triton", "gsan"])
def test_the_raw_launch_is_not_taken_where_the_runner_does_more(stream: None, why: str) -> None:
    runner = {"scratch": _Runner36(global_scratch=16), "profile": _Runner36(profile_scratch=8),
              "other triton": _Runner39()}.get(why, _Runner36())
    if why == "gsan":
        runner.gsan_enabled = True  # type: ignore[attr-defined]
    fast = _WithRunner(runner)
    base = torch.zeros(64)
    args: tuple[Any, ...] = (base[:16], 5, base[16:32]) if why == "scalar" else (base[:16],
                                                                                base[16:32])
    fast.keep(_Compiled(), (4,), args, ())
    assert fast.call(args)
    assert fast.direct is not None and fast.raw is None
