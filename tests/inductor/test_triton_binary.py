"""Compiled Triton kernels recorded beside their modules and found again without the JIT
(`runtime/triton_binary.py`): a real kernel compiled for an H100 on this machine (compiling
needs no GPU) is recorded and rebuilt from Triton's cache with the same binary, signature and
constants; a record for another configuration, kernel variant, alignment, dtype, scalar value,
Triton version, `TRITON_*` setting or GPU, or whose cache entry is gone, is a miss; and a
launcher's first launch in a later process goes through the record, never the JIT nor the
import of the kernel's module (stand-ins for the JIT and the compiled kernel: loading a binary
needs a GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from inductor.runtime import triton_binary, triton_launch
from inductor.runtime.triton_launch import clear_launchers, load_triton_kernels


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, a, XBLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


class _NoGpuDriver:
    """Triton's driver for a GPU of compute capability `arch` on a machine without one."""

    def __init__(self, arch: int = 90) -> None:
        self.arch = arch

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.arch, 32)


def _compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource
    from triton.runtime.driver import driver

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setattr(driver, "_active", _NoGpuDriver())
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "a": "fp32",
                 "XBLOCK": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    return triton.compile(ASTSource(_axpy, signature, {(4,): 64}, attrs),
                          target=GPUTarget("cuda", 90, 32))


def _args() -> tuple[Any, ...]:
    return torch.zeros(64), torch.zeros(64), torch.zeros(64), 2.0


def test_a_recorded_kernel_is_rebuilt_from_the_cache(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.compiler.compiler import CompiledKernel

    compiled = _compile(tmp_path, monkeypatch)
    path = tmp_path / "k.bin"
    triton_binary.record(path, compiled, _args(), (64, 1, 4), [False])
    assert path.exists()
    handles: list[Any] = []
    monkeypatch.setattr(CompiledKernel, "_init_handles", lambda self: handles.append(self))
    loaded = triton_binary.load(path, _args(), (64, 1, 4), [False])
    assert loaded is not None and handles == [loaded]  # NOTE: loaded at once: errors miss
    assert loaded.hash == compiled.hash
    assert loaded.asm["cubin"] == compiled.asm["cubin"]
    assert loaded.metadata == compiled.metadata
    assert loaded.src.signature == compiled.src.signature
    assert loaded.src.constants == compiled.src.constants == {(4,): 64}
    assert triton_binary.recorded_config(path) == (64, 1, 4)


def test_other_launches_are_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.driver import driver

    compiled = _compile(tmp_path, monkeypatch)
    path = tmp_path / "k.bin"
    triton_binary.record(path, compiled, _args(), (64, 1, 4))
    monkeypatch.setattr(CompiledKernel, "_init_handles", lambda self: None)
    x, y, out, a = _args()
    base = torch.zeros(80)
    assert triton_binary.load(path, _args(), (32, 1, 4)) is None  # another configuration
    assert triton_binary.load(path, (base[1:65], y, out, a), (64, 1, 4)) is None  # alignment
    assert triton_binary.load(path, (x.double(), y, out, a), (64, 1, 4)) is None  # dtype
    assert triton_binary.load(path, (x, y, out, 3.0), (64, 1, 4)) is None  # scalar value
    assert triton_binary.load(path, (base[16:80], y, out, a), (64, 1, 4)) is not None
    assert triton_binary.load(path, _args(), (64, 1, 4), [True]) is None  # another variant
    with monkeypatch.context() as m:
        m.setattr(triton_binary, "_triton_version", lambda: "0.0")
        assert triton_binary.load(path, _args(), (64, 1, 4)) is None  # another Triton
    with monkeypatch.context() as m:
        m.setenv("TRITON_DEFAULT_FP_FUSION", "0")
        assert triton_binary.load(path, _args(), (64, 1, 4)) is None  # other settings
    with monkeypatch.context() as m:
        m.setattr(driver, "_active", _NoGpuDriver(80))
        assert triton_binary.load(path, _args(), (64, 1, 4)) is None  # another GPU
    monkeypatch.setattr(CompiledKernel, "_init_handles", lambda self: 1 / 0)
    assert triton_binary.load(path, _args(), (64, 1, 4)) is None  # loading failed
    monkeypatch.setattr(CompiledKernel, "_init_handles", lambda self: None)
    for f in (tmp_path / "triton-cache").rglob("*.cubin"):
        f.unlink()
    assert triton_binary.load(path, _args(), (64, 1, 4)) is None  # the cache entry is gone


class _Kernel:
    """What `triton_binary.load` builds: records the launches made through it."""

    def __init__(self, src: Any, group: dict[str, str], key: str) -> None:
        from triton.backends.compiler import GPUTarget

        self.src, self.group, self.hash = src, group, key
        self.metadata_group = group
        self.metadata = type("Metadata", (), {"target": GPUTarget("cuda", 90, 32)})()
        self.launches: list[tuple[Any, ...]] = []

    def _init_handles(self) -> None:
        pass

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        return lambda *args: self.launches.append((grid, args))


class _Source:
    def __init__(self, name: str) -> None:
        self.name = name
        self.signature = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "XBLOCK": "constexpr"}
        self.constants = {(2,): 8}


class _Jit:
    """A kernel's `fn[grid](*args, **kwargs)` standing in for the JIT: returns a compiled
    kernel, or fails where the JIT must not run."""

    def __init__(self, name: str, allowed: bool) -> None:
        self.name, self.allowed, self.calls = name, allowed, 0

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            assert self.allowed, "the JIT ran though a record was there"
            self.calls += 1
            k = _Kernel(_Source(self.name), {f"{self.name}.json": "unused"}, "h" * 64)
            return k

        return run


def test_a_later_process_launches_through_the_record(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor import config
    from inductor.codegen.triton import TritonKernel
    from triton.compiler import compiler as triton_compiler
    from triton.runtime import cache as triton_cache

    kernel = _pointwise_kernel()
    assert isinstance(kernel, TritonKernel) and not kernel.interpret
    args = (torch.randn(16), torch.empty(16))
    groups: list[str] = []

    class _Manager:
        def __init__(self, key: str) -> None:
            groups.append(key)

        def get_group(self, name: str) -> dict[str, str]:
            return {name: "unused"}

    monkeypatch.setattr(triton_cache, "get_cache_manager", _Manager)
    monkeypatch.setattr(triton_compiler, "CompiledKernel", _Kernel)
    from triton.runtime.driver import driver

    monkeypatch.setattr(driver, "_active", _NoGpuDriver())
    clear_launchers()
    try:
        with config.patch(cache_dir=str(tmp_path), triton_compile_workers=0):
            (first,) = load_triton_kernels([kernel]).values()
            first.fn = _Jit(kernel.name, allowed=True)
            first.config = kernel.configs[0]
            first(*args)
            first(*args)
            assert first.fn.calls == 1
            assert first.record.exists()
            clear_launchers()  # NOTE: as a new process
            monkeypatch.setattr(triton_launch, "_import",
                                lambda *a: pytest.fail("a recorded kernel's module imported"))
            (later,) = load_triton_kernels([kernel]).values()
            later(*args)
            later(*args)
    finally:
        clear_launchers()
    assert groups == ["h" * 64]
    compiled = later.fast.compiled
    assert isinstance(compiled, _Kernel) and len(compiled.launches) == 2
    assert compiled.src.constants == {(2,): 8}
    assert compiled.launches[0][1][:2] == args


def _pointwise_kernel() -> Any:
    from aten_trace import trace_aten
    from inductor import config
    from inductor.pipeline import plan
    from inductor.scheduler.fusion import FusedGroup
    from inductor.targets import TritonTarget, with_arg_types

    inputs = [torch.randn(16)]
    with config.patch(cpu_backend="triton"):
        p = plan(trace_aten(lambda x: (x.sin() + 1,), inputs), inputs)
    (group,) = [g for g in p.steps if isinstance(g, FusedGroup)]
    return with_arg_types(TritonTarget(interpret=False).generate(group, p.ctx.buffers),
                          p.ctx.buffers)


def _net(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = torch.nn.functional.gelu(x @ w)
    return torch.softmax(h, -1), h.sum(0), (h * h).sum()  # NOTE: the last a split reduction


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU box runs it)")
def test_a_warm_process_launches_real_kernels_from_their_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aten_trace import trace_aten
    from inductor import compile_aten, config
    from triton.runtime.jit import JITFunction

    torch.manual_seed(0)
    inputs = [torch.randn(4096, 64, device="cuda"), torch.randn(64, 256, device="cuda")]
    gm = trace_aten(_net, inputs)
    want = _net(*inputs)
    loaded: list[Any] = []
    real_load = triton_binary.load
    clear_launchers()
    try:
        with config.patch(cache_dir=str(tmp_path)):
            cold = compile_aten(gm, inputs)(*inputs)
            assert list(tmp_path.glob("triton/*.bin"))
            clear_launchers()  # NOTE: as a new process over the same cache
            monkeypatch.setattr(triton_binary, "load", lambda *a: loaded.append(
                real_load(*a)) or loaded[-1])
            monkeypatch.setattr(JITFunction, "run", lambda *a, **k: pytest.fail("JIT ran"))
            warm = compile_aten(gm, inputs)(*inputs)
            again = compile_aten(gm, inputs)(*inputs)
    finally:
        clear_launchers()
    assert loaded and all(k is not None for k in loaded)
    for got in (cold, warm, again):
        torch.testing.assert_close(tuple(got), want, atol=1e-4, rtol=1e-4)
