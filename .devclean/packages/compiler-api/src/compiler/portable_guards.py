"""Guard trees written for another process (`frame_cache`): `encode(tree)` and
`decode(data, L, G)`.

A guard tree made by capture holds objects of the process that built it: `id(...)` checks
on modules, classes, functions and code objects, and `ConstSource` roots (a class's
`__dict__`, a module's globals, a function). `encode` replaces each by a description that
another process can match, and refuses (`NotPortable`) anything it cannot describe:

- a module by its name; a class, function or builtin by module and qualified name, found
  again only through `sys.modules` (nothing is imported), a class with the names of its
  whole MRO, a Python function with the digest of its code;
- a code object by the digest of its content (bytecode, names, constants, nested code);
- a constant (None, bools, numbers, strings, dtypes, devices, enum members, tuples of those)
  by its value;
- any other object checked by identity (a module instance, a user object) by its class, and
  by which of the identity-checked sources held the same object.

`decode` re-reads every guarded source in the new process (from the call's `L` and `G`),
requires each identity-checked value to match its description and the same-object groups to
be the same, and builds the tree again with identity checks on the objects found: what a
fresh capture in this process would guard. Size symbols and relations (dynamic shapes) and
backend checks are not portable.
"""

from __future__ import annotations

import enum
import hashlib
import sys
import types
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import guards
import torch
from guards import sources as _sources
from guards.checks import (
    AliasCheck,
    Check,
    DictKeysMatch,
    EqualsMatch,
    GlobalStateMatch,
    IdentityBind,
    IdMatch,
    KeyAbsent,
    LengthMatch,
    NotNone,
    TensorMatch,
    TypeMatch,
    constant_matches,
    is_guardable_constant,
)
from guards.sources import ConstSource, GlobalSource, LocalSource, Source
from guards.tree import GuardNode, GuardTree

__all__ = ["NotPortable", "code_digest", "decode", "encode"]

Encoded = Any


class NotPortable(Exception):
    """A guard (or the value it checks) has no description valid in another process."""


# --------------------------------------------------------------------------- names


def code_digest(code: types.CodeType) -> str:
    """A digest of what a code object does: bytecode, names, arguments, flags, constants
    (nested code objects by their digest); not its file or line numbers."""
    digest = hashlib.sha256()
    for part in (code.co_name, code.co_qualname, code.co_argcount, code.co_posonlyargcount,
                 code.co_kwonlyargcount, code.co_flags, code.co_names, code.co_varnames,
                 code.co_freevars, code.co_cellvars):
        digest.update(repr(part).encode() + b"\0")
    digest.update(code.co_code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            digest.update(b"code:" + code_digest(const).encode())
        else:
            # NOTE: repr with the type: 1 vs 1.0 vs True, -0.0 vs 0.0
            digest.update(f"{type(const).__qualname__}:{const!r}\0".encode())
    return digest.hexdigest()[:32]


def _resolve(module: str, qualname: str) -> Any:
    """The object `module.qualname` of an already imported module (nothing is imported).
    Each `#` after the name is one step down a decorator's `__wrapped__` (a function the
    module holds only wrapped, see `_name`)."""
    value: Any = sys.modules.get(module)
    named, _, accessor = qualname.partition(":")
    path = named.rstrip("#")
    if value is None or "<" in qualname:
        raise NotPortable(f"{module}.{qualname} cannot be found by name")
    for part in path.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            raise NotPortable(f"{module}.{qualname} not found")
    if accessor in _ACCESSORS:  # NOTE: `:fset`: a property's setter, found through it
        if not isinstance(value, property):
            raise NotPortable(f"{module}.{path} is not a property")
        return getattr(value, accessor)
    for _ in range(len(named) - len(path)):
        value = getattr(value, "__wrapped__", _MISSING)
        if value is _MISSING:
            raise NotPortable(f"{module}.{path} is not wrapped")
    return value


#: how many decorators deep `_name` looks for a function its module holds wrapped
_UNWRAP_DEPTH = 4
_ACCESSORS = ("fget", "fset", "fdel")


_MISSING = object()


def _name(obj: Any) -> tuple[str, str]:
    """(module, qualname) under which `obj` is found again; NotPortable if it is not."""
    module: object
    qualname: object
    if isinstance(obj, types.BuiltinFunctionType):
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, types.ModuleType):
            module, qualname = owner.__name__, obj.__name__
        elif owner is None or isinstance(owner, type):
            # NOTE: torch's functions are methods of a class (torch._VariableFunctionsClass)
            # that the `torch` module holds under their own names
            module, qualname = str(obj.__module__), obj.__name__
        else:
            raise NotPortable(f"a method bound to an object: {obj!r}")
    else:
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise NotPortable(f"{type(obj).__qualname__} object has no name")
    found = _resolve(module, qualname)
    if isinstance(found, property):  # NOTE: a property's getter or setter under its name
        for accessor in _ACCESSORS:
            if getattr(found, accessor) is obj:
                return module, f"{qualname}:{accessor}"
    for depth in range(_UNWRAP_DEPTH + 1):
        if found is obj:
            return module, qualname + "#" * depth
        found = getattr(found, "__wrapped__", None)
        if found is None:
            break
    # NOTE: a decorated method (transformers' `forward`s) is checked as the function
    # under its decorators; the class holds the wrapper under that function's name
    raise NotPortable(f"{module}.{qualname} is another object")


def _class_ref(cls: type) -> Encoded:
    module, qualname = _name(cls)
    return ("class", module, qualname, tuple(_name(c) for c in cls.__mro__[1:]))


def _class(ref: Encoded) -> type:
    _, module, qualname, mro = ref
    cls = _resolve(module, qualname)
    if (not isinstance(cls, type) or not _named(cls, module, qualname)
            or tuple(_name(c) for c in cls.__mro__[1:]) != tuple(mro)):
        raise NotPortable(f"class {module}.{qualname} differs")
    return cls


def _named(obj: Any, module: str, qualname: str) -> bool:
    """Whether `obj` is found as `module.qualname` and names itself so: an object put in
    another's place (`torch.relu = my_relu`) names itself otherwise."""
    try:
        return _name(obj) == (module, qualname)
    except NotPortable:
        return False


# --------------------------------------------------------------------------- constants


def _const(value: Any) -> Encoded:
    if value is None or type(value) in (bool, int, float, str, bytes):
        return ("v", value)
    if type(value) is tuple:
        return ("t", tuple(_const(v) for v in value))
    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, torch.layout):
        return ("layout", str(value).removeprefix("torch."))
    if isinstance(value, enum.Enum):
        return ("enum", _class_ref(type(value)), value.name)
    raise NotPortable(f"a constant of type {type(value).__qualname__}")


def _unconst(data: Encoded) -> Any:
    tag = data[0]
    if tag == "v":
        return data[1]
    if tag == "t":
        return tuple(_unconst(v) for v in data[1])
    if tag in ("dtype", "layout"):
        value = getattr(torch, data[1])
        if not isinstance(value, torch.dtype if tag == "dtype" else torch.layout):
            raise NotPortable(f"torch.{data[1]}")
        return value
    if tag == "device":
        return torch.device(data[1])
    if tag == "enum":
        return _class(data[1])[data[2]]  # type: ignore[index]  # an Enum class
    raise NotPortable(f"unknown constant tag {tag!r}")


# --------------------------------------------------------------------------- objects


def _object(obj: Any) -> Encoded:
    """The description of an object checked by identity."""
    if obj is None or obj is Ellipsis or obj is NotImplemented or type(obj) is bool:
        return ("singleton", repr(obj))
    if is_guardable_constant(obj) or type(obj) in (bytes, frozenset) and all(
            is_guardable_constant(v) for v in obj):
        return ("const", _const(obj) if type(obj) is not frozenset else
                ("t", tuple(_const(v) for v in sorted(obj, key=repr))), type(obj).__name__)
    if isinstance(obj, types.ModuleType):
        if sys.modules.get(obj.__name__) is not obj:
            raise NotPortable(f"module {obj.__name__} is not in sys.modules")
        return ("module", obj.__name__)
    if isinstance(obj, types.CodeType):
        return ("code", code_digest(obj))
    if isinstance(obj, type):
        return ("type", _class_ref(obj))
    if isinstance(obj, types.FunctionType):
        module, qualname = _name(obj)
        return ("function", module, qualname, code_digest(obj.__code__))
    if isinstance(obj, (types.BuiltinFunctionType, types.MethodType, types.WrapperDescriptorType,
                        types.MethodDescriptorType, types.BuiltinMethodType,
                        types.MethodWrapperType, types.ClassMethodDescriptorType,
                        types.GetSetDescriptorType, types.MemberDescriptorType)):
        module, qualname = _name(obj)
        return ("named", module, qualname, type(obj).__qualname__)
    if type(obj) is tuple:  # NOTE: immutable: the same items make it the same tuple
        items = tuple(_object(item) for item in obj)
        if any(item[0] == "instance" for item in items):
            # NOTE: an instance is matched by its class and by which sources held it; an
            # item of a tuple has no source of its own
            raise NotPortable("a tuple holding an object known only by its class")
        return ("tuple", items)
    if isinstance(obj, property) and (place := _property_place(obj)) is not None:
        return ("property", _class_ref(place[0]), place[1], _accessor_digests(obj))
    if isinstance(obj, (torch.Tensor, torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                        types.MappingProxyType, staticmethod, classmethod, property)):
        raise NotPortable(f"a {type(obj).__qualname__} checked by identity")
    cls = type(obj)
    if cls.__module__ == "builtins" and cls not in (list, dict, set, object):
        raise NotPortable(f"a {cls.__qualname__} checked by identity")
    return ("instance", _class_ref(cls))


def _property_place(prop: property) -> tuple[type, str, types.FunctionType] | None:
    """(class, name, getter) of a property its class defines under its getter's name (the
    `@property` form), else None."""
    fget = prop.fget
    if not isinstance(fget, types.FunctionType) or "." not in fget.__qualname__:
        return None
    owner_name, _, name = fget.__qualname__.rpartition(".")
    try:
        owner = _resolve(fget.__module__, owner_name)
    except NotPortable:
        return None
    if not isinstance(owner, type) or vars(owner).get(name) is not prop:
        return None
    return owner, name, fget


def _accessor_digests(prop: property) -> tuple[str | None, ...]:
    """The code digests of a property's getter, setter and deleter (None: absent or not a
    Python function)."""
    return tuple(code_digest(f.__code__) if isinstance(f, types.FunctionType) else None
                 for f in (prop.fget, prop.fset, prop.fdel))


def _module_key(namespace: dict[str, Any]) -> str:
    """The `sys.modules` key of the module whose globals `namespace` is: its `__name__`, or
    another key where a module names itself otherwise (`_collections_abc` calls itself
    `collections.abc`, which is another module)."""
    name = namespace.get("__name__")
    if isinstance(name, str) and getattr(sys.modules.get(name), "__dict__", None) is namespace:
        return name
    for key, module in list(sys.modules.items()):
        if getattr(module, "__dict__", None) is namespace:
            return key
    raise NotPortable("a dict that is no module's namespace")


def _matches(description: Encoded, value: Any) -> bool:
    """Whether `value` (found in this process) is the object `description` describes."""
    tag = description[0]
    if tag == "singleton":
        return repr(value) == description[1] and (
            value is None or value is Ellipsis or value is NotImplemented or
            type(value) is bool)
    if tag == "const":
        encoded, kind = description[1], description[2]
        if type(value).__name__ != kind:
            return False
        if kind == "frozenset":
            return bool(_const(tuple(sorted(value, key=repr))) == encoded)
        if kind == "bytes":
            return bool(value == encoded[1])
        return constant_matches(value, _unconst(encoded))
    if tag == "module":
        return (isinstance(value, types.ModuleType) and value.__name__ == description[1]
                and sys.modules.get(description[1]) is value)
    if tag == "code":
        return isinstance(value, types.CodeType) and code_digest(value) == description[1]
    if tag == "type":
        return value is _class(description[1])
    if tag == "function":
        return (isinstance(value, types.FunctionType)
                and _named(value, description[1], description[2])
                and code_digest(value.__code__) == description[3])
    if tag == "named":
        return (type(value).__qualname__ == description[3]
                and _named(value, description[1], description[2]))
    if tag == "instance":
        return type(value) is _class(description[1])
    if tag == "tuple":
        items = description[1]
        return (type(value) is tuple and len(value) == len(items)
                and all(_matches(d, v) for d, v in zip(items, value)))
    if tag == "property":
        place = _property_place(value) if isinstance(value, property) else None
        return (place is not None and place[0] is _class(description[1])
                and place[1] == description[2]
                and _accessor_digests(value) == description[3])
    raise NotPortable(f"unknown object tag {tag!r}")


# --------------------------------------------------------------------------- sources


def _source(source: Source) -> Encoded:
    if isinstance(source, LocalSource):
        return ("L", source.local)
    if isinstance(source, GlobalSource):
        return ("G", source.global_name)
    if isinstance(source, ConstSource):
        obj = source.obj
        if isinstance(obj, types.MappingProxyType):
            owner = _owner(obj, source.label)
            if owner is None:
                raise NotPortable("a mappingproxy that is no class's __dict__")
            return ("C", ("vars", _class_ref(owner)))
        if isinstance(obj, dict):
            return ("C", ("globals", _module_key(obj)))
        return ("C", _object(obj))
    cls = type(source)
    if getattr(_sources, cls.__name__, None) is not cls:
        raise NotPortable(f"source kind {cls.__name__}")
    parts: list[Any] = []
    for f in fields(cls):
        value = getattr(source, f.name)
        parts.append(_source(value) if isinstance(value, Source) else _const(value))
    return ("S", cls.__name__, tuple(parts))


def _owner(proxy: types.MappingProxyType[str, Any], label: str) -> type | None:
    """The class whose `__dict__` `proxy` is (capture labels it `vars(<qualname>)`)."""
    module = proxy.get("__module__")
    if not (isinstance(module, str) and label.startswith("vars(") and label.endswith(")")):
        return None
    try:
        cls = _resolve(module, label[5:-1])
    except NotPortable:
        return None
    if not isinstance(cls, type):
        return None
    namespace = cls.__dict__
    if namespace.keys() != proxy.keys() or any(namespace[k] is not v for k, v in proxy.items()):
        return None
    return cls


def _unsource(data: Encoded) -> Source:
    tag = data[0]
    if tag == "L":
        return LocalSource(data[1])
    if tag == "G":
        return GlobalSource(data[1])
    if tag == "C":
        inner = data[1]
        if inner[0] == "vars":
            return ConstSource.of(_class(inner[1]).__dict__)
        if inner[0] == "globals":
            module = sys.modules.get(inner[1])
            if module is None:
                raise NotPortable(f"module {inner[1]} is not imported")
            return ConstSource.of(vars(module), f"vars({inner[1]})")
        return ConstSource.of(_materialize(inner))
    cls = getattr(_sources, data[1], None)
    if not isinstance(cls, type) or not issubclass(cls, Source):
        raise NotPortable(f"source kind {data[1]}")
    values = [_unsource(v) if v[0] in ("L", "G", "C", "S") else _unconst(v)
              for v in data[2]]
    return cls(*values)


def _materialize(description: Encoded) -> Any:
    """The object a description names in this process (for ConstSource roots)."""
    tag = description[0]
    if tag == "module":
        module = sys.modules.get(description[1])
        if module is None:
            raise NotPortable(f"module {description[1]} is not imported")
        return module
    if tag == "type":
        return _class(description[1])
    if tag in ("function", "named"):
        value = _resolve(description[1], description[2])
        if not _matches(description, value):
            raise NotPortable(f"{description[1]}.{description[2]} differs")
        return value
    raise NotPortable(f"a {tag} cannot be a constant root")


def _fetch(source: Source, L: dict[str, object], G: dict[str, object]) -> Any:
    chain = source.chain()
    root = chain[0]
    value = root.fetch(G if isinstance(root, GlobalSource) else L)
    for link in chain[1:]:
        value = link.fetch(value)
    return value


# --------------------------------------------------------------------------- checks


def _check(check: Check, groups: dict[int, int]) -> Encoded:
    if isinstance(check, TypeMatch):
        return ("type", _class_ref(check.cls))
    if isinstance(check, IdMatch):
        if not check.holds_object():
            raise NotPortable("an identity check without its object")
        group = groups.setdefault(check.target_id, len(groups))
        return ("id", group, _object(check.obj))
    if isinstance(check, EqualsMatch):
        return ("eq", _const(check.value))
    if isinstance(check, LengthMatch):
        return ("len", check.length)
    if isinstance(check, DictKeysMatch):
        return ("keys", _const(tuple(check.keys)))
    if isinstance(check, KeyAbsent):
        return ("absent", _const(check.key))
    if isinstance(check, NotNone):
        return ("notnone",)
    if isinstance(check, TensorMatch):
        return ("tensor", _class_ref(check.cls), _const(check.dtype), _const(check.device),
                check.requires_grad, check.shape, check.strides, check.dispatch_keys,
                None if check.layout is None else _const(check.layout))
    if isinstance(check, IdentityBind):
        return ("bind", check.slot)
    if isinstance(check, AliasCheck):
        return ("alias", check.groups)
    raise NotPortable(f"a {type(check).__name__} check")


def encode(tree: GuardTree) -> Encoded:
    """The portable form of `tree`; NotPortable if a check or source has none."""
    if tree.symbols:
        raise NotPortable("size symbols (dynamic shapes)")
    roots = []
    for check in tree.root_checks:
        if not isinstance(check, GlobalStateMatch):
            raise NotPortable(f"a root {type(check).__name__} check")
        roots.append(("global", check.grad_enabled,
                      None if check.default_dtype is None else _const(check.default_dtype),
                      check.deterministic,
                      None if check.autocast is None else tuple(
                          (d, on, _const(dt)) for d, on, dt in check.autocast)))
    groups: dict[int, int] = {}
    nodes: list[Encoded] = []

    def visit(node: GuardNode) -> None:
        nodes.append((_source(node.source), tuple(_check(c, groups) for c in node.checks)))
        for child in node.children:
            visit(child)

    for node in tree.children:
        visit(node)
    return ("guards-v1", tuple(roots), tuple(nodes))


def decode(data: Encoded, L: dict[str, object], G: dict[str, object]) -> GuardTree:
    """The tree `encode` wrote, rebuilt for this process from the values in `L` and `G`;
    NotPortable (or any error reading a source) when an object does not match its
    description or the same-object groups differ. The result's checks are not run here."""
    if not isinstance(data, tuple) or len(data) != 3 or data[0] != "guards-v1":
        raise NotPortable("not a portable guard tree")
    builder = guards.GuardBuilder()
    for _, grad, dtype, deterministic, autocast in data[1]:
        builder.add_global(GlobalStateMatch(
            grad, None if dtype is None else _unconst(dtype), deterministic,
            None if autocast is None else tuple((d, on, _unconst(dt)) for d, on, dt in autocast)))
    seen: dict[int, int] = {}  # group -> id of the object found for it
    slots: dict[str, Source] = {}
    aliasing: list[tuple[tuple[str, ...], ...]] = []
    for encoded_source, checks in data[2]:
        source = _unsource(encoded_source)
        builder.touch(source)
        value: Any = _MISSING
        for check in checks:
            tag = check[0]
            made: Check | None = None
            if tag == "id":
                if value is _MISSING:
                    value = _fetch(source, L, G)
                group, description = check[1], check[2]
                if not _matches(description, value):
                    raise NotPortable(f"{source.name()} is not the object it was")
                if seen.setdefault(group, id(value)) != id(value) or list(
                        seen.values()).count(id(value)) != 1:
                    raise NotPortable(f"{source.name()}: other objects are shared")
                made = IdMatch.of(value)
            elif tag == "bind":
                slots[check[1]] = source
            elif tag == "alias":
                aliasing.append(check[1])
            else:
                made = _make(check)
            if made is not None:
                builder.add(source, made)
    for groups in aliasing:
        builder.add_aliasing([[slots[slot] for slot in group] for group in groups])
    return builder.build()


_SIMPLE: dict[str, Callable[[Encoded], Check]] = {
    "type": lambda c: TypeMatch(_class(c[1])),
    "eq": lambda c: EqualsMatch(_unconst(c[1])),
    "len": lambda c: LengthMatch(c[1]),
    "keys": lambda c: DictKeysMatch(_unconst(c[1])),
    "absent": lambda c: KeyAbsent(_unconst(c[1])),
    "notnone": lambda c: NotNone(),
    "tensor": lambda c: TensorMatch(_class(c[1]), _unconst(c[2]), _unconst(c[3]), c[4],
                                    tuple(c[5]), tuple(c[6]), c[7],
                                    None if c[8] is None else _unconst(c[8])),
}


def _make(check: Encoded) -> Check:
    make = _SIMPLE.get(check[0])
    if make is None:
        raise NotPortable(f"unknown check tag {check[0]!r}")
    return make(check)
