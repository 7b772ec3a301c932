"""`bias_unfuse.py`: an `addmm` whose users are all pointwise becomes `mm` + a bias add that
joins the consumer's kernel, on targets that want it (Triton), and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import compile_aten, config
from inductor.bias_unfuse import unfuse_matmul_bias

aten = torch.ops.aten


def _targets(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _inputs() -> list[torch.Tensor]:
    return [torch.randn(16, 8), torch.randn(12, 8), torch.randn(12)]


def _always(_: torch.device) -> bool:
    return True


def _and_relu(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return y, y.relu()


CASES: dict[str, tuple[Callable[..., Any], bool]] = {
    "gelu": (lambda x, w, b: F.gelu(F.linear(x, w, b)), True),
    "relu_and_residual": (lambda x, w, b: torch.relu(F.linear(x, w, b)) + F.linear(x, w, b),
                          True),
    "batched_linear": (lambda x, w, b: F.gelu(F.linear(x.view(4, 4, 8), w, b)) * 2, True),
    "batched_view_then_sum": (lambda x, w, b: F.linear(x.view(4, 4, 8), w, b).sum(), False),
    "reduction_user": (lambda x, w, b: F.linear(x, w, b).sum(0), False),
    "graph_output": (lambda x, w, b: _and_relu(F.linear(x, w, b)), False),
    "scaled": (lambda x, w, b: torch.addmm(b, x, w.t(), beta=0.5).relu(), False),
    "softmax_user": (lambda x, w, b: torch.softmax(F.linear(x, w, b), -1), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_only_addmms_with_pointwise_users_and_default_scales_are_unfused(case: str) -> None:
    fn, unfused = CASES[case]
    inputs = _inputs()
    gm = trace_aten(fn, inputs)
    before = _targets(gm).count(aten.addmm.default)
    out = unfuse_matmul_bias(gm, _always)
    after = _targets(out)
    if unfused:
        assert out is not gm and aten.addmm.default not in after
        assert after.count(aten.mm.default) == before
        torch.testing.assert_close(out(*inputs), gm(*inputs))
    else:
        assert out is gm and _targets(gm).count(aten.addmm.default) == before


def test_a_target_that_does_not_want_it_keeps_addmm() -> None:
    gm = trace_aten(CASES["gelu"][0], _inputs())
    assert unfuse_matmul_bias(gm, lambda d: d.type == "cuda") is gm
    with config.patch(cpu_backend="cpp"):
        compiled = compile_aten(gm, _inputs())
    assert compiled.extern_calls == {"aten.addmm.default": 1}


def test_triton_target_adds_the_bias_in_the_consumer_kernel() -> None:
    pytest.importorskip("triton")
    inputs = _inputs()
    fn = CASES["relu_and_residual"][0]
    with config.patch(cpu_backend="triton"):
        compiled = compile_aten(trace_aten(fn, inputs), inputs)
    assert compiled.extern_calls == {"aten.mm.default": 2}
    assert len(compiled.kernels) == 1  # NOTE: both bias adds, relu and the sum in one kernel
    torch.testing.assert_close(compiled(*inputs)[0], fn(*inputs))
