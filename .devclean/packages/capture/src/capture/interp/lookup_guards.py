"""Guards for attribute lookups that go through classes: the trace resolved `obj.name` or
`cls.name` by walking a method resolution order, so the entry holds only while that walk
would find the same thing.

In: a class (and optionally the instance and its source) and the attribute name. Out: guard
records that `name` is still absent from the class dicts before the one defining it, that the
defining dict still holds the same object (or an equal constant), and that the instance
`__dict__` does not shadow a method. Class dicts are reached through `ConstSource` roots (the
class is fixed for the entry: its instances are type- or id-guarded), so a method, static
method, property or class attribute replaced after the first call is seen on the next one.
"""

from __future__ import annotations

import types
import weakref
from typing import TYPE_CHECKING

from guards.checks import is_guardable_constant
from guards.sources import AttrSource, ConstSource, ItemSource, Source

from capture.output_graph import GuardKind

if TYPE_CHECKING:
    from capture.interp.translator import Translator
    from capture.output_graph import OutputGraph

#: What `static_lookup` returns for a name no class in the MRO defines.
MISSING = object()

# NOTE: one mappingproxy per class, so that every guard on a class shares one ConstSource
# (and one accessor node in the guard tree); the proxy is a live view of the class dict.
_PROXIES: weakref.WeakKeyDictionary[type, types.MappingProxyType[str, object]] = (
    weakref.WeakKeyDictionary()
)


def class_dict_source(cls: type) -> Source:
    """The source of `vars(cls)` (a live view of the class's namespace)."""
    try:
        proxy = _PROXIES.get(cls)
        if proxy is None:
            proxy = _PROXIES[cls] = cls.__dict__
    except TypeError:  # NOTE: a class that cannot be weakly referenced
        proxy = cls.__dict__
    return ConstSource.of(proxy, f"vars({cls.__qualname__})")


def const_source(obj: object) -> Source | None:
    """A source for a fixed object whose attributes the trace reads (modules, classes,
    functions), or None for other objects."""
    if isinstance(obj, (types.ModuleType, type, types.FunctionType)):
        return ConstSource.of(obj)
    return None


def static_lookup(cls: type, name: str, start: int = 0) -> tuple[int, object]:
    """(index in `cls.__mro__`, raw class-dict entry) of the first class from `start` on that
    defines `name`; (-1, MISSING) if none does."""
    mro = cls.__mro__
    for index in range(start, len(mro)):
        namespace = mro[index].__dict__
        if name in namespace:
            return index, namespace[name]
    return -1, MISSING


#: `Py_TPFLAGS_IMMUTABLETYPE`: a type whose attributes cannot be set (object, int,
#: torch._C.TensorBase, ...).
_IMMUTABLE_TYPE = 1 << 8


def _immutable(cls: type) -> bool:
    return cls is object or bool(cls.__flags__ & _IMMUTABLE_TYPE)


def guard_class_lookup(tx: Translator, cls: type, name: str, start: int = 0) -> object:
    """`static_lookup(cls, name, start)`'s entry, with guards that it stays the result.

    Classes are skipped from `start` on as the lookup does; the MRO itself (`__bases__`) is
    assumed fixed.
    """
    output = tx.output
    index, static = static_lookup(cls, name, start)
    mro = cls.__mro__
    stop = index if index >= 0 else len(mro)
    for klass in mro[start:stop]:
        if _immutable(klass):
            continue  # NOTE: builtins' (and other immutable types') dicts cannot change
        output.add_guard(class_dict_source(klass), GuardKind.KEY_ABSENT, name)
    if index >= 0 and not _immutable(mro[index]):
        entry = ItemSource(class_dict_source(mro[index]), name)
        if is_guardable_constant(static):
            output.add_guard(entry, GuardKind.CONST_EQ, static)
        else:
            output.add_guard(entry, GuardKind.ID_MATCH, static)
    return static


def is_data_descriptor(static: object) -> bool:
    """Whether a class attribute takes precedence over the instance `__dict__`."""
    kind = type(static)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def guard_not_shadowed(tx: Translator, obj: object, source: Source | None, name: str) -> None:
    """Guard that the instance `__dict__` of `obj` does not hold `name` (so a method found on
    the class is the one called): `name not in obj.__dict__`."""
    namespace = getattr(obj, "__dict__", None)
    if not isinstance(namespace, dict):
        return
    if source is None:
        source = ConstSource.of(obj)
    tx.output.add_guard(AttrSource(source, "__dict__"), GuardKind.KEY_ABSENT, name)


#: The hook tables of `torch.nn.modules.module` that `Module.__call__` reads on every call.
_GLOBAL_HOOK_TABLES = ("_global_forward_hooks", "_global_forward_pre_hooks",
                       "_global_backward_hooks", "_global_backward_pre_hooks")


def guard_no_global_module_hooks(tx: Translator) -> None:
    """Before inlining a module call: refuse (run eagerly) if global module hooks are
    registered, and guard that none are, so that registering one later recompiles."""
    import torch

    from capture.graph_break import GraphBreakKind, unsupported

    module_globals = vars(torch.nn.modules.module)
    namespace = ConstSource.of(module_globals, "vars(torch.nn.modules.module)")
    for table in _GLOBAL_HOOK_TABLES:
        hooks = module_globals[table]
        tx.output.add_guard(ItemSource(namespace, table), GuardKind.LEN, len(hooks))
        if hooks:
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "global module hooks")


def guard_own_defaults(output: OutputGraph, fn: types.FunctionType) -> None:
    """Guard that the compiled function's own `__defaults__` / `__kwdefaults__` are the
    objects they were (rebinding them must recompile: the arguments were bound with them)."""
    source = ConstSource.of(fn)
    for table in ("__defaults__", "__kwdefaults__"):
        current = getattr(fn, table)
        if current is not None:
            output.add_guard(AttrSource(source, table), GuardKind.ID_MATCH, current)


def defaults_changed(binder: object, fn: types.FunctionType) -> bool:
    """Whether `fn`'s defaults were rebound since `binder` copied them."""
    return (getattr(binder, "__defaults__", None) is not fn.__defaults__
            or getattr(binder, "__kwdefaults__", None) is not fn.__kwdefaults__)


def class_method(tx: Translator, cls: type, name: str) -> object:
    """`getattr(cls, name, None)` for a special method the interpreter calls implicitly
    (`__add__`, `__len__`, `__getitem__`, `__call__`, ...), guarded like any class lookup:
    replacing it on the class recompiles. Implicit lookups skip the instance `__dict__`."""
    guard_class_lookup(tx, cls, name)
    return getattr(cls, name, None)
