"""Cross-entropy training on the fusing path: nll_loss's backward as a pointwise comparison
with the target (bit for bit ATen's gradient, no scatter into zeros), and a same-dtype `to`
as the alias eager makes it (the forward writes the log-softmax once)."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from inductor.decompositions import decomposition_table
from tests_inductor_support import needs_compiler

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_nll_loss_backward_decomposition_is_atens_gradient_bit_for_bit(
        dtype: torch.dtype) -> None:
    decomp = decomposition_table()[aten.nll_loss_backward.default]
    torch.manual_seed(0)
    for batched, reduction, weighted, ignore in itertools.product(
            (True, False), (0, 1, 2), (False, True), (-100, 2)):
        x = torch.randn(5, 7, dtype=dtype) if batched else torch.randn(7, dtype=dtype)
        target = torch.tensor([1, 2, 6, 2, 0]) if batched else torch.tensor(2)
        weight = torch.rand(7, dtype=dtype) if weighted else None
        out, total = aten.nll_loss_forward(x, target, weight, reduction, ignore)
        grad = torch.randn_like(out)
        want = aten.nll_loss_backward(grad, x, target, weight, reduction, ignore, total)
        got = decomp(grad, x, target, weight, reduction, ignore, total)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want), (batched, reduction, weighted, ignore)


@needs_compiler
def test_cross_entropy_step_writes_the_log_softmax_once_and_scatters_nothing(
        caplog: Any) -> None:
    import compiler

    compiler.reset()
    torch.manual_seed(0)
    x = torch.randn(16, 40, requires_grad=True)
    target = torch.randint(0, 40, (16,))
    target[3] = -100

    def loss(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(x, target)

    caplog.set_level(logging.DEBUG, logger="inductor.output_code")
    got = compiler.compile(loss, backend="inductor")(x, target)
    got.backward()
    grad, x.grad = x.grad, None
    want = loss(x, target)
    want.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(grad, x.grad)
    forward, backward = caplog.text.split("# wrapper")[1:3]
    assert forward.count("empty_strided((16, 40)") == 1, forward
    assert "scatter" not in backward and "empty_strided((16, 40)" in backward, backward
    compiler.reset()
