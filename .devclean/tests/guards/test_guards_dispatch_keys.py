"""Tensor checks stay sound when a live tensor object changes in place, and for tensors of
other layouts that look the same (shape, dtype, device, even `is_contiguous()`).

Nothing is cached per tensor object: a guard that passed (even many times) on a tensor must
fail once that very object's metadata changes, in ways that keep `id(t)` and `t._version`.
Both evaluators (the generated check pure Python and native, where the native checker can be
built, and the interpreter) are checked against the expected answer (agreeing is not
enough: a shared cache would make them agree on a wrong answer).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from guards import GuardBuilder, GuardTree, LocalSource, TensorMatch, compile_guard, interpret
from guards.dispatch_keys import keys_match, raw_keys
from guards.native import load_native


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


def _compiled(tree: GuardTree) -> list[Callable[[dict[str, object], dict[str, object]], bool]]:
    """The pure-Python generated check, and the native one where it can be built."""
    fns = [compile_guard(tree, native=False).fn]
    if load_native() is not None:
        guard = compile_guard(tree, native=True)
        assert guard.native
        fns.append(guard.fn)
    return fns


def _passes(dispatch_keys: bool, change: Callable[[torch.Tensor], None]) -> tuple[bool, ...]:
    """(each compiled check's answer..., the interpreter's) after `change` on a live tensor."""
    t = torch.randn(2, 3)
    check = TensorMatch.from_tensor(t, dispatch_keys=dispatch_keys)
    b = GuardBuilder().add(LocalSource("x"), check)
    tree = b.build()
    fns = _compiled(tree)
    L = {"x": t}
    for _ in range(5):  # NOTE: seen many times first: nothing may be remembered about it
        assert all(fn(L, {}) for fn in fns) and interpret(tree, L, {}) is None
    change(t)
    return (*(fn(L, {}) for fn in fns), interpret(tree, L, {}) is None)


@pytest.mark.parametrize("change", KEY_CHANGES, ids=lambda f: f.__name__)
def test_key_set_change_on_a_live_tensor_fails(change: Callable[[torch.Tensor], None]) -> None:
    assert not any(_passes(True, change))


@pytest.mark.parametrize("change", OTHER_CHANGES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dispatch_keys", [True, False])
def test_metadata_change_on_a_live_tensor_fails(dispatch_keys: bool,
                                                change: Callable[[torch.Tensor], None]) -> None:
    assert not any(_passes(dispatch_keys, change))


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
    for fn in _compiled(tree):
        assert fn({"x": dense}, {}) is True
        assert fn({"x": other}, {}) is False
    failure = interpret(tree, {"x": other}, {})
    assert failure is not None and "layout mismatch" in failure.reason
