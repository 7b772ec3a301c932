"""Tensor checks stay sound when a live tensor object changes in place, and for tensors of
other layouts that look the same (shape, dtype, device, even `is_contiguous()`).

Nothing is cached per tensor object: a guard that passed (even many times) on a tensor must
fail once that very object's metadata changes, in ways that keep `id(t)` and `t._version`.
Both evaluators are checked against the expected answer (agreeing is not enough: a shared
cache would make them agree on a wrong answer).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard, interpret
from guards.dispatch_keys import keys_match, raw_keys


def test_keys_match_reads_the_key_set() -> None:
    t = torch.randn(3)
    expected = raw_keys(t)
    assert keys_match(t, expected)
    with torch.inference_mode():
        inference = torch.randn(3)
    assert not keys_match(inference, expected)
    assert not keys_match(torch.randn(3, dtype=torch.complex64).conj(), expected)


def _set_neg(t: torch.Tensor) -> None:
    torch._C._set_neg(t, True)


def _data_neg_view(t: torch.Tensor) -> None:
    t.data = torch._neg_view(torch.randn(t.shape))


def _data_same_storage_neg_view(t: torch.Tensor) -> None:
    t.data = torch._neg_view(t.detach())


def _data_zero_tensor(t: torch.Tensor) -> None:
    t.data = torch._efficientzerotensor(t.shape)


def _data_inference(t: torch.Tensor) -> None:
    with torch.inference_mode():
        t.data = torch.randn(t.shape)


def _swap_neg_view(t: torch.Tensor) -> None:
    torch.utils.swap_tensors(t, torch._neg_view(torch.randn(t.shape)))


def _data_double(t: torch.Tensor) -> None:
    t.data = torch.randn(t.shape, dtype=torch.float64)


def _requires_grad(t: torch.Tensor) -> None:
    t.requires_grad_(True)


def _transpose_in_place(t: torch.Tensor) -> None:
    t.t_()


def _resize(t: torch.Tensor) -> None:
    t.resize_(3, 2)


def _as_strided(t: torch.Tensor) -> None:
    t.as_strided_((2, 3), (1, 2))


KEY_CHANGES: list[Callable[[torch.Tensor], None]] = [
    _set_neg, _data_neg_view, _data_same_storage_neg_view, _data_zero_tensor, _data_inference,
    _swap_neg_view]
OTHER_CHANGES: list[Callable[[torch.Tensor], None]] = [
    _data_double, _requires_grad, _transpose_in_place, _resize, _as_strided]


def _passes(dispatch_keys: bool, change: Callable[[torch.Tensor], None]) -> tuple[bool, bool]:
    t = torch.randn(2, 3)
    b = GuardBuilder().add(LocalSource("x"), TensorMatch.from_tensor(t, dispatch_keys=dispatch_keys))
    tree = b.build()
    fn = compile_guard(tree).fn
    L = {"x": t}
    for _ in range(5):  # NOTE: seen many times first: nothing may be remembered about it
        assert fn(L, {}) and interpret(tree, L, {}) is None
    change(t)
    return fn(L, {}), interpret(tree, L, {}) is None


@pytest.mark.parametrize("change", KEY_CHANGES, ids=lambda f: f.__name__)
def test_key_set_change_on_a_live_tensor_fails(change: Callable[[torch.Tensor], None]) -> None:
    assert _passes(True, change) == (False, False)


@pytest.mark.parametrize("change", OTHER_CHANGES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dispatch_keys", [True, False])
def test_metadata_change_on_a_live_tensor_fails(dispatch_keys: bool,
                                                change: Callable[[torch.Tensor], None]) -> None:
    assert _passes(dispatch_keys, change) == (False, False)


def _other_layout(layout: str, shape: tuple[int, ...]) -> torch.Tensor:
    dense = torch.randn(shape)
    if layout == "sparse_coo":
        return dense.to_sparse()
    if layout == "sparse_csr":
        return dense.to_sparse_csr()
    return dense.to_mkldnn()


LAYOUT_CASES = [("sparse_coo", (1,)), ("sparse_coo", (4, 8)), ("sparse_coo", (1, 1)),
                ("sparse_csr", (4, 8)), ("sparse_csr", (1, 1))]
if torch.backends.mkldnn.is_available():
    LAYOUT_CASES += [("mkldnn", (1,)), ("mkldnn", (4, 8)), ("mkldnn", (1, 1))]


@pytest.mark.parametrize(("layout", "shape"), LAYOUT_CASES)
@pytest.mark.parametrize("dispatch_keys", [True, False])
def test_other_layouts_fail(dispatch_keys: bool, layout: str, shape: tuple[int, ...]) -> None:
    dense = torch.randn(shape)
    other = _other_layout(layout, shape)
    tree = GuardBuilder().add(
        LocalSource("x"), TensorMatch.from_tensor(dense, dispatch_keys=dispatch_keys)).build()
    fn = compile_guard(tree).fn
    assert fn({"x": dense}, {}) is True
    assert fn({"x": other}, {}) is False
    failure = interpret(tree, {"x": other}, {})
    assert failure is not None and "layout mismatch" in failure.reason
