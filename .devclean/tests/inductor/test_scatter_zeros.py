"""Scatters into fresh zeros run in place (`lowering/scatter_zeros.py`): one extern call
that zero-fills its output and scatters into it, as eager's backward does; zeros that
anything else reads, or a fill other than zero, keep the functional op."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests_inductor_support import needs_compiler, run_and_compare


def _externs(compiled: Any) -> str:
    return " ".join(compiled.extern_calls)


def test_scatter_add_into_zeros_is_one_in_place_call() -> None:
    i = torch.randint(0, 8, (4, 5))
    x = torch.randn(4, 5)
    compiled = run_and_compare(lambda x, i: torch.zeros(4, 8).scatter_add(1, i, x), [x, i])
    assert "scatter_into_zeros" in _externs(compiled) and "aten.scatter_add" not in _externs(
        compiled)


@pytest.mark.parametrize("fill", [0.0, 1.0])
def test_index_put_into_zeros_and_into_a_fill(fill: float) -> None:
    idx = torch.tensor([3, 0, 3, 7])
    v = torch.randn(4, 6)
    compiled = run_and_compare(
        lambda v, idx: torch.full((9, 6), fill).index_put((idx,), v, accumulate=True), [v, idx])
    assert ("scatter_into_zeros" in _externs(compiled)) == (fill == 0.0)


def test_zeros_read_elsewhere_keep_the_functional_op() -> None:
    i = torch.randint(0, 8, (4, 5))
    x = torch.randn(4, 5)

    def f(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.zeros(4, 8)
        return z.scatter(1, i, x), z + 1

    compiled = run_and_compare(f, [x, i])
    assert "scatter_into_zeros" not in _externs(compiled)


@needs_compiler
@pytest.mark.parametrize("case", ["gather", "index", "index_select", "scatter_reduce"])
def test_backwards_that_scatter_match_eager(case: str) -> None:
    import compiler

    torch.manual_seed(0)
    x = torch.randn(12, 7, requires_grad=True)
    i = torch.randint(0, 7, (12, 3))
    rows = torch.tensor([4, 0, 4, 11, 4])
    fns = {
        "gather": lambda x: x.gather(1, i),
        "index": lambda x: x[rows] * 3,
        "index_select": lambda x: x.index_select(0, rows).sin(),
        "scatter_reduce": lambda x: torch.zeros(12, 7).scatter_reduce(
            1, i, x[:, :3], "amax", include_self=False),
    }
    fn = fns[case]
    compiler.reset()
    compiled = compiler.compile(fn, backend="inductor")
    for _ in range(2):
        got = compiled(x)
        got.sum().backward()
        grad, x.grad = x.grad, None
        want = fn(x)
        want.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(grad, x.grad)
        x.grad = None
