"""Special handlers: methods of list, tuple, dict, set and str on container values."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from capture.graph_break import GraphBreakKind, RaisedInTrace, unsupported
from capture.interp import operators
from capture.interp.builtins_table import (
    NONE,
    _const,
    _hashable,
    _items,
    _sorted,
    dict_update,
    special,
)
from capture.values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    ListValue,
    ObjectValue,
    SetValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator


# -- container methods --------------------------------------------------------------------
def _mut(tx: Translator, value: Value) -> None:
    tx.output.side_effects.mutate_container(value)


@special(list.append)
def _list_append(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst, item = args
    assert isinstance(lst, ListValue)
    _mut(tx, lst)
    lst.append(item)
    return NONE


@special(list.extend)
def _list_extend(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst, items = args
    assert isinstance(lst, ListValue)
    _mut(tx, lst)
    lst.extend(_items(tx, items))
    return NONE


@special(list.insert)
def _list_insert(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst, index, item = args
    assert isinstance(lst, ListValue)
    lst.items.insert(_const(index, "index"), item)
    _mut(tx, lst)
    return NONE


@special(list.pop)
def _list_pop(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst = args[0]
    assert isinstance(lst, ListValue)
    index = _const(args[1], "index") if len(args) > 1 else -1
    _mut(tx, lst)
    return lst.items.pop(index)


@special(list.clear)
def _list_clear(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst = args[0]
    assert isinstance(lst, ListValue)
    _mut(tx, lst)
    if lst.is_loaded:
        lst.items.clear()  # in place: a loop over the list stops, as in eager
    else:
        lst.items = []
    return NONE


@special(list.reverse)
def _list_reverse(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst = args[0]
    assert isinstance(lst, ListValue)
    lst.items.reverse()
    _mut(tx, lst)
    return NONE


@special(list.copy)
def _list_copy(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ListValue(args[0].unpack())


@special(list.index, tuple.index)
def _seq_index(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    for i, item in enumerate(args[0].unpack()):
        if operators.is_same(item, args[1]) or operators.python_constant(item) == operators.python_constant(args[1]) and operators.python_constant(item)[0]:
            return ConstantValue(i)
    raise unsupported(GraphBreakKind.EXCEPTION, "ValueError: item not in list")


@special(list.count, tuple.count)
def _seq_count(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    target = _const(args[1], "count item")
    return ConstantValue(sum(1 for i in args[0].unpack() if operators.python_constant(i) == (True, target)))


def _dict_of(value: Value, tx: Translator | None = None) -> DictValue:
    if isinstance(value, DictValue):
        return value
    if isinstance(value, ObjectValue) and value.obj is not None and value.dict_items is None:
        real = value.obj
        if isinstance(real, dict) and tx is not None:
            from guards.sources import ItemSource

            from capture.values.wrap import wrap

            items: dict[object, tuple[Value, Value]] = {}
            for k, v in dict.items(real):
                src = ItemSource(value.source, k) if value.source is not None and isinstance(k, (str, int)) else None
                items[k] = (ConstantValue(k), wrap(tx.output, v, src))
            value.dict_items = DictValue(items, value.source, type(real))
    if isinstance(value, ObjectValue) and value.dict_items is not None:
        assert isinstance(value.dict_items, DictValue)
        return value.dict_items
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"dict method on {value.describe()}")


@special(dict.get, collections.OrderedDict.get)
def _dict_get(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    key = _const(args[1], "dict key")
    if key in d.items:
        return d.items[key][1]
    return args[2] if len(args) > 2 else NONE


@special(dict.keys, collections.OrderedDict.keys)
def _dict_keys(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return DictViewValue(_dict_of(args[0], tx), "keys")


@special(dict.values, collections.OrderedDict.values)
def _dict_values(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return DictViewValue(_dict_of(args[0], tx), "values")


@special(dict.items, collections.OrderedDict.items)
def _dict_items(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return DictViewValue(_dict_of(args[0], tx), "items")


@special(dict.update, collections.OrderedDict.update)
def _dict_update(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    dict_update(tx, d, list(args[1:]), kwargs)
    _mut(tx, d)
    return NONE


@special(dict.pop, collections.OrderedDict.pop)
def _dict_pop(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    key = _const(args[1], "dict key")
    if key in d.items:
        _mut(tx, d)
        return d.items.pop(key)[1]
    if len(args) > 2:
        return args[2]
    raise RaisedInTrace(KeyError(key))


@special(dict.setdefault, collections.OrderedDict.setdefault)
def _dict_setdefault(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    key = _const(args[1], "dict key")
    if key not in d.items:
        d.items[key] = (args[1], args[2] if len(args) > 2 else NONE)
        _mut(tx, d)
    return d.items[key][1]


@special(dict.copy, collections.OrderedDict.copy)
def _dict_copy(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    return DictValue(dict(d.items), None, d.cls)


@special(dict.clear)
def _dict_clear(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    d.items.clear()
    _mut(tx, d)
    return NONE


@special(dict.__setitem__, collections.OrderedDict.__setitem__)
def _dict_setitem(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    key = _const(args[1], "dict key")
    _mut(tx, d)
    d.set_item(key, (args[1], args[2]))
    return NONE


@special(dict.__getitem__, collections.OrderedDict.__getitem__)
def _dict_getitem(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return operators.get_item(tx, _dict_of(args[0], tx), args[1])


@special(dict.__contains__)
def _dict_contains(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(operators.contains(tx, args[1], _dict_of(args[0], tx)))


@special(set.add)
def _set_add(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    s = args[0]
    assert isinstance(s, SetValue)
    s.add(_hashable(args[1], "set item"), args[1])
    _mut(tx, s)
    return NONE


@special(set.update)
def _set_update(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    s = args[0]
    assert isinstance(s, SetValue)
    s.update([(_hashable(item, "set item"), item) for item in _items(tx, args[1])], args[1])
    _mut(tx, s)
    return NONE


@special(set.discard, set.remove)
def _set_discard(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    s = args[0]
    assert isinstance(s, SetValue)
    s.discard(_hashable(args[1], "set item"))
    _mut(tx, s)
    return NONE


@special(str.join)
def _str_join(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    sep = _const(args[0], "join separator")
    return ConstantValue(sep.join(_const(i, "joined item") for i in _items(tx, args[1])))


@special(str.format)
def _str_format(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fmt = _const(args[0], "format string")
    return ConstantValue(
        fmt.format(*[_const(a, "format arg") for a in args[1:]], **{k: _const(v, "format arg") for k, v in kwargs.items()})
    )



@special(list.sort)
def _list_sort(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst = args[0]
    assert isinstance(lst, ListValue)
    result = _sorted(tx, [ListValue(list(lst.items))], kwargs)
    assert isinstance(result, ListValue)
    lst.items[:] = result.items
    _mut(tx, lst)
    return NONE


@special(list.remove)
def _list_remove(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    lst, target = args
    assert isinstance(lst, ListValue)
    ok, wanted = operators.python_constant(target)
    for i, item in enumerate(lst.items):
        # `==` as eager: identity first, then equality of known Python objects.
        if operators.is_same(item, target):
            break
        known, obj = operators.python_constant(item)
        if not (ok and known):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "list.remove of an unknown item")
        if obj == wanted:
            break
    else:
        raise RaisedInTrace(ValueError("list.remove(x): x not in list"))
    _mut(tx, lst)
    del lst.items[i]  # in place: a loop over the list goes on as eager's does
    return NONE


@special(set.pop)
def _set_pop(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    s = args[0]
    assert isinstance(s, SetValue)
    if s.order is None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "set.pop of a set made elsewhere")
    if not s.items:
        raise RaisedInTrace(KeyError("pop from an empty set"))
    _mut(tx, s)
    key = s.order.pop()  # the shadow has eager's history: the same element comes out
    return s.items.pop(key)


@special(dict.popitem)
def _dict_popitem(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    d = _dict_of(args[0], tx)
    if not d.items:
        raise RaisedInTrace(KeyError("popitem(): dictionary is empty"))
    _mut(tx, d)
    key = next(reversed(d.items))
    key_value, item = d.items.pop(key)
    return TupleValue([key_value, item])
