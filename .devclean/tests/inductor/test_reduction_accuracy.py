"""Long float32 reductions are as exact as eager's: the error against the float64 answer
stays within 2x of eager's (sums, means, var/std of 1e6..6e6 elements; rows contiguous and
strided; serial and OpenMP-parallel kernels).

Errors are averaged over several outputs (rows, seeds): one result's error is mostly its
final rounding, so a single value compares luck, not the summation order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
from aten_trace import trace_aten
from inductor import compile_aten, config

Fn = Callable[[torch.Tensor], torch.Tensor]


def _mean_errors(fn: Fn, inputs: Sequence[torch.Tensor], threads: int | None = None
                 ) -> tuple[float, float]:
    """(ours, eager): mean absolute error against float64 over every output element."""
    gm = trace_aten(fn, [inputs[0]])
    if threads is None:
        compiled = compile_aten(gm, [inputs[0]])
    else:
        with config.patch(threads=threads):
            compiled = compile_aten(gm, [inputs[0]])
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


def _inputs(shape: tuple[int, ...], n: int, kind: str = "rand") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(sum(shape) + len(kind))
    out = []
    for _ in range(n):
        if kind == "rand":
            out.append(torch.rand(shape, generator=g))
        else:
            out.append(torch.randn(shape, generator=g) + 0.25)
    return out


def _check(ours: float, eager: float) -> None:
    assert ours <= 2 * eager, f"error {ours:.3g} vs eager {eager:.3g}"


@pytest.mark.parametrize("kind", ["rand", "randn"])
def test_full_sum_and_mean_of_a_million(kind: str) -> None:
    xs = _inputs((1_000_000,), 6, kind)
    _check(*_mean_errors(lambda t: t.sum(), xs))
    _check(*_mean_errors(lambda t: t.mean() * 3, xs))


def test_row_mean_of_a_million_contiguous() -> None:
    xs = _inputs((4, 1_000_000), 2)
    _check(*_mean_errors(lambda t: t.mean(1), xs))
    _check(*_mean_errors(lambda t: t.sum(-1, keepdim=True) + 1, xs))


def test_rows_strided() -> None:
    # NOTE: reduced along a strided dim: column kernels (vectorized across the outer dim)
    xs = _inputs((1_000_000, 4), 2)
    _check(*_mean_errors(lambda t: t.sum(0), xs))
    _check(*_mean_errors(lambda t: t.t().mean(1), xs))
    ys = _inputs((2_000_000,), 3)
    _check(*_mean_errors(lambda t: t[::2].sum(), ys))
    zs = _inputs((300_000, 32), 1)
    _check(*_mean_errors(lambda t: t.sum(0), zs))
    _check(*_mean_errors(lambda t: (t * 2).mean(0), zs, threads=1))


@pytest.mark.parametrize("threads", [1, 2])
def test_full_sum_of_six_million_serial_and_parallel(threads: int) -> None:
    xs = _inputs((6_000_000,), 3)
    _check(*_mean_errors(lambda t: t.sum(), xs, threads=threads))


def test_full_sum_over_several_dims() -> None:
    xs = _inputs((1500, 2000), 4, "randn")
    _check(*_mean_errors(lambda t: t.sum(), xs, threads=2))
    _check(*_mean_errors(lambda t: t.sum(), xs, threads=1))
    ys = _inputs((200_000, 10), 3)
    _check(*_mean_errors(lambda t: t.sum(), ys, threads=1))


def test_var_std_of_a_million() -> None:
    xs = _inputs((3, 1_000_000), 2, "randn")
    _check(*_mean_errors(lambda t: t.var(1), xs))
    _check(*_mean_errors(lambda t: t.std(1, correction=0), xs))
    _check(*_mean_errors(lambda t: torch.var_mean(t, 1)[1], xs))


def test_short_reductions_unchanged_and_exact() -> None:
    # NOTE: rows below the cascade's length keep their one-pass kernels: equal to eager
    xs = _inputs((64, 300), 2)
    for fn in (lambda t: t.sum(1), lambda t: t.sum(0), lambda t: t.softmax(-1)):
        gm = trace_aten(fn, [xs[0]])
        compiled = compile_aten(gm, [xs[0]])
        for x in xs:
            torch.testing.assert_close(compiled(x)[0], fn(x), atol=1e-5, rtol=1e-5)
