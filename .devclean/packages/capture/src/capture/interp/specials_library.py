"""Special handlers: library helpers models use (nn.Module member iterators, inspect,
functools, itertools, tuple.__new__)."""

from __future__ import annotations

import collections.abc
import functools
import inspect
import itertools
import operator
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture.graph_break import GraphBreakKind, Unsupported, unsupported
from capture.interp import dispatch, operators
from capture.interp.builtins_table import (
    SpecialHandler,
    _const,
    _items,
    special,
)
from capture.values import (
    ConstantValue,
    FunctionValue,
    IteratorValue,
    MethodValue,
    ModuleValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator


@special(typing.cast)
def _typing_cast(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    # NOTE: `typing.cast(T, v)` returns `v` unchanged at run time.
    value = args[1] if len(args) > 1 else kwargs.get("val")
    if value is None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "typing.cast without a value")
    return value


@special(typing.assert_type)
def _typing_assert_type(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    # NOTE: `typing.assert_type(v, T)` returns `v` unchanged at run time.
    if len(args) != 2 or kwargs:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "typing.assert_type arguments")
    return args[0]


@special(tuple.__new__)
def _tuple_new(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    cls = _const(args[0], "tuple class")
    items = _items(tx, args[1]) if len(args) > 1 else []
    return TupleValue(items, None, cls)


def _module_members(kind: str) -> SpecialHandler:
    """nn.Module.parameters() and friends, with guarded sources per member."""

    def handle(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        from guards.sources import AttrSource, BufferSource, ParamSource, SubmoduleSource

        from capture.values.wrap import wrap

        mv = args[0]
        if not isinstance(mv, ModuleValue):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"{kind} of {mv.describe()}")
        values = [_const(a, kind) for a in args[1:]]
        options = {k: _const(v, kind) for k, v in kwargs.items()}
        real = getattr(mv.module, kind)(*values, **options)
        if kind in ("children", "named_children") and mv.source is not None:
            from capture.output_graph import GuardKind

            tx.output.add_guard(
                AttrSource(mv.source, "_modules"), GuardKind.DICT_KEYS, tuple(mv.module._modules)
            )
        named = kind.startswith("named_")
        out: list[Value] = []
        for item in real:
            name, obj = item if named else (None, item)
            if name is None:
                name = _find_name(mv.module, obj, kind)
            source = mv.source
            parts = name.split(".") if name else []
            if source is not None:
                is_module = kind in ("children", "named_children", "modules", "named_modules")
                for part in parts[:-1] if not is_module else parts:
                    source = SubmoduleSource(source, part)
                if not is_module and parts:
                    if "parameters" in kind:
                        source = ParamSource(source, parts[-1])
                    else:
                        source = BufferSource(source, parts[-1])
            value = wrap(tx.output, obj, source)
            if isinstance(value, ModuleValue) and value.path == "<module>":
                value.path = f"{mv.path}.{name}" if name else mv.path
            out.append(TupleValue([ConstantValue(name), value]) if named else value)
        return IteratorValue(out)

    return handle


def _find_name(module: torch.nn.Module, obj: object, kind: str) -> str:
    tables: dict[str, Callable[[], Any]] = {
        "parameters": module.named_parameters,
        "buffers": module.named_buffers,
        "children": module.named_children,
        "modules": module.named_modules,
    }
    for name, member in tables[kind]():
        if member is obj:
            return str(name)
    return ""


for _member in ("parameters", "named_parameters", "buffers", "named_buffers", "children",
                "named_children", "modules", "named_modules"):
    special(getattr(torch.nn.Module, _member))(_module_members(_member))


def _real_callable(value: Value) -> Any:
    if isinstance(value, MethodValue):
        ok, self_obj = operators.real_object(value.self_value)
        func = _real_callable(value.func)
        if ok:
            return types.MethodType(func, self_obj)
        return functools.partial(func, None)
    ok, obj = operators.real_object(value)
    if ok:
        return obj
    if isinstance(value, FunctionValue):
        return types.FunctionType(value.code, value.globals, value.name)
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"inspecting {value.describe()}")


@special(inspect.signature)
def _signature(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(inspect.signature(_real_callable(args[0])))


@special(functools.reduce)
def _reduce_fn(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    items = _items(tx, args[1])
    if len(args) > 2:
        acc = args[2]
    elif items:
        acc = items.pop(0)
    else:
        raise unsupported(GraphBreakKind.EXCEPTION, "reduce() of an empty sequence")
    for item in items:
        acc = dispatch.call_value(tx, args[0], [acc, item], {})
    return acc


@special(itertools.chain)
def _chain(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return IteratorValue([item for arg in args for item in _items(tx, arg)])


@special(itertools.product)
def _product(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    pools = [_items(tx, a) for a in args]
    repeat = _const(kwargs["repeat"], "repeat") if "repeat" in kwargs else 1
    return IteratorValue([TupleValue(list(p)) for p in itertools.product(*pools, repeat=repeat)])


@special(itertools.accumulate)
def _accumulate(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:

    items = _items(tx, args[0])
    func = args[1] if len(args) > 1 else kwargs.get("func")
    out: list[Value] = []
    acc: Value | None = kwargs.get("initial")
    if acc is not None:
        out.append(acc)
    for item in items:
        if acc is None:
            acc = item
        elif func is None:
            acc = operators.apply_operator(tx, operator.add, [acc, item])
        else:
            acc = dispatch.call_value(tx, func, [acc, item], {})
        out.append(acc)
    return IteratorValue(out)


@special(itertools.pairwise)
def _pairwise(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = _items(tx, args[0])
    return IteratorValue([TupleValue([a, b]) for a, b in itertools.pairwise(items)])


@special(itertools.islice)
def _islice(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = _items(tx, args[0])
    bounds = [_const(a, "islice bound") for a in args[1:]]
    return IteratorValue(list(itertools.islice(items, *bounds)))


# -- collections.abc.Mapping's mixin methods ----------------------------------------------
# NOTE: `Mapping.get` and `Mapping.__contains__` catch the KeyError of `self[key]`
# (transformers' AttentionInterface.get_interface calls `super().get(name, default)`); the
# interpreter has no try/except, so the lookup runs here and a missing key is caught.


def _is_missing_key(error: Unsupported) -> bool:
    return error.kind is GraphBreakKind.EXCEPTION and (
        error.explanation.startswith("KeyError")
        or error.explanation == "creating the exception KeyError"
    )


def _mapping_lookup(tx: Translator, mapping: Value, key: Value) -> Value | None:
    """`mapping[key]`, or None when it raises KeyError before recording anything."""
    nodes_before = len(tx.output.graph.nodes)
    try:
        return operators.get_item(tx, mapping, key)
    except Unsupported as error:
        if _is_missing_key(error) and len(tx.output.graph.nodes) == nodes_before:
            return None
        raise


@special(collections.abc.Mapping.get)
def _mapping_get(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    default = args[2] if len(args) > 2 else kwargs.get("default", ConstantValue(None))
    found = _mapping_lookup(tx, args[0], args[1])
    return default if found is None else found


@special(collections.abc.Mapping.__contains__)
def _mapping_contains(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(_mapping_lookup(tx, args[0], args[1]) is not None)
