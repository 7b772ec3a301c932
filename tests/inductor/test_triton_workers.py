"""Parallel compile workers for Triton kernels (`runtime/triton_workers.py`): on the
interpreter (nothing to compile) the serial path is taken and results do not depend on the
option; a failing worker job is reported, never raised; the argument types workers warm
kernels up with come from the buffers. The parallel path itself only compiles on a GPU."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import compile_aten, config
from inductor.codegen.triton import TritonKernel
from inductor.pipeline import plan
from inductor.runtime import triton_workers
from inductor.runtime.triton_launch import load_triton_kernels
from inductor.runtime.triton_workers import WarmJob, compile_in_workers, warm
from inductor.targets import with_arg_types
from triton_support import OPTIONS


def _model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = F.gelu(x @ w + b)
    return torch.softmax(h, -1), h.sum(0), torch.rand_like(h)


def test_interpreter_takes_the_serial_path_with_identical_results(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = [torch.randn(24, 40), torch.randn(40, 33), torch.randn(33)]
    gm = trace_aten(_model, inputs)
    started: list[int] = []
    monkeypatch.setattr(triton_workers, "_executor",
                        lambda n: started.append(n) or pytest.fail("pool started"))
    results = []
    for workers in (8, 0):
        with config.patch({**OPTIONS, "triton_compile_workers": workers}):
            compiled = compile_aten(gm, inputs)
        torch.manual_seed(0)
        results.append(compiled(*inputs))
    assert not started
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
    with config.patch(OPTIONS):
        kernels = [k for k in compiled.kernels if isinstance(k, TritonKernel)]
        launchers = load_triton_kernels(kernels)
    assert all(launcher.warm_jobs() == [] for launcher in launchers.values())


def test_fewer_than_two_workers_or_jobs_or_four_compiles_is_serial() -> None:
    one = (((1,), (("XBLOCK", 128),)),)
    with config.patch(triton_compile_workers=4):
        assert not compile_in_workers([WarmJob("/nonexistent/k.py", "k", (), one)] * 3,
                                      interpret=False)
    job = WarmJob("/nonexistent/kernel.py", "k", (), one * 4)
    with config.patch(triton_compile_workers=1):
        assert not compile_in_workers([job, job], interpret=False)
    with config.patch(triton_compile_workers=4):
        assert not compile_in_workers([job], interpret=False)
        assert not compile_in_workers([job, job], interpret=True)


def test_a_failing_job_is_reported_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    assert warm(WarmJob("/nonexistent/kernel.py", "k", (), ())) is not None
    jobs = [WarmJob(f"/nonexistent/kernel{i}.py", f"k{i}", ("float32",),
                    (((1,), (("XBLOCK", 128),)), ((1,), (("XBLOCK", 256),))))
            for i in range(2)]
    with config.patch(triton_compile_workers=2), caplog.at_level(logging.INFO, "inductor"):
        assert compile_in_workers(jobs, interpret=False)
    assert "k0 not compiled in a worker" in caplog.text
    assert "k1 not compiled in a worker" in caplog.text


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
def test_gpu_kernels_are_compiled_in_workers(tmp_path: Any) -> None:
    inputs = [torch.randn(24, 40, device="cuda"), torch.randn(40, 33, device="cuda"),
              torch.randn(33, device="cuda")]
    gm = trace_aten(_model, inputs)
    with config.patch(triton_compile_workers=2, cache_dir=str(tmp_path), max_autotune=True,
                      mm_template="always"):
        compiled = compile_aten(gm, inputs)
    kernels = [k for k in compiled.kernels if isinstance(k, TritonKernel)]
    warmed = {p.stem for p in (tmp_path / "triton").glob("*.warm")}
    assert warmed == {k.name for k in kernels if k.split == 1 and not k.sizes}, warmed
    got = compiled(*inputs)
    want = _model(*inputs)
    for g, w in zip(got[:2], want[:2], strict=True):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
