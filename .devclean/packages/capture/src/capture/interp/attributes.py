"""Attribute reads and writes on values (`obj.name`, `obj.name = v`).

Modules read parameters, buffers and submodules through guarded sources; existing objects
read real attributes (guarded); objects created while tracing keep attributes in the value.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING

import torch
from guards.sources import (
    AttrSource,
    BufferSource,
    ConstSource,
    ParamSource,
    Source,
    SubmoduleSource,
)

from capture import side_effects, torch_ops
from capture.graph_break import GraphBreakKind, RaisedInTrace, unsupported
from capture.interp import dispatch, lookup_guards, tensor_facts
from capture.interp.builtins_table import special
from capture.interp.private_objects import PrivateObjectValue, private_attr, private_store
from capture.output_graph import GuardKind
from capture.values import (
    ConstantValue,
    DictValue,
    FunctionValue,
    ListValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    SetValue,
    SuperValue,
    TensorValue,
    TupleValue,
    Value,
)
from capture.values.wrap import is_library_module, is_stable_kind, wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator


AttrMissing = dispatch.AttrMissing


def get_attr(tx: Translator, value: Value, name: str) -> Value:
    """`value.name`; raises AttrMissing if the attribute does not exist (guarded so: adding
    it later recompiles)."""
    try:
        result = _get_attr(tx, value, name)
    except AttrMissing:
        _guard_absent(tx, value, name)
        raise

    if result is side_effects.DELETED:
        raise AttrMissing(name)
    return result


def _guard_absent(tx: Translator, value: Value, name: str) -> None:
    """Guard every namespace where `name` would be found if it were added: the instance
    `__dict__` (and a module's parameter, buffer and child tables), the classes of the MRO,
    a module's globals."""
    if tx.output.side_effects.pending_attr(value, name) is not None:
        return  # NOTE: deleted while tracing: the real object still has it
    real, src = _real_object(value)
    if real is not None:
        lookup_guards.guard_not_shadowed(tx, real, src, name)
        if isinstance(value, ModuleValue) and src is not None:
            for table in ("_parameters", "_buffers", "_modules"):
                tx.output.add_guard(AttrSource(src, table), GuardKind.KEY_ABSENT, name)
        lookup_guards.guard_class_lookup(tx, type(real), name)
        return
    if isinstance(value, ConstantValue):
        obj = value.value
        if isinstance(obj, type):
            lookup_guards.guard_class_lookup(tx, obj, name)
        elif isinstance(obj, types.ModuleType):
            tx.output.add_guard(ConstSource.of(vars(obj), f"vars({obj.__name__})"),
                                GuardKind.KEY_ABSENT, name)


def _get_attr(tx: Translator, value: Value, name: str) -> Value:
    output = tx.output
    if isinstance(value, TensorValue):
        attr = tensor_facts.tensor_fact_attribute(tx, value, name)
        if attr is None:
            attr = torch_ops.tensor_attribute(tx, value, name)
        if attr is not None:
            return attr
        func = inspect.getattr_static(torch.Tensor, name, None)
        # NOTE: torch.Tensor's own dict can change (a method added or replaced on the class).
        lookup_guards.guard_class_lookup(tx, torch.Tensor, name)
        if func is None:
            raise AttrMissing(name)
        if isinstance(func, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
            # NOTE: a data attribute (not a method): read in the graph.
            return torch_ops.call_torch(tx, getattr, [value, ConstantValue(name)], {})
        return MethodValue(value, ConstantValue(getattr(torch.Tensor, name)))
    if isinstance(value, ModuleValue):
        return _module_attr(tx, value, name)
    if isinstance(value, PrivateObjectValue):
        found = private_attr(tx, value, name)
        if found is None:
            raise AttrMissing(name)
        return found
    if isinstance(value, ObjectValue):
        return _object_attr(tx, value, name)
    if isinstance(value, ConstantValue):
        obj = value.value
        if isinstance(obj, type):
            # A write earlier in this trace to the class or a base it inherits `name` from.
            pending = output.side_effects.pending_class_attr(obj, name)
            if pending is not None:
                return pending
        try:
            result = getattr(obj, name)
        except AttributeError:
            raise AttrMissing(name) from None
        base = value.source if value.source is not None else lookup_guards.const_source(obj)
        if isinstance(obj, types.ModuleType):
            # NOTE: every attribute read from a module is guarded, library modules included
            # (`F.gelu = ...`, `torch.nn.functional.relu = ...` must recompile).
            source = AttrSource(base, name) if base is not None else None
            if isinstance(result, (torch.Tensor, list, dict)) or is_stable_kind(result):
                return wrap(output, result, source)
            if not is_library_module(obj.__name__) or (
                    obj.__name__ == "os" and name == "environ"):
                # NOTE: `helpers.cfg`, the `os` module's `environ` (reads guarded): read through its
                # source
                return wrap(output, result, source)
            if source is not None:
                output.add_guard(source, GuardKind.ID_MATCH, result)
            return wrap(output, result, None)
        if isinstance(obj, type):
            static = inspect.getattr_static(obj, name, None)
            if static is not None and not any(name in k.__dict__ for k in obj.__mro__):
                # NOTE: found on the metaclass (`Meta.factor`, a property computing from
                # the class): its getter is traced, anything else read and guarded.
                lookup_guards.guard_class_lookup(tx, obj, name)
                lookup_guards.guard_class_lookup(tx, type(obj), name)
                if isinstance(static, property) and static.fget is not None:
                    return dispatch.call_value(tx, ConstantValue(static.fget), [value], {})
                if base is not None and not callable(result):
                    return wrap(output, result, AttrSource(base, name))
            if not (callable(static) or hasattr(type(static), "__get__")):
                # `K.count`, `K.registry`: class-level state is guarded (read) and reloaded
                # through the class (mutated), like any attribute of an object.
                assert base is not None
                return wrap(output, result, AttrSource(base, name))
            lookup_guards.guard_class_lookup(tx, obj, name)
        if isinstance(obj, type) and isinstance(inspect.getattr_static(obj, name, None), (types.FunctionType,)):
            return ConstantValue(result)
        if isinstance(result, (types.BuiltinMethodType, types.MethodType)) and not isinstance(obj, type):
            func = getattr(type(obj), name, None)
            if func is not None:
                return MethodValue(value, ConstantValue(func))
        return wrap(output, result, None)
    if isinstance(value, TupleValue):
        fields = getattr(value.cls, "_fields", None) or getattr(value.cls, "__match_args__", None)
        if fields and name in fields:
            return value.items[list(fields).index(name)]
        if value.cls is not tuple:
            found = _class_attr(tx, value, value.cls, name)
            if found is not None:
                return found
        return _builtin_method(value, value.cls, name)
    if isinstance(value, (ListValue, DictValue, SetValue)):
        cls = value.python_type()
        if isinstance(value, DictValue) and value.cls is not dict:
            cls = value.cls
        return _builtin_method(value, cls, name)
    if isinstance(value, SuperValue):
        return _super_attr(tx, value, name)
    if isinstance(value, FunctionValue):
        if name in ("__name__", "__qualname__"):
            return ConstantValue(value.name)
        if name == "__code__":
            return ConstantValue(value.code)
    if isinstance(value, MethodValue):
        if name == "__self__":
            return value.self_value
        if name == "__func__":
            return value.func
        if name in ("__name__", "__qualname__") and isinstance(value.func, ConstantValue):
            return ConstantValue(getattr(value.func.value, name))
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"attribute {name!r} of {value.describe()}"
    )


def _builtin_method(value: Value, cls: type, name: str) -> Value:
    func = getattr(cls, name, None)
    if func is None:
        raise AttrMissing(name)
    return MethodValue(value, ConstantValue(func))


def _class_attr(tx: Translator, owner: Value, cls: type, name: str) -> Value | None:
    """Look `name` up on the class: methods bind to `owner`, properties run their getter."""

    static = lookup_guards.guard_class_lookup(tx, cls, name)
    if static is lookup_guards.MISSING:
        return None
    if not lookup_guards.is_data_descriptor(static):
        real, src = _real_object(owner)
        if real is not None:
            lookup_guards.guard_not_shadowed(tx, real, src, name)
    if isinstance(static, (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
        return MethodValue(owner, ConstantValue(static))
    if isinstance(static, staticmethod):
        return ConstantValue(static.__func__)
    if isinstance(static, classmethod):
        return MethodValue(ConstantValue(cls), ConstantValue(static.__func__))
    if isinstance(static, property) and static.fget is not None:
        return dispatch.call_value(tx, ConstantValue(static.fget), [owner], {})
    return None


def _real_object(owner: Value) -> tuple[object | None, Source | None]:
    """The existing object behind `owner` and its source (None for values made while
    tracing, whose attributes live in the value)."""
    if isinstance(owner, ModuleValue):
        return (owner.module, owner.source) if owner.source is not None else (None, None)
    if isinstance(owner, ObjectValue) and owner.obj is not None:
        return owner.obj, owner.source
    return None, None


def _module_attr(tx: Translator, mv: ModuleValue, name: str) -> Value:
    output = tx.output
    module = mv.module
    pending = output.side_effects.pending_attr(mv, name)
    if pending is not None:
        return pending
    src = mv.source
    d = module.__dict__
    if name in d:
        return wrap(output, d[name], AttrSource(src, name) if src is not None else None)
    params = d.get("_parameters", {})
    if name in params:
        p = params[name]
        if p is None:
            return ConstantValue(None)
        return wrap(output, p, ParamSource(src, name) if src is not None else None)
    buffers = d.get("_buffers", {})
    if name in buffers:
        b = buffers[name]
        if b is None:
            return ConstantValue(None)
        return wrap(output, b, BufferSource(src, name) if src is not None else None)
    modules = d.get("_modules", {})
    if name in modules:
        sub = modules[name]
        if sub is None:
            return ConstantValue(None)
        sub_src = SubmoduleSource(src, name) if src is not None else output.known_sources.get(id(sub))
        value = wrap(output, sub, sub_src)
        if isinstance(value, ModuleValue) and value.path == "<module>":
            value.path = f"{mv.path}.{name}"
        return value
    if name == "__class__":
        return ConstantValue(type(module))
    found = _class_attr(tx, mv, type(module), name)
    if found is not None:
        return found
    try:
        result = getattr(module, name)
    except AttributeError:
        raise AttrMissing(name) from None
    return wrap(output, result, AttrSource(src, name) if src is not None else None)


def guard_missing_attr(tx: Translator, value: Value) -> None:
    """After an attribute was found missing (`hasattr` False, `getattr` with a default):
    guard the tables it could appear in, so that adding it later recompiles."""
    from capture.output_graph import GuardKind

    owner: object
    tables: tuple[str, ...]
    if isinstance(value, ModuleValue):
        owner, src = value.module, value.source
        tables = ("__dict__", "_parameters", "_buffers", "_modules")
    elif isinstance(value, ObjectValue) and value.obj is not None:
        owner, src = value.obj, value.source
        tables = ("__dict__",)
    else:
        return
    if src is None:
        return
    for table in tables:
        entries = getattr(owner, table, None)
        if isinstance(entries, dict):
            tx.output.add_guard(AttrSource(src, table), GuardKind.DICT_KEYS, tuple(entries))


def _user_hook(cls: type, name: str) -> types.FunctionType | None:
    """The class's own Python `__getattribute__`/`__getattr__` (None: object's or a C one)."""
    hook = inspect.getattr_static(cls, name, None)
    return hook if isinstance(hook, types.FunctionType) else None


def _call_attr_hook(tx: Translator, hook: types.FunctionType, ov: ObjectValue,
                    name: str) -> Value:
    """`hook(obj, name)` traced, so what it reads is guarded and what it changes replayed;
    an AttributeError it raises is a missing attribute."""
    try:
        return dispatch.call_value(tx, ConstantValue(hook), [ov, ConstantValue(name)], {})
    except RaisedInTrace as raised:
        if isinstance(raised.exception, AttributeError):
            raise AttrMissing(name) from None
        raise


@special(object.__getattribute__)
def _object_getattribute(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`object.__getattribute__(obj, name)` (and `super().__getattribute__(name)`): the
    lookup without the class's own `__getattribute__`."""
    if len(args) != 2 or kwargs or not args[1].is_constant():
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "object.__getattribute__ call")
    name = args[1].as_constant()
    owner = args[0]
    if not isinstance(name, str) or not isinstance(owner, ObjectValue):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "object.__getattribute__ call")
    try:
        return _object_attr(tx, owner, name, plain=True)
    except AttrMissing:
        raise RaisedInTrace(AttributeError(name)) from None


def _object_attr(tx: Translator, ov: ObjectValue, name: str, plain: bool = False) -> Value:
    output = tx.output
    if ov.obj is not None and not plain:
        # NOTE: a class's own attribute hooks run on every read in eager: traced here.
        hook = _user_hook(type(ov.obj), "__getattribute__")
        if hook is not None:
            try:
                return _call_attr_hook(tx, hook, ov, name)
            except AttrMissing:
                fallback = _user_hook(type(ov.obj), "__getattr__")
                if fallback is None:
                    raise
                return _call_attr_hook(tx, fallback, ov, name)
    if name in ov.attrs:
        return ov.attrs[name]
    if name == "__class__":
        return ConstantValue(ov.cls)
    if name == "__dict__" and ov.obj is None:
        return DictValue({k: (ConstantValue(k), v) for k, v in ov.attrs.items()})
    class_pending = output.side_effects.pending_class_attr(
        ov.cls if ov.obj is None else type(ov.obj), name)
    if ov.obj is None:
        if class_pending is not None:
            return class_pending
        found = _class_attr(tx, ov, ov.cls, name)
        if found is not None:
            return found
        try:
            result = getattr(ov.cls, name)
        except AttributeError:
            raise AttrMissing(name) from None
        return wrap(output, result, None)
    pending = output.side_effects.pending_attr(ov, name)
    if pending is not None:
        return pending
    obj = ov.obj
    src = ov.source if ov.source is not None else ConstSource.of(obj)
    instance_dict = getattr(obj, "__dict__", None)
    if isinstance(instance_dict, dict) and name in instance_dict:
        return wrap(output, instance_dict[name], AttrSource(src, name) if src else None)
    if class_pending is not None:
        return class_pending  # `type(self).n += 1; self.n`: the class write, not the old value
    static = None
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            static = klass.__dict__[name]
            break
    if isinstance(static, (types.FunctionType, staticmethod, classmethod, property,
                           types.MethodDescriptorType, types.WrapperDescriptorType)):
        # NOTE: a C method too: reading it for real makes a new bound method each time,
        # which an identity guard would never match again.
        found = _class_attr(tx, ov, type(obj), name)
        assert found is not None
        return found
    getter = None if static is None else _user_hook(type(static), "__get__")
    if getter is not None:
        # NOTE: a descriptor written in Python: its `__get__` runs on every read in eager
        # (it may count reads or compute from other state): traced.
        lookup_guards.guard_class_lookup(tx, type(obj), name)
        lookup_guards.guard_not_shadowed(tx, obj, src, name)
        desc = wrap(output, static, ConstSource.of(static))
        return dispatch.call_value(tx, ConstantValue(getter),
                                   [desc, ov, ConstantValue(type(obj))], {})
    if static is None and not plain:
        fallback = _user_hook(type(obj), "__getattr__")
        if fallback is not None:
            # NOTE: not found by the normal lookup: the class's `__getattr__` decides, and
            # what it reads (a table that may gain the name later) is guarded by tracing it.
            lookup_guards.guard_class_lookup(tx, type(obj), name)
            lookup_guards.guard_not_shadowed(tx, obj, src, name)
            return _call_attr_hook(tx, fallback, ov, name)
    try:
        result = getattr(obj, name)
    except AttributeError:
        raise AttrMissing(name) from None
    return wrap(output, result, AttrSource(src, name) if src else None)


def _super_attr(tx: Translator, sv: SuperValue, name: str) -> Value:
    obj_type = sv.obj.python_type()
    if isinstance(sv.obj, ConstantValue) and isinstance(sv.obj.value, type):
        obj_type = sv.obj.value
    mro = obj_type.__mro__
    start = mro.index(sv.cls) + 1 if sv.cls in mro else 0
    lookup_guards.guard_class_lookup(tx, obj_type, name, start)
    for klass in mro[start:]:
        if name in klass.__dict__:
            static = klass.__dict__[name]
            if isinstance(static, types.FunctionType):
                return MethodValue(sv.obj, ConstantValue(static))
            if isinstance(static, staticmethod):
                return ConstantValue(static.__func__)
            if isinstance(static, classmethod):
                return MethodValue(ConstantValue(obj_type), ConstantValue(static.__func__))
            if isinstance(static, property) and static.fget is not None:

                return dispatch.call_value(tx, ConstantValue(static.fget), [sv.obj], {})
            if callable(static):
                return MethodValue(sv.obj, ConstantValue(static))
            return wrap(tx.output, static, None)
    raise AttrMissing(name)


def store_attr(tx: Translator, owner: Value, name: str, value: Value) -> None:
    """`owner.name = value`."""
    output = tx.output
    if isinstance(owner, PrivateObjectValue):
        private_store(owner, name, value)
        return
    cls_of_owner = owner.python_type() if isinstance(owner, (ObjectValue, ModuleValue)) else None
    if cls_of_owner is not None:
        descriptor = inspect.getattr_static(cls_of_owner, name, None)
        if isinstance(descriptor, property):
            if descriptor.fset is None:
                raise unsupported(GraphBreakKind.EXCEPTION, f"AttributeError: can't set {name!r}")

            dispatch.call_value(tx, ConstantValue(descriptor.fset), [owner, value], {})
            return
    if isinstance(owner, ConstantValue) and isinstance(owner.value, type):
        output.side_effects.store_attr(owner, name, value)
        return
    if isinstance(owner, ObjectValue) and owner.obj is None:
        setter = inspect.getattr_static(owner.cls, "__setattr__", object.__setattr__)
        if setter is not object.__setattr__ and inspect.isfunction(setter):

            dispatch.call_value(tx, ConstantValue(setter), [owner, ConstantValue(name), value], {})
            return
        owner.attrs[name] = value
        return
    if isinstance(owner, (ObjectValue, ModuleValue)):
        if isinstance(owner, ModuleValue) and isinstance(value, TensorValue):
            current = owner.module._parameters.get(name, owner.module._buffers.get(name))
            if current is not None and output.input_by_id.get(id(current)) is value:
                return  # `self.buf = self.buf` (e.g. after `self.buf += 1`): nothing changes
            if name in owner.module._parameters:
                raise unsupported(
                    GraphBreakKind.UNSUPPORTED_OBJECT,
                    f"assigning a tensor to the parameter {name!r} of {owner.describe()}",
                )
        output.side_effects.store_attr(owner, name, value)
        return
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"setting attribute {name!r} on {owner.describe()}"
    )


def delete_attribute(tx: Translator, owner: Value, name: str) -> None:
    """`del owner.name` (and `delattr(owner, name)`)."""
    if isinstance(owner, PrivateObjectValue):
        try:
            delattr(owner.obj, name)
        except AttributeError as error:
            raise unsupported(GraphBreakKind.EXCEPTION, f"AttributeError: {error}") from None
        return
    if isinstance(owner, ObjectValue) and owner.obj is None:
        if owner.attrs.pop(name, None) is None:
            raise unsupported(GraphBreakKind.EXCEPTION, f"AttributeError: {name!r}")
        return
    if isinstance(owner, (ObjectValue, ModuleValue)) and owner.source is not None:
        effects = tx.output.side_effects
        real = owner.obj if isinstance(owner, ObjectValue) else owner.module
        if effects.pending_attr(owner, name) is not None and not hasattr(real, name):
            effects.attr_writes[effects.key(owner)][1].pop(name)
            return
        effects.store_attr(owner, name, side_effects.DELETED)
        return
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"del of attribute {name!r}")


dispatch.get_attr = get_attr
dispatch.store_attr = store_attr
dispatch.guard_missing_attr = guard_missing_attr
