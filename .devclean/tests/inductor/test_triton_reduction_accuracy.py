"""Long float32 reductions on the Triton target are as exact as eager's (issue 15, point 5):
the error against the float64 answer of a 1,000,000-element sum or mean stays within 2x
of eager's. On a machine without a GPU the kernels run on CPU tensors through Triton's
interpreter (`cpu_backend='triton'`); the C++ target has `test_reduction_accuracy.py`.

Errors are averaged over several inputs: one result's error is mostly its final rounding,
so a single value compares luck, not the summation order.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from triton_support import DEVICE, compile_triton, triton_kernels

Fn = Callable[[torch.Tensor], torch.Tensor]


def _inputs(shape: tuple[int, ...], n: int, kind: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(sum(shape) + len(kind))
    make = torch.rand if kind == "rand" else torch.randn
    return [(make(shape, generator=g) + (0.0 if kind == "rand" else 0.25)).to(DEVICE)
            for _ in range(n)]


def _mean_errors(fn: Fn, inputs: list[torch.Tensor]) -> tuple[float, float]:
    """(ours, eager): mean absolute error against float64 over every output element."""
    compiled = compile_triton(fn, [inputs[0]])
    assert triton_kernels(compiled), "no Triton kernel: the test would measure nothing"
    ours = eager = 0.0
    count = 0
    for x in inputs:
        ref = fn(x.double())
        got = compiled(x)[0]
        assert got.dtype == torch.float32 and got.shape == ref.shape
        ours += (got.double() - ref).abs().sum().item()
        eager += (fn(x).double() - ref).abs().sum().item()
        count += ref.numel()
    return ours / count, eager / count


@pytest.mark.parametrize("kind", ["rand", "randn"])
def test_full_sum_and_mean_of_a_million(kind: str) -> None:
    xs = _inputs((1_000_000,), 4, kind)
    for fn in (lambda t: t.sum(), lambda t: t.mean() * 3):
        ours, eager = _mean_errors(fn, xs)
        assert ours <= 2 * eager, f"error {ours:.3g} vs eager {eager:.3g}"


def test_row_mean_of_a_million() -> None:
    xs = _inputs((2, 1_000_000), 2, "rand")
    ours, eager = _mean_errors(lambda t: t.mean(1), xs)
    assert ours <= 2 * eager, f"error {ours:.3g} vs eager {eager:.3g}"
