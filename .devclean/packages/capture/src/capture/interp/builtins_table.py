"""Special callables: Python builtins, container methods, the `operator` module, torch
helpers with Python-level answers, and the constant-folding rule for pure callables on
constants (context managers: `context_specials`).

`lookup(fn)` returns a handler `(tx, args, kwargs) -> Value` or None.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import functools
import math
import operator
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture import torch_ops
from capture.contexts import LiveIterator
from capture.graph_break import HINT_DATA_DEPENDENT, GraphBreakKind, RaisedInTrace, unsupported
from capture.interp import dispatch, iteration, operators
from capture.interp.lookup_guards import class_method
from capture.values import (
    ConstantValue,
    ContextValue,
    DictIteratorValue,
    DictValue,
    DictViewValue,
    FunctionValue,
    IteratorValue,
    LazyIteratorValue,
    ListValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
    SetIteratorValue,
    SetValue,
    SuperValue,
    SymNodeValue,
    TensorValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator

SpecialHandler = Callable[["Translator", list[Value], dict[str, Value]], Value]
_TABLE: dict[int, tuple[object, SpecialHandler]] = {}


def special(*fns: object) -> Callable[[SpecialHandler], SpecialHandler]:
    def decorate(handler: SpecialHandler) -> SpecialHandler:
        for fn in fns:
            _TABLE[id(fn)] = (fn, handler)
        return handler

    return decorate


def lookup(fn: object) -> SpecialHandler | None:
    entry = _TABLE.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1]
    return None


NONE = ConstantValue(None)


def _const(value: Value, what: str) -> Any:
    ok, obj = operators.python_constant(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"{what} of {value.describe()}")
    return obj


def _hashable(value: Value, what: str) -> Any:
    ok, obj = operators.python_constant(value)
    if not ok:
        ok, obj = operators.real_object(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"{what} of {value.describe()}")
    return obj


# -- constant folding -----------------------------------------------------------------
_PURE_MODULES = ("math", "operator", "_operator", "builtins", "string", "re", "itertools", "enum")
_PURE_TYPES = (str, int, float, bool, tuple, bytes, complex, frozenset, type(None), range, slice, torch.Size, torch.dtype, torch.device, operator.itemgetter, operator.attrgetter)


def try_fold(fn: object, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """Call `fn` for real if it is pure and every argument is a constant."""
    if not _is_pure(fn):
        return None
    values = []
    for a in args:
        ok, obj = operators.python_constant(a)
        if not ok:
            return None
        values.append(obj)
    kw = {}
    for k, v in kwargs.items():
        ok, obj = operators.python_constant(v)
        if not ok:
            return None
        kw[k] = obj
    try:
        result = fn(*values, **kw)  # type: ignore[operator]  # checked callable
    except Exception as e:  # noqa: BLE001  # eager raises this at the same line
        raise RaisedInTrace(e) from None

    return wrap_constant_result(result)


def wrap_constant_result(result: object) -> Value:
    if isinstance(result, list):
        return ListValue([wrap_constant_result(x) for x in result])
    if isinstance(result, dict):
        return DictValue({k: (ConstantValue(k), wrap_constant_result(v)) for k, v in result.items()})
    return ConstantValue(result)


def _is_pure(fn: object) -> bool:
    if isinstance(fn, type):
        return fn in _PURE_TYPES or fn in (torch.finfo, torch.iinfo) or issubclass(fn, (str, int, float)) and fn.__module__ == "builtins"
    objclass = getattr(fn, "__objclass__", None)
    if objclass is not None:
        return objclass in _PURE_TYPES
    self_obj = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinFunctionType) and isinstance(self_obj, _PURE_TYPES):
        return True
    mod = getattr(fn, "__module__", None) or ""
    return isinstance(fn, (types.BuiltinFunctionType, functools.partial)) and mod in _PURE_MODULES


# -- builtins ---------------------------------------------------------------------------
@special(len)
def _len(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (value,) = args
    if isinstance(value, TensorValue):
        if value.fake.dim() == 0:
            raise unsupported(GraphBreakKind.EXCEPTION, "len() of a 0-d tensor")
        first: object = value.fake.shape[0]
        if isinstance(first, torch.SymInt):  # nonzero(x): a size read at run time
            return torch_ops.call_torch(
                tx, torch.Tensor.size, [value, ConstantValue(0)], {}, method="size")
        return ConstantValue(value.fake.shape[0])
    if isinstance(value, (ListValue, TupleValue, DictValue, SetValue)):
        return ConstantValue(len(value.items))
    if isinstance(value, DictViewValue):
        return ConstantValue(len(value.dict_value.items))
    if isinstance(value, ModuleValue):
        operators.guard_module_entries(tx, value)
        return ConstantValue(len(value.module))  # type: ignore[arg-type]  # ModuleList etc.
    if isinstance(value, ObjectValue) and value.dict_items is not None:
        return ConstantValue(len(value.dict_items.items))
    if isinstance(value, ObjectValue):

        method = class_method(tx, value.cls, "__len__")
        if method is not None and hasattr(method, "__code__"):
            return dispatch.call_value(tx, ConstantValue(method), [value], {})
    return ConstantValue(len(_const(value, "len()")))


def _classinfo(value: Value) -> Any:
    ok, obj = operators.python_constant(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "isinstance() with a non-constant type")
    return obj


@special(isinstance)
def _isinstance(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    value, classinfo = args
    cls_info = _classinfo(classinfo)
    if isinstance(value, ConstantValue):
        return ConstantValue(isinstance(value.value, cls_info))
    if isinstance(value, ModuleValue):
        return ConstantValue(isinstance(value.module, cls_info))
    if isinstance(value, ObjectValue) and value.obj is not None:
        return ConstantValue(isinstance(value.obj, cls_info))
    cls = value.python_type()
    return ConstantValue(issubclass(cls, cls_info))


@special(issubclass)
def _issubclass(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(issubclass(_const(args[0], "issubclass"), _classinfo(args[1])))


@special(type)
def _type(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "type() with 3 arguments")
    value = args[0]
    if isinstance(value, ConstantValue):
        return ConstantValue(type(value.value))
    if isinstance(value, ModuleValue):
        return ConstantValue(type(value.module))
    return ConstantValue(value.python_type())


@special(getattr)
def _getattr(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    name = _const(args[1], "getattr name")
    try:
        return dispatch.get_attr(tx, args[0], name)
    except dispatch.AttrMissing:
        if len(args) == 3:

            dispatch.guard_missing_attr(tx, args[0])
            return args[2]
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"AttributeError: {args[0].describe()} has no {name!r}"
        ) from None


@special(hasattr)
def _hasattr(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    name = _const(args[1], "hasattr name")
    try:
        dispatch.get_attr(tx, args[0], name)
    except dispatch.AttrMissing:
        dispatch.guard_missing_attr(tx, args[0])
        return ConstantValue(False)
    return ConstantValue(True)


@special(setattr)
def _setattr(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    dispatch.store_attr(tx, args[0], _const(args[1], "setattr name"), args[2])
    return NONE


@special(object.__setattr__)
def _object_setattr(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    owner, name, value = args
    if isinstance(owner, ObjectValue) and owner.obj is None:
        owner.attrs[_const(name, "attribute name")] = value
        return NONE

    dispatch.store_attr(tx, owner, _const(name, "attribute name"), value)
    return NONE


@special(super)
def _super(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if args:
        cls = _const(args[0], "super() class")
        return SuperValue(cls, args[1])
    cell = tx.cells.get("__class__")
    if cell is None or cell.contents is None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "zero-argument super() without __class__")
    first = tx.code.co_varnames[0]
    obj = tx.locals.get(first)
    if obj is None:
        first_cell = tx.cells.get(first)
        obj = first_cell.contents if first_cell is not None else None
    if obj is None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "super() without a first argument")
    return SuperValue(_const(cell.contents, "__class__"), obj)


@special(range)
def _range(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(range(*[_const(a, "range()") for a in args]))


@special(iter)
def _iter(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return iterate(tx, args[0])


@special(next)
def _next(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    it = args[0]
    if not isinstance(it, IteratorValue):
        it = iterate(tx, it)
    item = it.next_item()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise RaisedInTrace(StopIteration())
    return item


def iterate(tx: Translator, value: Value) -> IteratorValue:
    """iter(value) with its items known now."""
    if isinstance(value, IteratorValue):
        return value
    if isinstance(value, ListValue):
        # Shares the list's items: a list appended while iterated is iterated to its new end.
        return IteratorValue(value.items, value)
    if isinstance(value, DictValue):
        return DictIteratorValue(value)
    if isinstance(value, SetValue):
        return SetIteratorValue(value, value.unpack())
    if isinstance(value, DictViewValue):
        return DictIteratorValue(value.dict_value, value.kind)
    if isinstance(value, TensorValue):
        n = value.fake.shape[0] if value.fake.dim() else 0
        if value.fake.dim() == 0:
            raise unsupported(GraphBreakKind.EXCEPTION, "iteration over a 0-d tensor")
        return IteratorValue(
            [operators.get_item(tx, value, ConstantValue(i)) for i in range(n)]
        )
    if isinstance(value, ModuleValue):
        module = value.module
        operators.guard_module_entries(tx, value)
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            return IteratorValue(
                [operators.get_item(tx, value, ConstantValue(i)) for i in range(len(module))]
            )
        if isinstance(module, torch.nn.ModuleDict):
            return IteratorValue([ConstantValue(k) for k in module])
        if isinstance(module, torch.nn.ParameterList):

            return IteratorValue([dispatch.get_attr(tx, value, str(i)) for i in range(len(module))])
    if isinstance(value, ObjectValue):
        if value.dict_items is not None:
            return IteratorValue(value.dict_items.unpack())
        effects = tx.output.side_effects
        if isinstance(value.obj, LiveIterator) and value.source is not None:
            return iteration.live_iterator(tx, value.obj, value.source)
        own_iter = class_method(tx, value.cls, "__iter__")
        if own_iter is not None and hasattr(own_iter, "__code__"):
            # NOTE: a class's own `__iter__` is traced (what it iterates, `self.items`, is
            # read through guarded sources): iterated for real, a registry's items would be
            # constants of the trace with nothing guarding them.
            return iterate(tx, dispatch.call_value(tx, ConstantValue(own_iter), [value], {}))
        if value.obj is not None and not effects.attr_writes.get(effects.key(value)):
            # NOTE: existing objects (configs, registries) iterate for real; their items are
            # treated as constants of this trace.
            if isinstance(value.obj, collections.deque) and value.source is not None:
                return iteration.deque_items(tx, value, value.obj, value.source)
            if not isinstance(value.obj, iteration.IMMUTABLE_ITERABLES):
                # NOTE: a C container whose items nothing would guard.
                raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                                  f"iterating the existing {type(value.obj).__name__} object")
            if hasattr(type(value.obj), "__next__"):
                # NOTE: an iterator (itertools.count, a generator): iterating it here would
                # consume the user's items (an endless one never ends); it runs eagerly.
                raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                                  f"iterating the existing iterator {type(value.obj).__name__}")
            from capture.values.wrap import wrap

            try:
                real_items = list(value.obj)
            except Exception as e:  # noqa: BLE001
                raise unsupported(GraphBreakKind.EXCEPTION, f"iterating raised {e!r}") from None
            return IteratorValue([wrap(tx.output, item, None) for item in real_items])
        method = class_method(tx, value.cls, "__iter__")
        if method is not None and hasattr(method, "__code__"):

            return iterate(tx, dispatch.call_value(tx, ConstantValue(method), [value], {}))
        getitem = class_method(tx, value.cls, "__getitem__")
        if method is None and getitem is not None and hasattr(getitem, "__code__"):
            return _sequence_protocol(tx, value, getitem)
    return IteratorValue(value.unpack())


_MAX_SEQUENCE_ITEMS = 100_000
def _sequence_protocol(tx: Translator, value: Value, getitem: object) -> IteratorValue:
    """`iter()` of an object with `__getitem__` and no `__iter__`: items 0, 1, ... until
    `__getitem__` raises IndexError (or StopIteration), as CPython's sequence iterator does."""

    items: list[Value] = []
    while len(items) < _MAX_SEQUENCE_ITEMS:
        try:
            items.append(dispatch.call_value(tx, ConstantValue(getitem), [value, ConstantValue(len(items))], {}))
        except RaisedInTrace as raised:
            if isinstance(raised.exception, (IndexError, StopIteration)):
                return IteratorValue(items)
            raise
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"a sequence of over {_MAX_SEQUENCE_ITEMS} items"
    )


def _items(tx: Translator, value: Value) -> list[Value]:
    return iterate(tx, value).unpack()


@special(zip)
def _zip(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if "strict" not in kwargs:
        return LazyIteratorValue([iterate(tx, a) for a in args])
    lists = [_items(tx, a) for a in args]
    if (kwargs.get("strict") is not None and _const(kwargs["strict"], "strict")
            and len({len(x) for x in lists}) > 1):
        raise unsupported(GraphBreakKind.EXCEPTION, "zip(strict=True) length mismatch")
    return IteratorValue([TupleValue(list(group)) for group in zip(*lists)])


@special(enumerate)
def _enumerate(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    start = _const(args[1], "start") if len(args) > 1 else 0
    if "start" in kwargs:
        start = _const(kwargs["start"], "start")
    return LazyIteratorValue([iterate(tx, args[0])], start)


@special(reversed)
def _reversed(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return IteratorValue(list(reversed(_items(tx, args[0]))))


@special(map)
def _map(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    lists = [_items(tx, a) for a in args[1:]]
    return IteratorValue([dispatch.call_value(tx, args[0], list(group), {}) for group in zip(*lists)])


@special(filter)
def _filter(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    out = []
    for item in _items(tx, args[1]):
        is_none = isinstance(args[0], ConstantValue) and args[0].value is None
        keep = item if is_none else dispatch.call_value(tx, args[0], [item], {})
        if operators.truth(tx, keep):
            out.append(item)
    return IteratorValue(out)


@special(list)
def _list(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ListValue(_items(tx, args[0]) if args else [])


@special(tuple)
def _tuple(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return TupleValue(_items(tx, args[0]) if args else [])


@special(set)
def _set(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    out = SetValue.new()
    if args:
        out.update([(_hashable(item, "set item"), item) for item in _items(tx, args[0])], args[0])
    return out


@special(frozenset)
def _frozenset(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(frozenset(_const(i, "frozenset item") for i in (_items(tx, args[0]) if args else [])))


def dict_update(
    tx: Translator, target: DictValue, args: list[Value], kwargs: dict[str, Value]
) -> None:
    if args:
        source = args[0]
        if isinstance(source, DictValue):
            target.update_items(source.items)
        elif isinstance(source, ObjectValue) and source.dict_items is not None:
            assert isinstance(source.dict_items, DictValue)
            target.update_items(source.dict_items.items)
        else:
            for pair in _items(tx, source):
                key_value, item_value = pair.unpack()
                target.set_item(_const(key_value, "dict key"), (key_value, item_value))
    for name, value in kwargs.items():
        target.set_item(name, (ConstantValue(name), value))


@special(dict, collections.OrderedDict)
def _dict(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    out = DictValue({})
    dict_update(tx, out, args, kwargs)
    return out


@special(collections.defaultdict)
def _defaultdict(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    out = DictValue({}, None, collections.defaultdict)
    out.default_factory = args[0] if args else NONE
    return out


def _reduce(tx: Translator, args: list[Value], kwargs: dict[str, Value], op: Any, name: str) -> Value:

    items = _items(tx, args[0]) if len(args) == 1 else list(args)
    key = kwargs.get("key")
    consts = [operators.python_constant(i) for i in items]
    if key is None and all(ok for ok, _ in consts) and "default" not in kwargs:
        return ConstantValue(op([c for _, c in consts]))
    if not items:
        if "default" in kwargs:
            return kwargs["default"]
        raise unsupported(GraphBreakKind.EXCEPTION, f"{name}() of an empty sequence")
    if any(isinstance(i, TensorValue) for i in items):
        raise unsupported(GraphBreakKind.DATA_DEPENDENT, f"{name}() over tensors", HINT_DATA_DEPENDENT)
    if key is None and any(isinstance(i, SymNodeValue) for i in items) and all(
        isinstance(i, (SymNodeValue, ConstantValue)) for i in items
    ):
        # min/max of numbers read from tensors: torch.sym_min/sym_max nodes, no branch.
        fold = torch.sym_min if op is min else torch.sym_max
        result = items[0]
        for item in items[1:]:
            result = torch_ops.call_torch(tx, fold, [result, item], {})
        return result
    if key is not None:
        keyed = [(_const(dispatch.call_value(tx, key, [i], {}), "key"), n) for n, i in enumerate(items)]
        best = op(keyed, key=lambda p: p[0])
        chosen: Value = items[best[1]]
        return chosen
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"{name}() of non-constants")


@special(min)
def _min(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return _reduce(tx, args, kwargs, min, "min")


@special(max)
def _max(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return _reduce(tx, args, kwargs, max, "max")


@special(sum)
def _sum(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = _items(tx, args[0])
    total: Value = args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))
    for item in items:
        total = operators.apply_operator(tx, operator.add, [total, item])
    return total


@special(any)
def _any(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = _items(tx, args[0])
    return ConstantValue(any(operators.truth(tx, i) for i in items))


@special(all)
def _all(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = _items(tx, args[0])
    return ConstantValue(all(operators.truth(tx, i) for i in items))


@special(sorted)
def _sorted(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    items = _items(tx, args[0])
    key = kwargs.get("key")
    reverse = bool(_const(kwargs["reverse"], "reverse")) if "reverse" in kwargs else False
    if key is None:
        keyed = [(_const(i, "sorted item"), n) for n, i in enumerate(items)]
    else:
        keyed = [(_const(dispatch.call_value(tx, key, [i], {}), "key"), n) for n, i in enumerate(items)]
    keyed.sort(key=lambda p: p[0], reverse=reverse)
    return ListValue([items[n] for _, n in keyed])


@special(abs)
def _abs(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return operators.apply_operator(tx, operator.abs, args)


@special(pow)
def _pow(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return operators.apply_operator(tx, operator.pow, args)


def _scalar(kind: type) -> SpecialHandler:
    def handle(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if args and isinstance(args[0], TensorValue):
            raise unsupported(
                GraphBreakKind.DATA_DEPENDENT,
                f"{kind.__name__}() of a tensor reads its value",
                HINT_DATA_DEPENDENT,
            )
        if len(args) == 1 and isinstance(args[0], SymNodeValue):
            return _symbolic_scalar(tx, kind, args[0])
        values = [_const(a, f"{kind.__name__}()") for a in args]
        try:
            return ConstantValue(kind(*values))
        except (TypeError, ValueError, OverflowError) as e:
            raise RaisedInTrace(e) from None

    return handle


def _symbolic_scalar(tx: Translator, kind: type, value: SymNodeValue) -> Value:
    """int()/float()/bool() of a number read from a tensor: computed in the graph."""
    if value.python_type() is kind:
        return value
    if kind is int:
        return torch_ops.call_torch(tx, torch.sym_int, [value], {})
    if kind is float:
        return torch_ops.call_torch(tx, torch.sym_float, [value], {})
    if kind is bool:
        return ConstantValue(operators.truth(tx, value))
    raise unsupported(
        GraphBreakKind.DATA_DEPENDENT,
        f"{kind.__name__}() of {value.describe()} needs its value at trace time",
        HINT_DATA_DEPENDENT,
    )


for _kind in (int, float, bool, str, complex):
    special(_kind)(_scalar(_kind))


@special(callable)
def _callable(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    value = args[0]
    if isinstance(value, (FunctionValue, MethodValue, PartialValue, ModuleValue)):
        return ConstantValue(True)
    if isinstance(value, ConstantValue):
        return ConstantValue(callable(value.value))
    if isinstance(value, ObjectValue):
        # NOTE: an instance is callable when its class (not its metaclass) defines __call__;
        # hasattr(cls, "__call__") would hold for every class (type.__call__).
        if value.obj is not None:
            return ConstantValue(callable(value.obj))
        return ConstantValue(any("__call__" in vars(k) for k in value.cls.__mro__))
    return ConstantValue(False)


@special(id)
def _id(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    ok, obj = operators.real_object(args[0])
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "id() of a value made while tracing")
    return ConstantValue(id(obj))


@special(print)
def _print(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "print() inside a compiled function")


@special(functools.partial)
def _partial(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return PartialValue(args[0], list(args[1:]), dict(kwargs))


@special(dataclasses.fields)
def _fields(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    value = args[0]
    cls: Any = value.value if isinstance(value, ConstantValue) else value.python_type()
    return TupleValue([ConstantValue(f) for f in dataclasses.fields(cls)])


# -- operator module -------------------------------------------------------------------
def _operator_handler(op: Callable[..., Any]) -> SpecialHandler:
    def handle(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if op is operator.getitem:
            return operators.get_item(tx, args[0], args[1])
        if op is operator.setitem:
            operators.set_item(tx, args[0], args[1], args[2])
            return NONE
        if op is operator.is_:
            return ConstantValue(operators.identity(args[0], args[1]))
        if op is operator.is_not:
            return ConstantValue(not operators.identity(args[0], args[1]))
        if op is operator.contains:
            return ConstantValue(operators.contains(tx, args[1], args[0]))
        if op is operator.truth:
            return ConstantValue(operators.truth(tx, args[0]))
        return operators.apply_operator(tx, op, args)

    return handle


for _name in (  # noqa: SIM905 - one readable line of names
    "add sub mul truediv floordiv mod pow matmul neg pos invert abs and_ or_ xor lshift rshift "
    "eq ne lt le gt ge not_ getitem setitem is_ is_not contains truth iadd isub imul itruediv"
).split():
    _op = getattr(operator, _name)
    special(_op)(_operator_handler(_op))


# -- torch helpers with Python-level answers -------------------------------------------
def _returns(value: object) -> SpecialHandler:
    def handle(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return ConstantValue(value)

    return handle


for _fn in (torch.jit.is_scripting, torch.jit.is_tracing, torch._C._get_tracing_state):  # type: ignore[attr-defined]  # re-exported at runtime
    special(_fn)(_returns(False if _fn is not torch._C._get_tracing_state else None))
# NOTE: libraries (transformers, timm) take their compiler-friendly paths when these say
# True; capture is a compiler, so it answers True while tracing.
special(torch.compiler.is_compiling)(_returns(True))
special(torch.compiler.is_dynamo_compiling)(_returns(True))
special(torch._utils.is_compiling)(_returns(True))
special(torch.compiler.is_exporting)(_returns(False))


@special(torch.is_tensor)
def _is_tensor(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(isinstance(args[0], TensorValue))


@special(torch.get_default_dtype)
def _default_dtype(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(torch.get_default_dtype())


@special(torch.is_autocast_enabled)
def _autocast_enabled(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    values = [_const(a, "device type") for a in args]
    return ConstantValue(torch.is_autocast_enabled(*values))


def builtin_names() -> set[str]:
    """Names of builtins that have a handler (for coverage reports)."""
    return {name for name, obj in vars(builtins).items() if lookup(obj) is not None}


def unused(*_: Any) -> Any:
    return (math, ContextValue)





def _itemgetter(tx: Translator, getter: Any, args: list[Value]) -> Value:
    keys = getter.__reduce__()[1]
    items = [operators.get_item(tx, args[0], ConstantValue(k)) for k in keys]
    return items[0] if len(items) == 1 else TupleValue(items)


def call_callable_object(tx: Translator, obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """Calls of callable objects with a known meaning (itemgetter, attrgetter)."""
    if isinstance(obj, operator.itemgetter):
        return _itemgetter(tx, obj, args)
    if isinstance(obj, weakref.ReferenceType) and not args and not kwargs:
        from capture.values.wrap import wrap

        referent = obj()
        return NONE if referent is None else wrap(tx.output, referent, None)
    if isinstance(obj, operator.attrgetter):

        names = obj.__reduce__()[1]
        values = []
        for name in names:
            value = args[0]
            for part in str(name).split("."):
                value = dispatch.get_attr(tx, value, part)
            values.append(value)
        return values[0] if len(values) == 1 else TupleValue(values)
    if isinstance(obj, _LRU_CACHE_WRAPPER):
        return _call_lru_cached(tx, obj, args, kwargs)
    return None


_LRU_CACHE_WRAPPER = type(functools.lru_cache(maxsize=None)(lambda: None))


def _call_lru_cached(
    tx: Translator, fn: Any, args: list[Value], kwargs: dict[str, Value]
) -> Value | None:
    """A `functools.lru_cache` function called with known objects: called for real now.

    NOTE: eager gets the cached result on every later call too (transformers'
    `logger.warning_once` logs once either way); tensors or values known only symbolically
    make it an ordinary call (traced into or unsupported).
    """
    from capture.values.wrap import wrap

    real_args: list[object] = []
    for value in [*args, *kwargs.values()]:
        ok, obj = operators.python_constant(value)
        if not ok:
            ok, obj = operators.real_object(value)
        if not ok or isinstance(obj, torch.Tensor):
            return None
        real_args.append(obj)
    positional = real_args[: len(args)]
    keywords = dict(zip(kwargs, real_args[len(args) :]))
    try:
        result = fn(*positional, **keywords)
    except Exception as e:  # noqa: BLE001  # not cached, so eager calls it again: run eagerly
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"{getattr(fn, '__name__', fn)} raised {e!r}"
        ) from None
    tx.output.keepalive.append(result)
    return wrap(tx.output, result, None)


dispatch.iterate = iterate
