"""Innermost loops split by the divisor of merged dims (codegen/loop_split.py): the heads
of an attention block put back together load contiguously, in a vectorized inner loop, and
give eager's numbers; where the split does not apply, the plain loop stays."""

from __future__ import annotations

import sympy  # type: ignore[import-untyped]
import torch
from inductor.codegen.loop_split import fold_divisor, split_divisor
from inductor.sizevars import FloorDiv, ModIndex
from tests_inductor_support import run_and_compare


def _sources(compiled: object) -> str:
    return "\n".join(k.source for k in compiled.kernels)  # type: ignore[attr-defined]


def test_head_merge_is_split_and_exact() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(4, 32, 256) * 2 + 1

    compiled = run_and_compare(f, [torch.randn(4, 4, 32, 64)])
    src = _sources(compiled)
    assert "ind_floordiv" not in src and "x2j < 64" in src


def test_cat_of_merged_heads_is_split_per_part() -> None:
    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        parts = [t.transpose(1, 2).reshape(2, 16, 128) + i for i, t in enumerate((q, k, v))]
        return torch.cat(parts, 2)

    inputs = [torch.randn(2, 4, 16, 32) for _ in range(3)]
    compiled = run_and_compare(f, inputs)
    assert "ind_floordiv" not in _sources(compiled)


def test_no_split_when_the_divisor_does_not_divide_the_range() -> None:
    # NOTE: 6 columns of 4: the merged dim's extent 24 is fine but the divisor 4 is below
    # the split's minimum, and a slice starting at 3 is not a multiple: plain loops.
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(2, 5, 24)[:, :, 3:] * 3

    run_and_compare(f, [torch.randn(2, 6, 5, 4)])


def test_split_divisor_conditions() -> None:
    x, y = sympy.symbols("x y", integer=True)
    assert split_divisor([FloorDiv(x, 64) + ModIndex(x, 64)], x, 0, 256) == 64
    assert split_divisor([FloorDiv(x + 128, 64)], x, 64, 192) == 64
    assert split_divisor([FloorDiv(x + 3, 64)], x, 0, 256) is None  # offset not a multiple
    assert split_divisor([FloorDiv(x, 64), ModIndex(x, 32)], x, 0, 256) is None  # two divisors
    assert split_divisor([FloorDiv(x + y, 64)], x, 0, 256) is None  # not x + constant
    assert split_divisor([FloorDiv(x, 64)], x, 0, 100) is None  # range not a multiple
    assert split_divisor([FloorDiv(x, 4)], x, 0, 64) is None  # too short an inner loop
    assert split_divisor([x + y], x, 0, 64) is None  # nothing to split


def test_fold_divisor_matches_the_arithmetic() -> None:
    x = sympy.Symbol("x", integer=True)
    xh, xj = sympy.symbols("xh xj", integer=True)
    expr = 8192 * FloorDiv(x + 128, 64) + ModIndex(x + 128, 64) + x
    folded = fold_divisor(expr, x, 64)
    for value in range(256):
        h, j = divmod(value, 64)
        want = 8192 * ((value + 128) // 64) + (value + 128) % 64 + value
        assert folded.subs({xh: h, xj: j, x: value}) == want
