"""Sources: typed, hashable descriptions of where a guarded value comes from.

A source is a chain rooted at a frame's locals (`L['x']`) or globals (`G['name']`); each
further link is one accessor step (attribute, item, size, parameter, ...). Every step knows
three things side by side, so that the interpreter and the generated code cannot drift apart:
how it renders for messages, how it fetches a value, and the Python expression that fetches it.
"""

from __future__ import annotations

import enum
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field

# NOTE: keys that are not literals (floats, enum members, ...) are bound as constants in the
# generated code instead of being spelled with repr().
ItemKey = object


def _key_literal(key: object) -> str:
    """The key as user code would spell it, for messages (an object key, such as the
    parameter keying an optimizer's `state`, by its type and id: its repr may be huge)."""
    if _is_literal_key(key) or type(key) in (float, complex) or isinstance(key, enum.Enum):
        return repr(key)
    return f"<{type(key).__name__} at {id(key):#x}>"


def _is_literal_key(key: object) -> bool:
    """Whether repr(key) is a Python literal equal to key (else the code binds a constant)."""
    if key is None or type(key) in (int, str, bool):
        return True
    return type(key) is tuple and all(_is_literal_key(item) for item in key)


@dataclass(frozen=True, slots=True)
class Source:
    """Base of all sources: where a value comes from, relative to the frame (L, G).

    Subclasses are frozen dataclasses, so sources are hashable and compare by value; the
    guard tree shares one accessor per distinct source.
    """

    @property
    def base(self) -> Source | None:
        """The source this one reads from (None for a root: a local or a global)."""
        return None

    def name(self) -> str:
        """Readable text for messages, e.g. `L['x'].weight.shape[0]`."""
        raise NotImplementedError

    def fetch(self, base: object) -> object:
        """Read this step's value from the value of `self.base` (roots get L or G)."""
        raise NotImplementedError

    def code(self, base: str, const: Callable[[object], str]) -> str:
        """A Python expression reading this step from the expression `base`.

        `const(obj)` returns the name of a closure variable bound to `obj`, for constants
        that are not literals.
        """
        raise NotImplementedError

    def root(self) -> Source:
        """The root source (LocalSource or GlobalSource) of this chain."""
        source: Source = self
        while source.base is not None:
            source = source.base
        return source

    def chain(self) -> tuple[Source, ...]:
        """All sources from the root to this one, root first."""
        out: list[Source] = []
        source: Source | None = self
        while source is not None:
            out.append(source)
            source = source.base
        return tuple(reversed(out))

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """A local variable (argument) of the frame: `L['x']`."""

    local: str

    def name(self) -> str:
        return f"L[{self.local!r}]"

    def fetch(self, base: object) -> object:
        return base[self.local]  # type: ignore[index]  # base is L, a dict

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"L[{self.local!r}]"


@dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A global of the function's module: `G['name']`."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def fetch(self, base: object) -> object:
        return base[self.global_name]  # type: ignore[index]  # base is G, a dict

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"G[{self.global_name!r}]"


@dataclass(frozen=True, slots=True)
class ConstSource(Source):
    """A fixed object known when the guard was built (a class, a module's `__dict__`, a
    function): the root of guards on state read through it, such as `ConstSource(K).scale`
    or `ConstSource(vars(F))['gelu']`.

    Compares by the object's identity and keeps the object alive. `label` names it in
    messages (default: a short description of the object).
    """

    obj_id: int
    obj: object = field(compare=False, repr=False, default=None)
    label: str = field(compare=False, default="")

    @staticmethod
    def of(obj: object, label: str = "") -> ConstSource:
        """The source standing for `obj` itself."""
        return ConstSource(id(obj), obj, label or _describe_object(obj))

    def name(self) -> str:
        return f"<{self.label}>"

    def fetch(self, base: object) -> object:
        return self.obj

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return const(self.obj)


def _describe_object(obj: object) -> str:
    """A short name for a ConstSource's object, for messages."""
    import types

    if isinstance(obj, types.MappingProxyType):
        owner = obj.get("__qualname__")
        return f"vars({owner})" if isinstance(owner, str) else "mappingproxy"
    if isinstance(obj, dict) and isinstance(obj.get("__name__"), str):
        return f"vars({obj['__name__']})"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(obj).__qualname__} object at {id(obj):#x}"


@dataclass(frozen=True, slots=True)
class _ChainedSource(Source):
    """A source one accessor step away from `source`."""

    source: Source

    @property
    def base(self) -> Source | None:
        return self.source


@dataclass(frozen=True, slots=True)
class AttrSource(_ChainedSource):
    """An attribute: `L['self'].weight` (plain getattr, so properties and __getattr__ run)."""

    attr: str

    def name(self) -> str:
        return f"{self.source.name()}.{self.attr}"

    def fetch(self, base: object) -> object:
        return getattr(base, self.attr)

    def code(self, base: str, const: Callable[[object], str]) -> str:
        if self.attr.isidentifier() and not keyword.iskeyword(self.attr):
            # NOTE: no name mangling here: the generated guard is not inside a class body.
            return f"{base}.{self.attr}"
        return f"getattr({base}, {self.attr!r})"  # NOTE: keywords, non-identifier names


@dataclass(frozen=True, slots=True)
class ItemSource(_ChainedSource):
    """An item by int index or constant key: `L['xs'][0]`, `L['cfg']['mode']`."""

    key: ItemKey

    def name(self) -> str:
        return f"{self.source.name()}[{_key_literal(self.key)}]"

    def fetch(self, base: object) -> object:
        return base[self.key]  # type: ignore[index]  # failures become guard failures

    def code(self, base: str, const: Callable[[object], str]) -> str:
        if _is_literal_key(self.key):
            return f"{base}[{self.key!r}]"
        return f"{base}[{const(self.key)}]"


@dataclass(frozen=True, slots=True)
class SizeSource(_ChainedSource):
    """One element of a tensor's size: `L['x'].shape[0]`."""

    index: int

    def name(self) -> str:
        return f"{self.source.name()}.shape[{self.index}]"

    def fetch(self, base: object) -> object:
        return base.shape[self.index]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}.shape[{self.index}]"


@dataclass(frozen=True, slots=True)
class StrideSource(_ChainedSource):
    """One element of a tensor's strides: `L['x'].stride()[1]`."""

    index: int

    def name(self) -> str:
        return f"{self.source.name()}.stride()[{self.index}]"

    def fetch(self, base: object) -> object:
        return base.stride()[self.index]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}.stride()[{self.index}]"


@dataclass(frozen=True, slots=True)
class ClosureSource(_ChainedSource):
    """A closure cell's content of the function at `source`: `G['f'].__closure__[0]`.

    `var` is the free variable's name, for the reader (it is not part of the rendering).
    """

    index: int
    var: str = ""

    def name(self) -> str:
        return f"{self.source.name()}.__closure__[{self.index}].cell_contents"

    def fetch(self, base: object) -> object:
        return base.__closure__[self.index].cell_contents  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}.__closure__[{self.index}].cell_contents"


@dataclass(frozen=True, slots=True)
class DefaultSource(_ChainedSource):
    """A default argument of the function at `source`.

    An int `key` indexes `__defaults__`; a str `key` names a keyword-only default in
    `__kwdefaults__`.
    """

    key: int | str

    def name(self) -> str:
        if isinstance(self.key, int):
            return f"{self.source.name()}.__defaults__[{self.key}]"
        return f"{self.source.name()}.__kwdefaults__[{self.key!r}]"

    def fetch(self, base: object) -> object:
        if isinstance(self.key, int):
            return base.__defaults__[self.key]  # type: ignore[attr-defined]
        return base.__kwdefaults__[self.key]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        if isinstance(self.key, int):
            return f"{base}.__defaults__[{self.key}]"
        return f"{base}.__kwdefaults__[{self.key!r}]"


@dataclass(frozen=True, slots=True)
class ParamSource(_ChainedSource):
    """A module's registered parameter: renders `L['self'].weight`.

    Reads `module._parameters[name]` directly: the same object `module.weight` returns,
    without going through `nn.Module.__getattr__` (several times slower).
    """

    param: str

    def name(self) -> str:
        return f"{self.source.name()}.{self.param}"

    def fetch(self, base: object) -> object:
        return base._parameters[self.param]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}._parameters[{self.param!r}]"


@dataclass(frozen=True, slots=True)
class BufferSource(_ChainedSource):
    """A module's registered buffer (`module._buffers[name]`): renders `L['self'].running_mean`."""

    buffer: str

    def name(self) -> str:
        return f"{self.source.name()}.{self.buffer}"

    def fetch(self, base: object) -> object:
        return base._buffers[self.buffer]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}._buffers[{self.buffer!r}]"


@dataclass(frozen=True, slots=True)
class SubmoduleSource(_ChainedSource):
    """A module's registered child (`module._modules[name]`).

    Renders `L['self'].layers` or, for numeric names (ModuleList, Sequential),
    `L['self'].layers[3]`, the way user code spells them.
    """

    child: str

    def name(self) -> str:
        if self.child.isdigit():
            return f"{self.source.name()}[{self.child}]"
        return f"{self.source.name()}.{self.child}"

    def fetch(self, base: object) -> object:
        return base._modules[self.child]  # type: ignore[attr-defined]

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}._modules[{self.child!r}]"


@dataclass(frozen=True, slots=True)
class CallSource(_ChainedSource):
    """The result of calling a method without arguments, for facts of tensors that are not
    attributes: `L['x'].storage_offset()`, `L['x']._is_view()`.

    Only for methods that read state and change nothing (the guard calls it on every check).
    """

    method: str

    def __post_init__(self) -> None:
        if not self.method.isidentifier():
            raise ValueError(f"CallSource needs a method name, got {self.method!r}")

    def name(self) -> str:
        return f"{self.source.name()}.{self.method}()"

    def fetch(self, base: object) -> object:
        return getattr(base, self.method)()

    def code(self, base: str, const: Callable[[object], str]) -> str:
        return f"{base}.{self.method}()"
