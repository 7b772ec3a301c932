"""Objects the frame disk cache (`compiler.frame_cache`) can record although capture checks
them by identity, as transformers' models make them: None, a method under decorators (the
class holds the wrapper), a property and its setter, a tuple of such objects, the globals of
a module that calls itself by another module's name (`_collections_abc`); and the transformed
code of a frame with side effects, whose graph is wrapped for an eager rerun
(`capture.graph_errors.GuardedGraph`) and which writes another module's globals. Before,
each made GPT-2's frame unrecordable: every warm process captured it again."""

from __future__ import annotations

import _collections_abc
import functools
import types
from typing import Any

import guards
import pytest
import torch
from aotgrad.backend import BackendCallable
from capture.graph_errors import GuardedGraph
from compiler import frame_cache, portable_guards
from guards.sources import ConstSource, ItemSource, LocalSource


def _decorate(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class Model:
    @_decorate
    def forward(self) -> int:
        return 1

    @property
    def flag(self) -> bool:
        return True

    @flag.setter
    def flag(self, value: bool) -> None:
        pass


def _round_trip(checks: dict[str, object]) -> tuple[Any, dict[str, object]]:
    builder = guards.GuardBuilder()
    for name, obj in checks.items():
        builder.add(LocalSource(name), guards.IdMatch.of(obj))
    data = portable_guards.encode(builder.build())
    return data, dict(checks)


def test_objects_of_transformers_models_are_portable() -> None:
    inner = Model.forward.__wrapped__  # type: ignore[attr-defined]
    prop = vars(Model)["flag"]
    checks: dict[str, object] = {"none": None, "inner": inner, "prop": prop,
                                 "setter": prop.fset, "items": (Model, inner, None, 3)}
    data, L = _round_trip(checks)
    assert guards.interpret(portable_guards.decode(data, L, {}), L, {}) is None


@pytest.mark.parametrize("name, other", [
    ("inner", Model.forward),  # the wrapper is not the function under it
    ("setter", vars(Model)["flag"].fget),
    ("items", (Model, Model.forward, None, 3)),
    ("items", (Model, Model.forward.__wrapped__, None)),  # type: ignore[attr-defined]
    ("none", 0),
])
def test_other_objects_are_refused(name: str, other: object) -> None:
    inner = Model.forward.__wrapped__  # type: ignore[attr-defined]
    prop = vars(Model)["flag"]
    data, L = _round_trip({"none": None, "inner": inner, "prop": prop, "setter": prop.fset,
                           "items": (Model, inner, None, 3)})
    with pytest.raises(portable_guards.NotPortable):
        portable_guards.decode(data, {**L, name: other}, {})


def test_the_globals_of_a_module_named_as_another_are_portable() -> None:
    namespace = vars(_collections_abc)
    assert namespace["__name__"] == "collections.abc"  # NOTE: another module's name
    builder = guards.GuardBuilder()
    builder.add(ItemSource(ConstSource.of(namespace, "vars(collections.abc)"), "__name__"),
                guards.EqualsMatch("collections.abc"))
    data = portable_guards.encode(builder.build())
    assert guards.interpret(portable_guards.decode(data, {}, {}), {}, {}) is None


def _code_with(*consts: object) -> types.CodeType:
    return compile("pass", "<test>", "exec").replace(co_consts=consts)


def test_a_wrapped_graph_and_module_globals_are_stripped_and_restored() -> None:
    graph = BackendCallable.__new__(BackendCallable)
    frame = _code_with()
    code = _code_with(GuardedGraph(graph, True, (), frame), vars(functools), 1)
    data, places, graphs = frame_cache._strip(code)
    assert graphs == [graph] and places["guarded"] == [True]
    loaded = BackendCallable.__new__(BackendCallable)
    restored = frame_cache._restore(data, places, [loaded], frame)
    wrapped, namespace, one = restored.co_consts
    assert isinstance(wrapped, GuardedGraph) and wrapped.compiled is loaded
    assert wrapped.random and wrapped.copied == () and wrapped.code is frame
    assert namespace is vars(functools) and one == 1


def test_a_wrapped_graph_that_copies_inputs_and_other_dicts_are_not_recorded() -> None:
    graph = BackendCallable.__new__(BackendCallable)
    with pytest.raises(frame_cache.NotRecordable):
        frame_cache._strip(_code_with(GuardedGraph(graph, False, (0,), None)))
    with pytest.raises(frame_cache.NotRecordable):
        frame_cache._strip(_code_with({"__name__": "functools"}))


def test_a_wrapped_graph_runs_the_graph() -> None:
    wrapped = GuardedGraph(lambda x: x + 1, False, (), None)
    assert torch.equal(wrapped(torch.ones(2)), torch.full((2,), 2.0))


def test_a_tuple_holding_a_plain_instance_is_not_portable() -> None:
    builder = guards.GuardBuilder()
    builder.add(LocalSource("items"), guards.IdMatch.of((Model, Model())))
    with pytest.raises(portable_guards.NotPortable):
        portable_guards.encode(builder.build())
