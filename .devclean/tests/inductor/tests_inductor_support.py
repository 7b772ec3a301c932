"""Helpers for inductor tests: trace with the local recorder, compile, compare."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from aten_trace import trace_aten
from inductor import CompiledGraph, compile_aten, config

# NOTE: tests of whole programs go through the facade, which the independence check does not
# install with inductor alone (there `compiler` is only the tests/compiler folder)
_FACADE = importlib.util.find_spec("compiler")
HAS_FACADE = _FACADE is not None and _FACADE.origin is not None
needs_compiler = pytest.mark.skipif(not HAS_FACADE, reason="the compiler facade is not installed")


def run_and_compare(fn: Callable[..., Any], inputs: Sequence[torch.Tensor],
                    atol: float = 1e-5, rtol: float = 1e-5,
                    check_strides: bool = True) -> CompiledGraph:
    gm = trace_aten(fn, inputs)
    with config.patch(verify_ir=True):
        compiled = compile_aten(gm, list(inputs))
    got = compiled(*inputs)
    with torch.no_grad():
        expected = fn(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
        if check_strides and isinstance(e, torch.Tensor) and e.numel() > 1:
            assert _same_strides(g, e), (g.stride(), e.stride(), g.shape)
    return compiled


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    return all(sa == sb or n == 1 for sa, sb, n in zip(a.stride(), b.stride(), a.shape))
