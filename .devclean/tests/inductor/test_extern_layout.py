"""Extern ATen calls whose real outputs disagree with their meta functions: the kernels
that read them must see the real data (copied into the promised strides) or fail loudly
(a different size), never read the wrong elements.

Torch 2.11's `_fft_r2c` meta gives row-major strides where the kernel returns column-major
ones; a custom op whose fake implementation lies the same way reproduces it on any torch.
"""

from __future__ import annotations

import aotgrad
import pytest
import torch
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten

_LIB = torch.library.Library("inductor_test_layout", "DEF")
_LIB.define("col_major(Tensor x) -> Tensor")
_LIB.define("grow(Tensor x) -> Tensor")


def _col_major(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).t().contiguous().t()  # real strides (1, rows)


def _grow(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x])  # twice the rows the fake implementation promises


_LIB.impl("col_major", _col_major, "CPU")
_LIB.impl("grow", _grow, "CPU")
torch.library.register_fake("inductor_test_layout::col_major", lib=_LIB)(
    lambda x: torch.empty_like(x, memory_format=torch.contiguous_format))
torch.library.register_fake("inductor_test_layout::grow", lib=_LIB)(
    lambda x: torch.empty_like(x))


def _compiled(fn: object) -> object:
    return aotgrad.aot_function(fn, compile_aten, compile_aten,
                                decompositions=decomposition_table())


def test_extern_output_with_other_strides_is_restrided() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.inductor_test_layout.col_major(x)
        return y + torch.arange(y.shape[1], dtype=y.dtype)  # a kernel indexes y by strides

    x = torch.randn(5, 7)
    got = _compiled(f)(x)  # type: ignore[operator]
    torch.testing.assert_close(got, f(x))


def test_extern_output_with_another_size_raises() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.inductor_test_layout.grow(x) + 1

    with pytest.raises(RuntimeError, match="returned a tensor of size"):
        _compiled(f)(torch.randn(3, 4))  # type: ignore[operator]


def test_index_fill_gradient_with_repeated_indices() -> None:
    # NOTE: the value's gradient reads `_unique(index)`; without a fake implementation of
    # `_unique` (torch 2.11) its size was made up and the gradient counted one index.
    idx = torch.tensor([0, 0, 0, 1, 2])

    def f(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.index_fill(x, -1, idx, v)

    x = torch.randn(5, 5, requires_grad=True)
    v = torch.tensor(2.0, requires_grad=True)
    (expected,) = torch.autograd.grad(f(x, v).sum(), v)
    (got,) = torch.autograd.grad(_compiled(f)(x, v).sum(), v)  # type: ignore[operator]
    torch.testing.assert_close(got, expected)
    assert got.item() == 15.0


def test_returned_extern_output_gets_the_promised_layout() -> None:
    # NOTE: a forward graph's outputs include the tensors saved for the backward graph, whose
    # kernels index them with the strides the forward's meta values promised.
    out = _compiled(lambda x: torch.ops.inductor_test_layout.col_major(x))(  # type: ignore[operator]
        torch.ones(5, 7))
    assert out.stride() == (7, 1)
    torch.testing.assert_close(out, torch.full((5, 7), 2.0))
