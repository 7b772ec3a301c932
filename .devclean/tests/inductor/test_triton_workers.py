"""Parallel compile workers for Triton kernels (`runtime/triton_workers.py`): on the
interpreter (nothing to compile) the serial path is taken and results do not depend on the
option; a failing job is reported, never raised; the argument types kernels are compiled
for come from the buffers; and (without a GPU, for a GPU target: compiling needs none) what
the workers compile is exactly what the JIT looks up in Triton's cache afterwards."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import compile_aten, config
from inductor.codegen.triton import TritonKernel
from inductor.pipeline import plan
from inductor.runtime import triton_workers
from inductor.runtime.triton_launch import clear_launchers, load_triton_kernels
from inductor.runtime.triton_workers import (
    WarmJob,
    compile_in_workers,
    compile_requests,
    start_in_workers,
    stop_workers,
)
from inductor.scheduler.fusion import FusedGroup
from inductor.targets import TritonTarget, with_arg_types
from triton_support import OPTIONS


def _model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = F.gelu(x @ w + b)
    return torch.softmax(h, -1), h.sum(0), torch.rand_like(h)


@pytest.fixture
def no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_workers, "_pool", lambda n: pytest.fail("workers started"))


@pytest.mark.usefixtures("no_pool")
def test_interpreter_takes_the_serial_path_with_identical_results() -> None:
    inputs = [torch.randn(24, 40), torch.randn(40, 33), torch.randn(33)]
    gm = trace_aten(_model, inputs)
    results = []
    for workers in (8, 0):
        with config.patch({**OPTIONS, "triton_compile_workers": workers}):
            compiled = compile_aten(gm, inputs)
        torch.manual_seed(0)
        results.append(compiled(*inputs))
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
    with config.patch(OPTIONS):
        kernels = [k for k in compiled.kernels if isinstance(k, TritonKernel)]
        launchers = load_triton_kernels(kernels)
    assert all(launcher.warm_jobs() == [] for launcher in launchers.values())


@pytest.mark.usefixtures("no_pool")
def test_fewer_than_two_workers_or_compiles_is_serial() -> None:
    one = (((1,), (("XBLOCK", 128),)),)
    job = WarmJob("/nonexistent/kernel.py", "k", (), one * 2)
    with config.patch(triton_compile_workers=4):
        assert not compile_in_workers([WarmJob("/nonexistent/k.py", "k", (), one)],
                                      interpret=False)
        assert not compile_in_workers([job, job], interpret=True)
    with config.patch(triton_compile_workers=1):
        assert not compile_in_workers([job, job], interpret=False)


def test_a_failing_job_is_reported_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    jobs = [WarmJob(f"/nonexistent/kernel{i}.py", f"k{i}", ("float32",),
                    (((1,), (("XBLOCK", 128),)), ((1,), (("XBLOCK", 256),))))
            for i in range(2)]
    try:
        with config.patch(triton_compile_workers=2), caplog.at_level(logging.INFO, "inductor"):
            assert compile_in_workers(jobs, interpret=False)
    finally:
        stop_workers()
    assert "k0 not compiled in a worker" in caplog.text
    assert "k1 not compiled in a worker" in caplog.text


class _NoGpuDriver:
    """Triton's driver for an H100 on a machine without one: enough to compile."""

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int) -> int:
        return 0

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


def test_what_workers_compile_is_what_the_jit_finds_in_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    triton = pytest.importorskip("triton")
    from triton.compiler.compiler import ASTSource
    from triton.runtime.driver import driver

    inputs = [torch.randn(24, 40), torch.randn(40, 33), torch.randn(33)]
    with config.patch(cpu_backend="triton"):
        p = plan(trace_aten(_model, inputs), inputs)
    target = TritonTarget(interpret=False)
    kernels = [target.generate(g, p.ctx.buffers) for g in p.steps if isinstance(g, FusedGroup)]
    gpu = [k for k in kernels if isinstance(k, TritonKernel) and k.matmul is None]
    stop_workers()  # NOTE: workers started now see this test's Triton cache directory
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setattr(driver, "_active", _NoGpuDriver())
    hits: list[bool] = []
    monkeypatch.setattr(triton.knobs.compilation, "listener",
                        lambda **kw: hits.append(bool(kw.get("cache_hit"))))
    clear_launchers()
    try:
        with config.patch(triton_compile_workers=2, cache_dir=str(tmp_path)):
            launchers = load_triton_kernels(gpu)
            jobs = [job for launcher in launchers.values() for job in launcher.warm_jobs()]
            assert len(jobs) == len(gpu) >= 2
            assert compile_in_workers(jobs, interpret=False)
    finally:
        stop_workers()
        clear_launchers()
    assert hits == []  # NOTE: the workers compiled; this process did not
    assert all(Path(job.path).with_suffix(".warm").exists() for job in jobs)
    requests = [r for job in jobs for r in compile_requests(job, {})]
    assert len(requests) == sum(len(job.launches) for job in jobs)
    # NOTE: launches with real (aligned) tensors ask for the same compiles as the mock ones
    real = [WarmJob(job.path, job.name, tuple(  # type: ignore[arg-type]
        torch.empty(64, dtype=getattr(torch, a)) if isinstance(a, str) else a
        for a in job.args), job.launches) for job in jobs]
    assert [r for job in real for r in compile_requests(job, {})] == requests
    for path, name, signature, constants, attrs, options, gpu_target in requests:
        fn = triton_workers._load(path, name, {})
        triton.compile(ASTSource(fn, signature, constants, attrs), target=gpu_target,
                       options=options)
    assert hits == [True] * len(requests)


def _split_kernel() -> TritonKernel:
    inputs = [torch.randn(65536, 8)]
    with config.patch(cpu_backend="triton"):
        p = plan(trace_aten(lambda x: (x.sum(0),), inputs), inputs)
    kernels = [TritonTarget(interpret=False).generate(g, p.ctx.buffers)
               for g in p.steps if isinstance(g, FusedGroup)]
    (kernel,) = [k for k in kernels if isinstance(k, TritonKernel) and k.split > 1]
    return kernel


@contextlib.contextmanager
def _split_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[TritonKernel, Any, list[WarmJob]]]:
    """A split reduction's kernel, its launcher and warm jobs, with two workers that compile
    for an H100 on this machine (stopped after)."""
    pytest.importorskip("triton")
    from triton.runtime.driver import driver

    kernel = _split_kernel()
    stop_workers()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setattr(driver, "_active", _NoGpuDriver())
    clear_launchers()
    try:
        with config.patch(triton_compile_workers=2, cache_dir=str(tmp_path)):
            (launcher,) = load_triton_kernels([kernel]).values()
            yield kernel, launcher, launcher.warm_jobs()
    finally:
        stop_workers()
        clear_launchers()


def test_a_batch_is_compiled_behind_the_callers_back_and_dying_workers_end_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`start_in_workers` returns at once; the batch is waited for later (a launcher's first
    launch); workers that die mid-batch end it with errors instead of leaving it waiting."""
    with _split_jobs(tmp_path, monkeypatch) as (_, _, jobs):
        batch = start_in_workers(jobs, interpret=False)
        assert batch is not None
        assert not Path(jobs[0].path).with_suffix(".warm").exists()  # NOTE: still queued
        batch.wait()
        assert batch.errors == {}
        assert Path(jobs[0].path).with_suffix(".warm").exists()
        # NOTE: the same jobs again, and every worker killed as they are queued
        again = start_in_workers(jobs, interpret=False)
        assert again is not None
        for w in triton_workers._workers:
            w.proc.kill()
        finished = threading.Thread(target=again.wait, daemon=True)
        finished.start()
        finished.join(timeout=60)
        assert not finished.is_alive()


class _Recorder:
    """A kernel's `fn[grid](*args, **kwargs)` that records the launch instead."""

    def __init__(self, name: str, seen: list[tuple[str, Any, Any]]) -> None:
        self.name, self.seen = name, seen

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.seen.append((self.name, tuple(grid), tuple(sorted(kwargs.items()))))

        return launch


def test_split_reductions_are_warmed_as_they_are_launched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split reduction's partial kernel (every configuration) and its final kernel are
    compile jobs whose launches are exactly the ones `_run_split` makes."""
    with _split_jobs(tmp_path, monkeypatch) as (kernel, launcher, jobs):
        assert [j.name for j in jobs] == [kernel.name, f"{kernel.name}_final"]
        assert len(jobs[0].launches) == len(kernel.configs) > 1
        assert compile_in_workers(jobs, interpret=False)
    seen: list[tuple[str, Any, Any]] = []
    launcher.fn, launcher.final = _Recorder("fn", seen), _Recorder("final", seen)
    args = [torch.empty(64) for _ in kernel.arg_types]
    for cfg in kernel.configs:
        launcher._run_split(cfg, args)
    want = {(name, grid, tuple(sorted(kw)))
            for name, job in zip(("fn", "final"), jobs) for grid, kw in job.launches}
    assert set(seen) == want
    # NOTE: what the workers compiled is in the cache under the keys the JIT looks up
    hits: list[bool] = []
    monkeypatch.setattr(triton_workers, "_pool", lambda n: pytest.fail("workers started"))
    import triton
    from triton.compiler.compiler import ASTSource

    monkeypatch.setattr(triton.knobs.compilation, "listener",
                        lambda **kw: hits.append(bool(kw.get("cache_hit"))))
    for path, name, signature, constants, attrs, options, gpu_target in [
            r for job in jobs for r in compile_requests(job, {})]:
        fn = triton_workers._load(path, name, {})
        triton.compile(ASTSource(fn, signature, constants, attrs), target=gpu_target,
                       options=options)
    assert hits == [True] * (len(kernel.configs) + 1)


def test_arg_types_come_from_the_buffers() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        return (x * 2).half(), y.sum(-1).to(torch.bfloat16)

    inputs = [torch.randn(8, 16), torch.randn(8, 16, dtype=torch.float64)]
    with config.patch(OPTIONS):
        p = plan(trace_aten(f, inputs), inputs)
    types = []
    for k in p.kernels.values():
        assert isinstance(k, TritonKernel)
        typed = with_arg_types(k, p.ctx.buffers)
        assert len(typed.arg_types) == len(k.params)
        types.append(set(typed.arg_types))
    assert set().union(*types) == {"float32", "float64", "float16", "bfloat16"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU box runs it)")
def test_gpu_kernels_are_compiled_in_workers(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    import triton

    caplog.set_level(logging.INFO, "inductor")
    clear_launchers()
    inputs = [torch.randn(24, 40, device="cuda"), torch.randn(40, 33, device="cuda"),
              torch.randn(33, device="cuda")]
    gm = trace_aten(_model, inputs)
    compiles: list[tuple[str, bool]] = []
    try:
        with config.patch(triton_compile_workers=2, cache_dir=str(tmp_path), max_autotune=True,
                          mm_template="always"):
            compiled = compile_aten(gm, inputs)
            monkeypatch.setattr(triton.knobs.compilation, "listener", lambda **kw: compiles.append(
                (getattr(kw["src"], "name", "?"), bool(kw.get("cache_hit")))))
            # NOTE: the batch compiles behind compile_aten's back; each kernel's first launch
            # waits for it
            got = compiled(*inputs)
            torch.cuda.synchronize()
    finally:
        stop_workers()
    kernels = [k for k in compiled.kernels if isinstance(k, TritonKernel)]
    warmed = {p.stem for p in (tmp_path / "triton").glob("*.warm")}
    assert warmed == {k.name for k in kernels if not k.sizes}, caplog.text
    want = _model(*inputs)
    for g, w in zip(got[:2], want[:2], strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    # NOTE: the first call's JIT finds every warmed kernel's binary in the cache
    missed = [name for name, hit in compiles if name in warmed and not hit]
    assert compiles and not missed, (compiles, caplog.text)


def test_gpu_kernels_stay_compiled_ones_after_interpreted_kernels_ran(tmp_path: Path) -> None:
    """A process that ran interpreted kernels (CPU tensors) still builds GPU kernels as
    compiled ones, and `triton.language` is left as it was (no interpreter patches, Triton's
    library functions compiled ones): the interpreter is on only while interpreted kernels
    are imported and run."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    owners = (tl, tl.core, tl.math, tl.tensor, tl.dtype)
    before = [dict(vars(o)) for o in owners]
    inputs = [torch.randn(24, 40), torch.randn(40, 33), torch.randn(33)]
    with config.patch(OPTIONS):
        compile_aten(trace_aten(_model, inputs), inputs)(*inputs)
    for owner, was in zip(owners, before, strict=True):
        changed = [n for n, v in vars(owner).items() if n in was and was[n] is not v]
        assert not changed, (owner, changed)
    assert isinstance(tl.sum, JITFunction)
    with config.patch(cpu_backend="triton"):
        p = plan(trace_aten(_model, inputs), inputs)
    gpu = [TritonTarget(interpret=False).generate(g, p.ctx.buffers)
           for g in p.steps if isinstance(g, FusedGroup)]
    clear_launchers()
    try:
        with config.patch(cache_dir=str(tmp_path)):
            launchers = load_triton_kernels([k for k in gpu if isinstance(k, TritonKernel)
                                             and k.matmul is None])
    finally:
        clear_launchers()
    assert launchers and all(isinstance(launcher.fn, JITFunction)
                             for launcher in launchers.values())
