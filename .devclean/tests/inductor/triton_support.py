"""Helpers of the Triton-target tests: run on CUDA where there is a GPU, else on CPU tensors
through Triton's interpreter (`cpu_backend='triton'`), always against eager."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from aten_trace import trace_aten
from inductor import CompiledGraph, compile_aten, config
from inductor.codegen.triton import TritonKernel

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
OPTIONS: dict[str, Any] = {"cpu_backend": "triton", "verify_ir": True}


def compile_triton(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> CompiledGraph:
    """`fn` traced to ATen and compiled with the Triton target."""
    gm = trace_aten(fn, inputs)
    with config.patch(OPTIONS):
        return compile_aten(gm, list(inputs))


def triton_kernels(compiled: CompiledGraph) -> list[TritonKernel]:
    """The graph's kernels, all of which must be Triton's."""
    assert all(isinstance(k, TritonKernel) for k in compiled.kernels), compiled.kernels
    return [k for k in compiled.kernels if isinstance(k, TritonKernel)]


def check(fn: Callable[..., Any], inputs: Sequence[torch.Tensor], atol: float = 1e-5,
          rtol: float = 1e-5, kernels: int | None = None) -> CompiledGraph:
    """Compile `fn` for the Triton target, compare each output with eager's (strides
    too), and, when given, the number of kernels."""
    compiled = compile_triton(fn, inputs)
    got = compiled(*inputs)
    with torch.no_grad():
        expected = fn(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
        if isinstance(e, torch.Tensor) and e.numel() > 1:
            assert all(sa == sb or n == 1 for sa, sb, n in zip(g.stride(), e.stride(),
                                                               e.shape))
    ks = triton_kernels(compiled)
    if kernels is not None:
        assert len(ks) == kernels, [k.source for k in ks]
    return compiled


def randn(*size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Normal values on the tests' device."""
    return torch.randn(*size, device=DEVICE).to(dtype)
