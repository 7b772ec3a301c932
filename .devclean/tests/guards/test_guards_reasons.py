"""Failure reasons in words, one per check kind, and guards that never raise."""

from __future__ import annotations

import enum
import math
import types

import pytest
import torch
from guards import (
    AttrSource,
    BackendMatch,
    DictKeysMatch,
    EqualsMatch,
    GlobalSource,
    GlobalStateMatch,
    GuardBuilder,
    IdMatch,
    ItemSource,
    LengthMatch,
    LocalSource,
    NotNone,
    SizeSource,
    Source,
    TensorMatch,
    TypeMatch,
    backend_scope,
    compile_guard,
    explain,
    interpret,
    parse_relation,
)
from guards.checks import Check


def _one(source: Source, check: Check) -> GuardBuilder:
    b = GuardBuilder()
    b.add(source, check)
    return b


def _reason(b: GuardBuilder, L: dict[str, object], G: dict[str, object] | None = None) -> str:
    tree = b.build()
    G = G or {}
    assert compile_guard(tree).fn(L, G) is False
    reason = explain(tree, L, G)
    assert reason is not None
    return reason


def _passes(b: GuardBuilder, L: dict[str, object], G: dict[str, object] | None = None) -> None:
    tree = b.build()
    assert compile_guard(tree).fn(L, G or {}) is True
    assert interpret(tree, L, G or {}) is None


X = LocalSource("x")


def test_tensor_reasons() -> None:
    t = torch.randn(8, 3)
    b = _one(X, TensorMatch.from_tensor(t))
    _passes(b, {"x": torch.randn(8, 3)})
    assert _reason(b, {"x": torch.randn(16, 3)}) == \
        "tensor L['x'] size mismatch at index 0: expected 8, got 16"
    assert _reason(b, {"x": t.double()}) == \
        "tensor L['x'] dtype mismatch: expected torch.float32, got torch.float64"
    assert _reason(b, {"x": t.clone().requires_grad_()}) == \
        "tensor L['x'] requires_grad mismatch: expected False, got True"
    assert _reason(b, {"x": torch.randn(8, 3, 1)}) == \
        "tensor L['x'] rank mismatch: expected 2 dims, got 3"
    assert _reason(b, {"x": torch.randn(3, 8).t()}) == \
        "tensor L['x'] stride mismatch at index 0: expected 3, got 1"
    assert _reason(b, {"x": torch.nn.Parameter(t)}) == (
        "tensor L['x'] type mismatch: expected torch.Tensor, got torch.nn.parameter.Parameter")
    assert _reason(b, {"x": 3}) == "tensor L['x'] type mismatch: expected torch.Tensor, got int"
    with torch.inference_mode():
        inference = torch.randn(8, 3)
    assert _reason(b, {"x": inference}).startswith("tensor L['x'] dispatch keys mismatch")
    assert _reason(b, {}) == "could not read L['x']: KeyError: 'x'"


def test_tensor_size_one_strides_and_dynamic_dims() -> None:
    t = torch.randn(4, 1, 3)
    b = _one(X, TensorMatch.from_tensor(t))
    # a size-1 dimension's stride never addresses memory: not compared
    _passes(b, {"x": torch.randn(64).as_strided((4, 1, 3), (3, 99, 1))})
    dyn = GuardBuilder()
    dyn.add(X, TensorMatch.from_tensor(torch.randn(8, 3), dynamic_dims={0}))
    dyn.bind_symbol("s0", SizeSource(X, 0))
    dyn.add_relation(parse_relation("s0 % 8 == 0"))
    _passes(dyn, {"x": torch.randn(16, 3)})
    assert _reason(dyn, {"x": torch.randn(12, 3)}) == \
        "size relation (s0 % 8) == 0 failed with s0 = 12"
    assert _reason(dyn, {"x": torch.randn(16, 4)}) == \
        "tensor L['x'] size mismatch at index 1: expected 3, got 4"


def test_pinned_tensor_placement() -> None:
    """A pinned match (capture's parameters and buffers) also compares every stride, the
    storage offset and leafness."""
    w = torch.nn.Parameter(torch.randn(4, 1, 3))
    b = _one(X, TensorMatch.from_tensor(w, pinned=True))
    _passes(b, {"x": torch.nn.Parameter(torch.randn(4, 1, 3))})
    moved = torch.nn.Parameter(torch.randn(13)[1:].view(4, 1, 3))
    assert _reason(b, {"x": moved}) == (
        "tensor L['x'] storage offset mismatch (pinned): expected 0, got 1")
    odd = torch.nn.Parameter(torch.randn(64).as_strided((4, 1, 3), (3, 99, 1)))
    assert _reason(b, {"x": odd}) == (
        "tensor L['x'] stride mismatch (pinned): expected (3, 3, 1), got (3, 99, 1)")
    grown = torch.nn.Parameter(torch.randn(4, 1, 3))
    grown.requires_grad_(False)
    with torch.enable_grad():
        grown.mul_(torch.ones((), requires_grad=True))
    assert _reason(b, {"x": grown}) == (
        "tensor L['x'] is_leaf mismatch (pinned): expected True, got False")
    with pytest.raises(ValueError, match="no dynamic dimensions"):
        TensorMatch.from_tensor(w, dynamic_dims={0}, pinned=True)


def test_relations_between_symbols() -> None:
    b = GuardBuilder()
    b.bind_symbol("s0", SizeSource(X, 0))
    b.bind_symbol("s1", SizeSource(LocalSource("y"), 0))
    b.add_relation(parse_relation("s0 == s1"))
    b.add_relation(parse_relation("2 <= s0 <= 1024"))
    _passes(b, {"x": torch.randn(4), "y": torch.randn(4)})
    assert _reason(b, {"x": torch.randn(4), "y": torch.randn(5)}) == \
        "size relation s0 == s1 failed with s0 = 4, s1 = 5"
    assert _reason(b, {"x": torch.randn(1), "y": torch.randn(1)}) == \
        "size relation 2 <= s0 <= 1024 failed with s0 = 1"
    with pytest.raises(ValueError, match="unbound"):
        GuardBuilder().add_relation(parse_relation("s9 > 1")).build()


class Color(enum.Enum):
    RED = 1


def test_constant_reasons() -> None:
    mode = LocalSource("mode")
    b = _one(mode, EqualsMatch("train"))
    assert _reason(b, {"mode": "eval"}) == "L['mode'] == 'train' failed: got 'eval'"
    for value in [3, 2.5, math.nan, None, True, "s", (1, (2.0, None)), torch.float16,
                  torch.device("cpu"), Color.RED]:
        _passes(_one(mode, EqualsMatch(value)), {"mode": value})
    _passes(_one(mode, EqualsMatch(math.nan)), {"mode": float("nan")})
    for value, other in [(1, True), (True, 1), (1, 1.0), (0.0, 0), ((1,), (True,)),
                         (torch.float32, torch.float64), (None, 0), ("a", "b")]:
        _reason(_one(mode, EqualsMatch(value)), {"mode": other})
    with pytest.raises(TypeError):
        EqualsMatch([1, 2])


def test_other_check_reasons() -> None:
    obj = types.SimpleNamespace(items=[1, 2], cfg={"a": 1, "b": 2}, fn=len)
    o = LocalSource("o")
    assert _reason(_one(AttrSource(o, "items"), LengthMatch(3)), {"o": obj}) == \
        "len(L['o'].items) == 3 failed: got 2"
    assert _reason(_one(AttrSource(o, "cfg"), DictKeysMatch(("b", "a"))), {"o": obj}) == \
        "L['o'].cfg keys mismatch: expected ('b', 'a'), got ('a', 'b')"
    assert _reason(_one(AttrSource(o, "fn"), IdMatch.of(print)), {"o": obj}) == \
        "L['o'].fn is not the expected object <function print>: got <function len>"
    assert _reason(_one(o, TypeMatch(int)), {"o": obj}) == \
        "L['o'] type mismatch: expected int, got types.SimpleNamespace"
    assert _reason(_one(o, NotNone()), {"o": None}) == "L['o'] is not None failed: got None"
    assert _reason(_one(AttrSource(o, "foo"), NotNone()), {"o": obj}) == (
        "could not read L['o'].foo: AttributeError: "
        "'types.SimpleNamespace' object has no attribute 'foo'")
    assert _reason(_one(ItemSource(AttrSource(o, "items"), 5), NotNone()), {"o": obj}) == \
        "could not read L['o'].items[5]: IndexError: list index out of range"
    assert _reason(_one(GlobalSource("g"), EqualsMatch(1)), {}, {"g": 2}) == \
        "G['g'] == 1 failed: got 2"


def test_global_state_and_backend() -> None:
    b = GuardBuilder().add_global(GlobalStateMatch.current())
    _passes(b, {})
    with torch.no_grad():
        assert _reason(b, {}) == "grad mode changed: expected enabled"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert _reason(b, {}) == \
            "default dtype changed: expected torch.float32, got torch.float64"
    finally:
        torch.set_default_dtype(previous)
    torch.use_deterministic_algorithms(True)
    try:
        assert _reason(b, {}) == "deterministic algorithms changed: expected disabled"
    finally:
        torch.use_deterministic_algorithms(False)
    with torch.autocast("cpu"):
        assert _reason(b, {}) == "autocast state changed for cpu: expected disabled"
        inside = GuardBuilder().add_global(GlobalStateMatch.current())
        _passes(inside, {})
    assert _reason(inside, {}) == "autocast state changed for cpu: expected enabled"

    def eager() -> None: ...

    def other() -> None: ...

    by_backend = GuardBuilder().add_global(BackendMatch.of(eager))
    with backend_scope(eager):
        _passes(by_backend, {})
    with backend_scope(other):
        assert _reason(by_backend, {}).startswith("backend changed: expected <function")


def test_dict_keys_of_tensors_match_by_identity() -> None:
    """An optimizer's `state` is keyed by its parameters: the keys guard compares them by
    identity (an equal-valued one-element tensor is another key; a tensor's == is never
    called, which would raise for larger tensors)."""
    a, b = torch.zeros(1), torch.ones(3)
    state: dict[object, object] = {a: 1, "k": 2, b: 3}
    guard = _one(X, DictKeysMatch((a, "k", b)))
    _passes(guard, {"x": state})
    _passes(guard, {"x": {a: 0, "k": 0, b: 0}})
    same_value = torch.zeros(1)
    assert "keys are not the 3 objects" in _reason(guard, {"x": {same_value: 1, "k": 2, b: 3}})
    assert "keys are not the 3 objects" in _reason(guard, {"x": {b: 3, "k": 2, a: 1}})
    assert "keys are not the 3 objects" in _reason(guard, {"x": {a: 1, "k": 2}})
    assert "keys are not the 3 objects" in _reason(guard, {"x": {a: 1, "j": 2, b: 3}})
    assert str(ItemSource(X, a)).startswith("L['x'][<Tensor at 0x")
