"""Aliasing checks, fixed-object roots, absent keys and tensor-fact sources.

`GuardBuilder.add_aliasing` guards which sources hold one object (`L['a'] is L['b']`) and
which objects stay distinct; `ConstSource` roots guards on state read through a fixed object
(a class dict, a module's globals); `KeyAbsent` guards that a name is not in a namespace;
`CallSource` reads facts such as `x.storage_offset()`. Each test compares the generated
check with the interpreter and looks at the generated code and the failure text.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from guards import (
    AttrSource,
    CallSource,
    ConstSource,
    EqualsMatch,
    GuardBuilder,
    IdMatch,
    ItemSource,
    KeyAbsent,
    LocalSource,
    TensorMatch,
    compile_guard,
    explain,
)

A, B, C = LocalSource("a"), LocalSource("b"), LocalSource("c")


def _both(tree, L, G=None):
    """The compiled result (both variants) and the interpreter's reason; they must agree."""
    G = G or {}
    guard = compile_guard(tree, list(L), native=False)
    fast = guard(L, G)
    assert guard.fn_args is not None
    assert guard.fn_args(*L.values(), G) is fast
    reason = explain(tree, L, G)
    assert fast is (reason is None), (fast, reason)
    return fast, reason


def test_sources_that_alias_must_keep_aliasing():
    x, y = torch.randn(3), torch.randn(3)
    tree = GuardBuilder().add_aliasing([[A, B], [C]]).build()
    assert _both(tree, {"a": x, "b": x, "c": y}) == (True, None)
    ok, reason = _both(tree, {"a": x, "b": y, "c": torch.randn(3)})
    assert not ok and reason == ("aliasing changed: L['b'] is no longer L['a'] "
                                 "(compiled for one object at both)")
    ok, reason = _both(tree, {"a": x, "b": x, "c": x})
    assert not ok and reason == ("aliasing changed: L['c'] is now the same object as L['a'] "
                                 "(compiled for distinct objects)")


def test_generated_aliasing_code():
    tree = GuardBuilder().add_aliasing([[A, B], [C]]).build()
    source = compile_guard(tree, native=False).source
    assert "v1 is v0" in source and "v0 is not v2" in source
    assert tree.render().splitlines()[-1].endswith(
        "aliasing: L['a'] is L['b']; distinct objects: L['a'], L['c']")


def test_many_distinct_objects_use_one_set_of_ids():
    names = [LocalSource(f"t{i}") for i in range(6)]
    tree = GuardBuilder().add_aliasing([[s] for s in names]).build()
    source = compile_guard(tree, native=False).source
    assert "len({id(" in source and ") == 6" in source
    values = {f"t{i}": object() for i in range(6)}
    assert _both(tree, values) == (True, None)
    values["t4"] = values["t1"]
    ok, reason = _both(tree, values)
    assert not ok and "L['t4'] is now the same object as L['t1']" in reason


def test_aliasing_check_comes_after_its_last_binding_and_with_tensor_checks():
    x = torch.randn(2)
    b = GuardBuilder()
    b.add(A, TensorMatch.from_tensor(x))
    b.add_aliasing([[A], [ItemSource(B, 0)]])
    b.add(C, EqualsMatch(3))
    tree = b.build()
    assert _both(tree, {"a": x, "b": [torch.randn(2)], "c": 3}) == (True, None)
    assert _both(tree, {"a": x, "b": [x], "c": 3})[0] is False
    assert _both(tree, {"a": x, "b": [], "c": 3})[0] is False  # unreadable: a failure


def test_single_sources_add_no_check():
    tree = GuardBuilder().add_aliasing([[A]]).build()
    assert tree.count_checks() == 1  # only the binding, which always holds


def test_key_absent():
    namespace = {"present": 1}
    tree = GuardBuilder().add(ConstSource.of(namespace, "ns"), KeyAbsent("len")).build()
    assert _both(tree, {}) == (True, None)
    namespace["len"] = len
    ok, reason = _both(tree, {})
    assert not ok and reason == "'len' is now in <ns>: got <function len>"
    del namespace["len"]
    assert _both(tree, {}) == (True, None)


def test_const_source_reads_the_object_itself():
    class K:
        scale = 2.0

    root = ConstSource.of(K)
    assert root.name() == f"<{K.__qualname__}>"
    tree = GuardBuilder().add(AttrSource(root, "scale"), EqualsMatch(2.0)).build()
    source = compile_guard(tree, native=False).source
    assert "= obj0.scale" in source  # the root is the closure constant itself, not read
    assert _both(tree, {}) == (True, None)
    K.scale = 3.0
    ok, reason = _both(tree, {})
    assert not ok and reason.endswith(".scale == 2.0 failed: got 3.0")


def test_const_sources_compare_by_identity():
    a, b = {"k": 1}, {"k": 1}
    assert ConstSource.of(a) == ConstSource.of(a)
    assert ConstSource.of(a) != ConstSource.of(b)
    assert len({ConstSource.of(a), ConstSource.of(a), ConstSource.of(b)}) == 2


def test_call_source_reads_a_tensor_fact():
    base = torch.randn(10)
    tree = GuardBuilder().add(CallSource(A, "storage_offset"), EqualsMatch(2)).build()
    assert _both(tree, {"a": base[2:6]}) == (True, None)
    ok, reason = _both(tree, {"a": base[3:7]})
    assert not ok and reason == "L['a'].storage_offset() == 2 failed: got 3"
    with pytest.raises(ValueError):
        CallSource(A, "not a name")


def test_id_match_keeps_its_object_and_compares_with_is():
    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing)
    tree = GuardBuilder().add(A, IdMatch.of(thing)).build()
    assert " is obj" in compile_guard(tree, native=False).source
    assert _both(tree, {"a": thing}) == (True, None)
    del thing
    gc.collect()
    assert ref() is not None, "the guard keeps the object alive, so its id is never reused"
    assert _both(tree, {"a": Thing()})[0] is False
