"""Python containers whose items are values: list, tuple (incl. namedtuple), dict, set,
and materialized iterators.

A mutable container read from the frame keeps its `source`; mutations on it are recorded
in `SideEffects` and replayed after the graph runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guards.sources import Source
from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder


class ListValue(Value):
    """A Python list."""

    __slots__ = ("items", "mutated")

    def __init__(self, items: list[Value], source: Source | None = None) -> None:
        super().__init__(source)
        self.items = items
        self.mutated = False

    def python_type(self) -> type:
        return list

    def unpack(self) -> list[Value]:
        return list(self.items)

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        for item in self.items:
            cg.reconstruct(item)
        cg.build_list(len(self.items))

    def describe(self) -> str:
        return f"list[{len(self.items)}]"


class TupleValue(Value):
    """A tuple, or a namedtuple / torch.Size when `cls` says so."""

    __slots__ = ("items", "cls")

    def __init__(self, items: list[Value], source: Source | None = None, cls: type = tuple):
        super().__init__(source)
        self.items = items
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def unpack(self) -> list[Value]:
        return list(self.items)

    def is_constant(self) -> bool:
        return all(item.is_constant() for item in self.items)

    def as_constant(self) -> object:
        values = [item.as_constant() for item in self.items]
        if self.cls is tuple:
            return tuple(values)
        if hasattr(self.cls, "_fields"):
            return self.cls(*values)
        return self.cls(values)

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        if self.cls is tuple:
            for item in self.items:
                cg.reconstruct(item)
            cg.build_tuple(len(self.items))
        elif hasattr(self.cls, "_fields"):
            cg.load_callable(self.cls)
            for item in self.items:
                cg.reconstruct(item)
            cg.call_function(len(self.items))
        else:
            cg.load_callable(self.cls)
            for item in self.items:
                cg.reconstruct(item)
            cg.build_tuple(len(self.items))
            cg.call_function(1)

    def describe(self) -> str:
        return f"{self.cls.__name__}[{len(self.items)}]"


class DictValue(Value):
    """A dict (or OrderedDict / defaultdict via `cls`) with constant keys.

    `items` maps the real key object to a pair (key value, item value).
    """

    __slots__ = ("items", "cls", "mutated", "default_factory")

    def __init__(
        self,
        items: dict[object, tuple[Value, Value]],
        source: Source | None = None,
        cls: type = dict,
    ) -> None:
        super().__init__(source)
        self.items = items
        self.cls = cls
        self.mutated = False
        self.default_factory: Value | None = None

    def python_type(self) -> type:
        return self.cls

    def unpack(self) -> list[Value]:
        return [key for key, _ in self.items.values()]

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        if self.cls is not dict:
            cg.load_callable(self.cls)
        for key, value in self.items.values():
            cg.reconstruct(key)
            cg.reconstruct(value)
        cg.build_map(len(self.items))
        if self.cls is not dict:
            cg.call_function(1)

    def describe(self) -> str:
        return f"{self.cls.__name__}[{len(self.items)}]"


class SetValue(Value):
    """A set of hashable constants (stored as key -> key value)."""

    __slots__ = ("items", "mutated")

    def __init__(self, items: dict[object, Value], source: Source | None = None) -> None:
        super().__init__(source)
        self.items = items
        self.mutated = False

    def python_type(self) -> type:
        return set

    def unpack(self) -> list[Value]:
        return list(self.items.values())

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        for item in self.items.values():
            cg.reconstruct(item)
        cg.build_set(len(self.items))

    def describe(self) -> str:
        return f"set[{len(self.items)}]"


class IteratorValue(Value):
    """An iterator over a known list of values (zip, enumerate, range, iter(list), ...)."""

    __slots__ = ("items", "index")

    def __init__(self, items: list[Value]) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0

    def python_type(self) -> type:
        return type(iter([]))

    def next_item(self) -> Value | None:
        """The next item, or None when exhausted."""
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self) -> list[Value]:
        rest = self.items[self.index :]
        self.index = len(self.items)
        return list(rest)

    def describe(self) -> str:
        return f"iterator[{self.index}/{len(self.items)}]"
