"""Batch norm reaches inductor as pointwise work fused with its neighbours (eval mode) and as
reductions (training), not as an extern ATen call: results, gradients and running statistics
equal eager's over several calls, on the C++ target and the Triton target (interpreter)."""

from __future__ import annotations

import copy
import logging

import compiler
import pytest
import torch
from torch import nn

TARGETS: list[dict[str, object]] = [{}, {"cpu_backend": "triton"}]


def _model(train: bool) -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                      nn.Linear(8 * 6 * 6, 4))
    return m.train(train)


@pytest.mark.parametrize("options", TARGETS)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_matches_eager(options: dict[str, object], train: bool) -> None:
    if options:
        pytest.importorskip("triton")
    eager = _model(train)
    ours = copy.deepcopy(eager)
    compiled = compiler.compile(ours, backend="inductor", options=options)
    for _ in range(3):
        x = torch.randn(2, 3, 8, 8)
        want, got = eager(x), compiled(x)
        want.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        for p, q in zip(eager.parameters(), ours.parameters()):
            torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4)
        bn, bn2 = eager[1], ours[1]
        torch.testing.assert_close(bn2.running_mean, bn.running_mean)
        torch.testing.assert_close(bn2.running_var, bn.running_var)
        assert int(bn2.num_batches_tracked) == int(bn.num_batches_tracked)


def test_eval_batch_norm_is_fused_into_one_kernel(caplog: pytest.LogCaptureFixture) -> None:
    m = _model(False)[:3]
    x = torch.randn(2, 3, 8, 8)
    compiled = compiler.compile(m, backend="inductor", options={"debug": True})
    with caplog.at_level(logging.DEBUG, logger="inductor.output_code"), torch.no_grad():
        got = compiled(x)
        want = m(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    wrapper = "\n".join(r.getMessage() for r in caplog.records
                        if r.name == "inductor.output_code")
    call = wrapper[wrapper.index("def call"):].split("\n\n")[0]
    # NOTE: conv is one extern call; batch norm and relu one generated kernel after it
    assert "batch_norm" not in call, call
    assert call.count("kernel") + call.count("triton_") == 1, call
