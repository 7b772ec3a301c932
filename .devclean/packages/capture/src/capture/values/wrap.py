"""Real object -> `Value`, plus the guards that make the value's assumptions safe.

The kind of value and its guards depend on the object's type; values of mutable objects
are cached by identity in the output graph so that aliasing is preserved.
"""

from __future__ import annotations

import collections
import enum
import functools
import sys
import types
from typing import TYPE_CHECKING

import torch
from guards.sources import (
    AttrSource,
    BufferSource,
    ConstSource,
    ItemSource,
    LocalSource,
    ParamSource,
    Source,
    SubmoduleSource,
)

from capture.output_graph import GuardKind, tensor_group
from capture.values.base import Value
from capture.values.constant import ConstantValue, is_literal
from capture.values.containers import DictValue, ListValue, SetValue, TupleValue
from capture.values.functions import MethodValue, PartialValue
from capture.values.objects import ModuleValue, ObjectValue
from capture.values.tensor import TensorValue

if TYPE_CHECKING:
    from capture.output_graph import OutputGraph

# Objects compared by value in guards (besides literals).
_VALUE_TYPES = (torch.dtype, torch.device, torch.layout, torch.memory_format)
# Objects guarded by identity.
_ID_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ModuleType,
    type,
    enum.Enum,
)


def wrap(output: OutputGraph, obj: object, source: Source | None) -> Value:
    """The value standing for `obj` read from `source` (None: no guard, not reloadable)."""
    cached = output.wrapped.get(id(obj))
    if cached is not None and (source is None or cached.source is not None):
        if source is not None and cached.source is not None and cached.source != source:
            # NOTE: one object reached through two sources (`f(x, x)`, tied weights): the
            # trace uses one value for both, so the entry holds only while they stay one.
            group = _identity_group(obj, cached)
            output.note_identity(obj, cached.source, group)
            output.note_identity(obj, source, group)
        return cached
    if isinstance(obj, torch.Tensor):
        if source is None:
            from capture.graph_break import GraphBreakKind, unsupported

            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                "a tensor that is not reachable from the frame's arguments or globals",
            )
        value: Value = output.add_input(obj, source)
        output.wrapped[id(obj)] = value
        return value
    if type(obj) in (torch.no_grad, torch.enable_grad):
        from capture.values.objects import ContextValue

        return ContextValue("grad", (type(obj) is torch.enable_grad,))
    if isinstance(obj, torch.nn.Module):
        if source is not None:
            output.add_guard(source, GuardKind.ID_MATCH, obj)
        value = ModuleValue(obj, source, _module_path(source))
        return _remember(output, obj, value)
    if type(obj) is int and isinstance(source, LocalSource):
        symbolic = output.add_int_input(obj, source)
        if symbolic is not None:
            symbolic.source = source
            return symbolic
    if is_literal(obj) or isinstance(obj, _VALUE_TYPES):
        if source is not None:
            if obj is None or isinstance(obj, bool):
                output.add_guard(source, GuardKind.ID_MATCH, obj)
            else:
                output.add_guard(source, GuardKind.CONST_EQ, obj)
        return ConstantValue(obj, source)
    if isinstance(obj, torch.Size):
        if source is not None:
            output.add_guard(source, GuardKind.CONST_EQ, obj)
        return ConstantValue(obj, source)
    if isinstance(obj, slice) and all(
        x is None or type(x) is int for x in (obj.start, obj.stop, obj.step)
    ):
        if source is not None:
            output.add_guard(source, GuardKind.TYPE_MATCH, slice)
            for part in ("start", "stop", "step"):
                wrap(output, getattr(obj, part), AttrSource(source, part))
        return ConstantValue(obj, source)
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        # ATen operators: immutable; calls go in the graph (`policy.decide`).
        if source is not None:
            output.add_guard(source, GuardKind.ID_MATCH, obj)
        return ConstantValue(obj, source)
    if isinstance(obj, _ID_TYPES):
        if source is not None and not _under_python_module(source):
            output.add_guard(source, GuardKind.ID_MATCH, obj)
        return ConstantValue(obj, source)
    if isinstance(obj, types.MethodType):
        self_src = AttrSource(source, "__self__") if source is not None else None
        func_src = AttrSource(source, "__func__") if source is not None else None
        return MethodValue(wrap(output, obj.__self__, self_src), wrap(output, obj.__func__, func_src))
    if isinstance(obj, functools.partial):
        src = source
        args = [
            wrap(output, a, ItemSource(AttrSource(src, "args"), i) if src else None)
            for i, a in enumerate(obj.args)
        ]
        kwargs = {
            k: wrap(output, v, ItemSource(AttrSource(src, "keywords"), k) if src else None)
            for k, v in obj.keywords.items()
        }
        func = wrap(output, obj.func, AttrSource(src, "func") if src else None)
        if src is not None:
            output.add_guard(src, GuardKind.TYPE_MATCH, type(obj))
        return PartialValue(func, args, kwargs, src)
    cls = type(obj)
    if cls is list:
        assert isinstance(obj, list)
        if source is not None:
            # Length and items are guarded when the program reads them (`_list_items`).
            output.add_guard(source, GuardKind.TYPE_MATCH, cls)
            value = ListValue.lazy(obj, source, functools.partial(_list_items, output, obj, source))
            return _remember(output, obj, value)
        value = ListValue([])
        value.real = obj
        output.wrapped[id(obj)] = value
        output.keepalive.append(obj)
        value.items = [wrap(output, x, None) for x in obj]
        return value
    if isinstance(obj, tuple):
        if source is not None:
            output.add_guard(source, GuardKind.TYPE_MATCH, cls)
            output.add_guard(source, GuardKind.LEN, len(obj))
        items = [
            wrap(output, x, ItemSource(source, i) if source else None) for i, x in enumerate(obj)
        ]
        return TupleValue(items, source, cls)
    if (cls is collections.defaultdict and source is not None
            and all(_is_key(k) or isinstance(k, torch.Tensor) for k in obj)):  # type: ignore[attr-defined]
        # NOTE: an optimizer's `state`: keyed by its parameters (matched by identity).
        assert isinstance(obj, collections.defaultdict)
        output.add_guard(source, GuardKind.TYPE_MATCH, cls)
        output.add_guard(AttrSource(source, "default_factory"), GuardKind.ID_MATCH,
                         obj.default_factory)
        loader = functools.partial(_dict_items, output, obj, source)
        lazy = DictValue.lazy(obj, source, cls, loader)
        lazy.default_factory = ConstantValue(obj.default_factory)
        return _remember(output, obj, lazy)
    if cls in (dict, collections.OrderedDict) and all(
            _is_key(k) or (source is not None and isinstance(k, torch.Tensor)) for k in obj):  # type: ignore[attr-defined]
        assert isinstance(obj, dict)
        if source is not None:
            # Keys and items are guarded when the program reads them (`_dict_items`).
            output.add_guard(source, GuardKind.TYPE_MATCH, cls)
            loader = functools.partial(_dict_items, output, obj, source)
            return _remember(output, obj, DictValue.lazy(obj, source, cls, loader))
        dvalue = DictValue({}, source, cls)
        dvalue.real = obj
        output.wrapped[id(obj)] = dvalue
        output.keepalive.append(obj)
        for k, v in obj.items():
            dvalue.items[k] = (
                ConstantValue(k),
                wrap(output, v, ItemSource(source, k) if source else None),
            )
        return dvalue
    if cls in (set, frozenset) and all(is_literal(k) for k in obj):  # type: ignore[attr-defined]
        if source is not None:
            output.add_guard(source, GuardKind.TYPE_MATCH, cls)
        if cls is frozenset:
            if source is not None:
                output.add_guard(source, GuardKind.CONST_EQ, obj)
            return ConstantValue(obj, source)
        if source is not None:
            # Contents are guarded when the program reads them (`_set_items`).
            assert isinstance(obj, set)
            load_set = functools.partial(_set_items, output, obj, source)
            return _remember(output, obj, SetValue.lazy(obj, source, load_set))
        svalue = SetValue({k: ConstantValue(k) for k in obj}, source)  # type: ignore[attr-defined]
        svalue.real = obj  # type: ignore[assignment]  # a set (frozensets returned above)
        return _remember(output, obj, svalue)
    if callable(obj) and not hasattr(obj, "__dict__") and source is None:
        return ConstantValue(obj, None)
    if source is not None:
        output.add_guard(source, GuardKind.TYPE_MATCH, cls)
    if source is None and not _is_plain_object(obj):
        return ConstantValue(obj, None)
    return _remember(output, obj, ObjectValue(obj, cls, source))


def _list_items(output: OutputGraph, obj: list[object], source: Source) -> list[Value]:
    output.add_guard(source, GuardKind.LEN, len(obj))
    return [wrap(output, x, ItemSource(source, i)) for i, x in enumerate(obj)]


def _set_items(output: OutputGraph, obj: set[object], source: Source) -> dict[object, Value]:
    output.add_guard(source, GuardKind.CONST_EQ, frozenset(obj))
    return {k: ConstantValue(k) for k in obj}


def _dict_items(
    output: OutputGraph, obj: dict[object, object], source: Source
) -> dict[object, tuple[Value, Value]]:
    output.add_guard(source, GuardKind.DICT_KEYS, tuple(obj))
    return {k: (_key_value(output, k), wrap(output, v, ItemSource(source, k)))
            for k, v in obj.items()}


def _key_value(output: OutputGraph, key: object) -> Value:
    """The value of a dict key: a constant, or a tensor key (a parameter keying an
    optimizer's `state`) as the input it is; the dict's keys guard fixes it by identity, so
    it is read from the object itself, never through the dict."""
    if isinstance(key, torch.Tensor):
        return wrap(output, key, ConstSource.of(key, f"{type(key).__name__} key"))
    return ConstantValue(key)


def is_stable_kind(obj: object) -> bool:
    """Objects that `wrap` turns into guarded constants (literals, dtypes, functions, classes,
    modules): reading them through a source costs one guard and changes nothing else."""
    return is_literal(obj) or isinstance(obj, _VALUE_TYPES + _ID_TYPES + (torch.Size,))


def is_library_module(name: object) -> bool:
    """Python modules whose attributes and globals are treated as constants, unguarded
    (torch and the standard library; guarding them would cost per-call time for nothing)."""
    if not isinstance(name, str):
        return True
    root = name.partition(".")[0]
    return root in ("torch", "builtins") or root in sys.stdlib_module_names


def _remember(output: OutputGraph, obj: object, value: Value) -> Value:
    output.wrapped[id(obj)] = value
    output.keepalive.append(obj)
    if value.source is not None:
        output.note_identity(obj, value.source, _identity_group(obj, value))
    return value


def _identity_group(obj: object, value: Value) -> object:
    """The objects `obj` must stay distinct from (see `OutputGraph.note_identity`): tensors
    that could be one object, objects of its exact type; None for modules (guarded by id,
    so distinct modules stay distinct anyway)."""
    if isinstance(obj, torch.Tensor):
        return tensor_group(obj, value.fake if isinstance(value, TensorValue) else None)
    if isinstance(value, ModuleValue):
        return None
    return ("object", type(obj))


def _is_key(key: object) -> bool:
    return isinstance(key, (str, int)) and not isinstance(key, bool) or key is None


def _is_plain_object(obj: object) -> bool:
    return hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__")


def _under_python_module(source: Source) -> bool:
    """Attributes of Python modules are assumed stable (only the root global is guarded)."""
    return isinstance(source, AttrSource) and not isinstance(source.source, AttrSource) and False


def _module_path(source: Source | None) -> str:
    if source is None:
        return "<module>"
    return source.name()


def param_source(base: Source, name: str) -> Source:
    return ParamSource(base, name)


def buffer_source(base: Source, name: str) -> Source:
    return BufferSource(base, name)


def submodule_source(base: Source, name: str) -> Source:
    return SubmoduleSource(base, name)
