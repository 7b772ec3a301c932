"""`copy.copy` and `copy.deepcopy` in traced code.

In: the value to copy. Out: a value for the copy. Containers and objects made while tracing
are copied symbolically (new values, items copied recursively for a deep copy). An existing
plain Python object (a config, say: no tensors, no custom copy protocol) is deep-copied for
real at capture, after its whole state is guarded (so the copy is what eager would make);
the copy is a `PrivateObjectValue`: a real object only the trace knows, read and written
for real, that must not escape the frame (eager makes a fresh one on every call).
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from guards.sources import AttrSource, ItemSource, Source

from capture.graph_break import GraphBreakKind, unsupported
from capture.interp.attributes import delete_attribute
from capture.interp.builtins_table import special
from capture.interp.private_objects import ATOMIC, PrivateObjectValue, plain, unchanged
from capture.output_graph import GuardKind
from capture.values import (
    ConstantValue,
    DictValue,
    ListValue,
    ObjectValue,
    TensorValue,
    TupleValue,
    Value,
)
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator

# Most leaves of an object's state guarded for one deep copy.
MAX_STATE_GUARDS = 4000


@special(copy.deepcopy)
def _deepcopy(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "copy.deepcopy with a memo")
    return deep_copy(tx, args[0], {})


@special(delattr)
def _delattr(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    if len(args) != 2 or kwargs or not isinstance(args[1], ConstantValue):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "delattr with a computed name")
    delete_attribute(tx, args[0], str(args[1].value))
    return ConstantValue(None)


@special(copy.copy)
def _copy(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "copy.copy with extra arguments")
    value = args[0]
    if isinstance(value, ListValue):
        return ListValue(list(value.items))
    if isinstance(value, DictValue) and value.cls in (dict, collections.OrderedDict):
        return DictValue(dict(value.items), None, value.cls)
    if isinstance(value, (ConstantValue, TupleValue)):
        return value  # immutable: copy.copy returns it
    if isinstance(value, ObjectValue) and value.obj is None and plain(value.cls) and (
        value.dict_items is None
    ):
        new = ObjectValue(None, value.cls)
        new.attrs = dict(value.attrs)
        return new
    raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"copy.copy of {value.describe()}")


def deep_copy(tx: Translator, value: Value, memo: dict[int, Value]) -> Value:
    """The value of `copy.deepcopy(value)`."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, ConstantValue):
        if isinstance(value.value, ATOMIC) or _atomic_tuple(value.value):
            return value
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"copy.deepcopy of {type(value.value).__name__}")
    if isinstance(value, TensorValue):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "copy.deepcopy of a tensor")
    if isinstance(value, TupleValue):
        items = [deep_copy(tx, item, memo) for item in value.items]
        if all(a is b for a, b in zip(items, value.items)):
            return value
        return TupleValue(items, None, value.cls)
    if isinstance(value, ListValue):
        new_list = ListValue([])
        memo[id(value)] = new_list
        new_list.items = [deep_copy(tx, item, memo) for item in value.items]
        return new_list
    if isinstance(value, DictValue) and value.cls in (dict, collections.OrderedDict):
        new_dict = DictValue({}, None, value.cls)
        memo[id(value)] = new_dict
        for key, (key_value, item) in value.items.items():
            new_dict.items[key] = (key_value, deep_copy(tx, item, memo))
        return new_dict
    if isinstance(value, ObjectValue) and value.obj is not None:
        return _real_deep_copy(tx, value)
    if isinstance(value, ObjectValue) and plain(value.cls) and value.dict_items is None:
        new = ObjectValue(None, value.cls)
        memo[id(value)] = new
        new.attrs = {name: deep_copy(tx, attr, memo) for name, attr in value.attrs.items()}
        return new
    raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"copy.deepcopy of {value.describe()}")


def _real_deep_copy(tx: Translator, value: ObjectValue) -> Value:
    """Deep-copy an existing plain object for real, its state guarded first."""
    obj = value.obj
    if not isinstance(value, PrivateObjectValue):
        if value.source is None:
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                              f"copy.deepcopy of {value.describe()} (no source to guard)")
        seen: set[int] = set()
        _guard_state(tx, obj, value.source, seen, [MAX_STATE_GUARDS])
        if _pending_writes(tx) & seen:
            # NOTE: writes traced so far are not in the real objects yet: a real copy of
            # an object they touch would miss them.
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                              f"copy.deepcopy of {value.describe()} after writes to its state")
    elif not unchanged(tx):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"copy.deepcopy of {value.describe()} after changes to its lists "
                          "or dicts")
    memo: dict[int, object] = {}
    copied = copy.deepcopy(obj, memo)
    tx.output.keepalive.append(copied)
    return PrivateObjectValue(copied, type(copied))


def _pending_writes(tx: Translator) -> set[int]:
    """The ids of the real objects that writes traced so far will change."""
    effects = tx.output.side_effects
    owners = [owner for owner, _ in effects.attr_writes.values()]
    ids = {id(owner.obj) for owner in owners if isinstance(owner, ObjectValue)}
    for container in effects.containers.values():
        real = getattr(container, "real", None)
        if real is not None:
            ids.add(id(real))
    return ids


def _guard_state(tx: Translator, obj: object, source: Source, seen: set[int],
                 budget: list[int]) -> None:
    """Guard everything `copy.deepcopy(obj)` reads, refusing what it cannot copy plainly."""
    output = tx.output
    budget[0] -= 1
    if budget[0] < 0:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "copy.deepcopy of an object with a very large state")
    if isinstance(obj, ATOMIC) or _atomic_tuple(obj):
        wrap(output, obj, source)
        return
    if id(obj) in seen:
        return  # NOTE: shared or cyclic: guarded where first reached
    seen.add(id(obj))
    cls = type(obj)
    if cls in (list, tuple):
        assert isinstance(obj, (list, tuple))
        output.add_guard(source, GuardKind.TYPE_MATCH, cls)
        output.add_guard(source, GuardKind.LEN, len(obj))
        for i, item in enumerate(obj):
            _guard_state(tx, item, ItemSource(source, i), seen, budget)
        return
    if cls in (dict, collections.OrderedDict):
        assert isinstance(obj, dict)
        _guard_dict(tx, obj, source, seen, budget)
        return
    if cls in (set, frozenset):
        assert isinstance(obj, (set, frozenset))
        if all(isinstance(k, ATOMIC) for k in obj):
            output.add_guard(source, GuardKind.TYPE_MATCH, cls)
            output.add_guard(source, GuardKind.CONST_EQ, frozenset(obj))
            return
    elif plain(cls):
        output.add_guard(source, GuardKind.TYPE_MATCH, cls)
        _guard_dict(tx, vars(obj), AttrSource(source, "__dict__"), seen, budget)
        return
    raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                      f"copy.deepcopy of an object holding a {cls.__qualname__}")


def _guard_dict(tx: Translator, obj: Mapping[Any, object], source: Source, seen: set[int],
                budget: list[int]) -> None:
    if not all(isinstance(k, (str, int)) for k in obj):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "copy.deepcopy of a dict with keys other than str and int")
    tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(obj))
    tx.output.add_guard(source, GuardKind.DICT_KEYS, tuple(obj))
    for key, item in obj.items():
        _guard_state(tx, item, ItemSource(source, key), seen, budget)


def _atomic_tuple(obj: object) -> bool:
    return isinstance(obj, tuple) and type(obj) is tuple and all(
        isinstance(x, ATOMIC) or _atomic_tuple(x) for x in obj
    )
