"""Python containers whose items are values: list, tuple (incl. namedtuple), dict, set,
and materialized iterators.

A mutable container read from the frame keeps its `source`; mutations on it are recorded
in `SideEffects` and replayed after the graph runs.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING

from guards.sources import Source

from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder


class ListValue(Value):
    """A Python list.

    A list read from the frame (`source` set) may be lazy: its items are loaded, guarding its
    length and items, only when the program reads them. Until then appends go to `appended`
    and the list's length stays unguarded, so a log list appended on every call does not
    recompile on every call; the replay then extends the real list.
    """

    __slots__ = ("_items", "appended", "loader", "real")

    def __init__(self, items: list[Value], source: Source | None = None) -> None:
        super().__init__(source)
        self._items: list[Value] | None = items
        self.appended: list[Value] = []
        self.loader: Callable[[], list[Value]] | None = None
        # The list that existed before the call, for a value read from the frame.
        self.real: list[object] | None = None

    @classmethod
    def lazy(cls, real: list[object], source: Source, loader: Callable[[], list[Value]]) -> ListValue:
        """A value for the existing list `real` whose items `loader` loads (and guards)."""
        value = cls([], source)
        value._items = None
        value.loader = loader
        value.real = real
        return value

    @property
    def items(self) -> list[Value]:
        """All items (loads, and guards, a lazy list's items on first use)."""
        if self._items is None:
            assert self.loader is not None
            loaded = self.loader()
            self.loader = None
            self._items = loaded + self.appended
            self.appended = []
        return self._items

    @items.setter
    def items(self, items: list[Value]) -> None:
        self._items = items
        self.loader = None
        self.appended = []

    @property
    def is_loaded(self) -> bool:
        """False while only appends happened to an existing list (its items never read)."""
        return self._items is not None

    def append(self, item: Value) -> None:
        """`list.append` without reading the items."""
        if self._items is None:
            self.appended.append(item)
        else:
            self._items.append(item)

    def extend(self, items: list[Value]) -> None:
        """`list.extend` without reading the items."""
        if self._items is None:
            self.appended.extend(items)
        else:
            self._items.extend(items)

    def appended_item(self, index: int) -> Value | None:
        """`lst[index]` for a negative index into the items appended here, without loading."""
        if self._items is None and -len(self.appended) <= index < 0:
            return self.appended[index]
        return None

    def python_type(self) -> type:
        return list

    def unpack(self) -> list[Value]:
        return list(self.items)

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        if cg.load_rebuilt(self):
            return
        for item in self.items:
            cg.reconstruct(item)
        cg.build_list(len(self.items))
        cg.remember_rebuilt(self)

    def describe(self) -> str:
        if self._items is None:
            return f"list[?+{len(self.appended)}]"
        return f"list[{len(self.items)}]"


class TupleValue(Value):
    """A tuple, or a namedtuple / torch.Size when `cls` says so."""

    __slots__ = ("cls", "items")

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


def _put(items: dict[object, tuple[Value, Value]], key: object, pair: tuple[Value, Value]) -> None:
    old = items.get(key)
    items[key] = pair if old is None else (old[0], pair[1])


class DictValue(Value):
    """A dict (or OrderedDict / defaultdict via `cls`) with constant keys.

    `items` maps the real key object to a pair (key value, item value). A dict read from the
    frame may be lazy, like `ListValue`: until the program reads its keys, `d[k] = v` goes to
    `stored` and the keys stay unguarded (a cache dict filled with a new key each call does
    not recompile on every call); the replay then sets those keys on the real dict.
    """

    __slots__ = ("_items", "cls", "default_factory", "loader", "mutated", "real", "stored")

    def __init__(
        self,
        items: dict[object, tuple[Value, Value]],
        source: Source | None = None,
        cls: type = dict,
    ) -> None:
        super().__init__(source)
        self._items: dict[object, tuple[Value, Value]] | None = items
        self.cls = cls
        self.mutated = False
        self.default_factory: Value | None = None
        # The dict that existed before the call, for a value read from the frame.
        self.real: dict[object, object] | None = None
        self.stored: dict[object, tuple[Value, Value]] = {}
        self.loader: Callable[[], dict[object, tuple[Value, Value]]] | None = None

    @classmethod
    def lazy(cls, real: dict[object, object], source: Source, kind: type,
             loader: Callable[[], dict[object, tuple[Value, Value]]]) -> DictValue:
        """A value for the existing dict `real` whose items `loader` loads (and guards)."""
        value = cls({}, source, kind)
        value._items = None
        value.loader = loader
        value.real = real
        return value

    @property
    def items(self) -> dict[object, tuple[Value, Value]]:
        """All items (loads, and guards, a lazy dict's keys on first use)."""
        if self._items is None:
            assert self.loader is not None
            loaded = self.loader()
            self.loader = None
            for key, pair in self.stored.items():
                _put(loaded, key, pair)
            self._items = loaded
            self.stored = {}
        return self._items

    @items.setter
    def items(self, items: dict[object, tuple[Value, Value]]) -> None:
        self._items = items
        self.loader = None
        self.stored = {}

    @property
    def is_loaded(self) -> bool:
        """False while only `d[k] = v` happened to an existing dict (its keys never read)."""
        return self._items is not None

    def set_item(self, key: object, pair: tuple[Value, Value]) -> None:
        """`d[key] = value` without reading the keys. Like Python, a key already there keeps
        its own key object (`d[True] = v` on a dict with key `1` keeps `1`)."""
        target = self.stored if self._items is None else self._items
        _put(target, key, pair)

    def update_items(self, items: dict[object, tuple[Value, Value]]) -> None:
        """`d.update(other)` for the items of another dict value."""
        for key, pair in items.items():
            _put(self.items, key, pair)

    def stored_item(self, key: object) -> Value | None:
        """`d[key]` for a key set here, without loading."""
        try:
            pair = self.stored.get(key) if self._items is None else None
        except TypeError:  # unhashable: `d[k]` raises; the loaded path reports it
            return None
        return None if pair is None else pair[1]

    def view_items(self, kind: str) -> list[Value]:
        """The items of `self.keys()`, `.values()` or `.items()` now."""
        if kind == "keys":
            return [key for key, _ in self.items.values()]
        if kind == "values":
            return [value for _, value in self.items.values()]
        return [TupleValue([key, value]) for key, value in self.items.values()]

    def python_type(self) -> type:
        return self.cls

    def unpack(self) -> list[Value]:
        return [key for key, _ in self.items.values()]

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        if cg.load_rebuilt(self):
            return
        factory = issubclass(self.cls, collections.defaultdict)
        if self.cls is not dict:
            cg.load_callable(self.cls)
        if factory:
            # NOTE: `defaultdict(default_factory, items)`.
            if self.default_factory is None:
                cg.load_const(None)
            else:
                cg.reconstruct(self.default_factory)
        for key, value in self.items.values():
            cg.reconstruct(key)
            cg.reconstruct(value)
        cg.build_map(len(self.items))
        if self.cls is not dict:
            cg.call_function(2 if factory else 1)
        cg.remember_rebuilt(self)

    def describe(self) -> str:
        if self._items is None:
            return f"{self.cls.__name__}[?+{len(self.stored)}]"
        return f"{self.cls.__name__}[{len(self._items)}]"


class SetValue(Value):
    """A set of hashable constants (stored as key -> key value).

    Iteration follows a real set's order: a set made here keeps a shadow `set` of its keys,
    updated by the same operations in the same order as eager's, so it iterates as eager's
    does. A set that came from elsewhere iterates in its real order until mutated; after a
    mutation its order is unknown and iterating it is unsupported (the frame runs eagerly).
    """

    __slots__ = ("_items", "added", "loader", "mutated", "order", "order_known", "real")

    def __init__(self, items: dict[object, Value], source: Source | None = None) -> None:
        super().__init__(source)
        self._items: dict[object, Value] | None = items
        self.mutated = False
        # The set that existed before the call, for a value read from the frame.
        self.real: set[object] | None = None
        self.order: set[object] | None = None
        self.order_known = True
        # A set read from the frame may be lazy, like `ListValue`: `s.add(k)` before any read
        # goes to `added` and the contents stay unguarded (a set of seen keys grown on every
        # call does not recompile on every call); the replay adds them to the real set.
        self.added: list[tuple[object, Value]] = []
        self.loader: Callable[[], dict[object, Value]] | None = None

    @classmethod
    def lazy(cls, real: set[object], source: Source,
             loader: Callable[[], dict[object, Value]]) -> SetValue:
        """A value for the existing set `real` whose items `loader` loads (and guards)."""
        value = cls({}, source)
        value._items = None
        value.loader = loader
        value.real = real
        return value

    @property
    def items(self) -> dict[object, Value]:
        """All items (loads, and guards, a lazy set's contents on first use)."""
        if self._items is None:
            assert self.loader is not None
            loaded = self.loader()
            self.loader = None
            self._items = loaded
            for key, item in self.added:
                if key not in loaded:
                    loaded[key] = item
                    self.order_known = False  # added to a real table we cannot replay
            self.added = []
        return self._items

    @items.setter
    def items(self, items: dict[object, Value]) -> None:
        self._items = items
        self.loader = None
        self.added = []

    @property
    def is_loaded(self) -> bool:
        """False while only `s.add(k)` happened to an existing set (never read)."""
        return self._items is not None

    @classmethod
    def new(cls) -> SetValue:
        """An empty set made while tracing (its iteration order is tracked exactly)."""
        value = cls({})
        value.order = set()
        return value

    def add(self, key: object, item: Value) -> None:
        """`s.add(item)`."""
        if self._items is None:
            self.added.append((key, item))
            return
        if key not in self.items:
            self.items[key] = item
        if self.order is not None:
            self.order.add(key)
        else:
            self.order_known = False

    def update(self, pairs: list[tuple[object, Value]], other: Value | None = None) -> None:
        """`s.update(other)` with `pairs` its (key, item) pairs. Where `other` is a set, the
        shadow is updated from that set's own shadow (or real set), as CPython merges a set's
        table in its own order rather than adding the items one by one."""
        real: set[object] | frozenset[object] | None = None
        if isinstance(other, SetValue):
            real = other.order
        elif other is not None and other.is_constant():
            const = other.as_constant()
            if isinstance(const, (set, frozenset)):
                real = const
        if real is None or self.order is None:
            for key, item in pairs:
                self.add(key, item)
            return
        for key, item in pairs:
            self.items.setdefault(key, item)
        self.order.update(real)

    def discard(self, key: object) -> None:
        """`s.discard(item)`."""
        self.items.pop(key, None)
        if self.order is not None:
            self.order.discard(key)
        else:
            self.order_known = False

    def python_type(self) -> type:
        return set

    def unpack(self) -> list[Value]:
        if self.order is not None:
            return [self.items[key] for key in self.order]
        if not self.order_known and len(self.items) > 1:
            from capture.graph_break import GraphBreakKind, unsupported

            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                              "iterating a set changed while tracing (its order is unknown)")
        return list(self.items.values())

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        if cg.load_rebuilt(self):
            return
        for item in self.items.values():
            cg.reconstruct(item)
        cg.build_set(len(self.items))
        cg.remember_rebuilt(self)

    def describe(self) -> str:
        if self._items is None:
            return f"set[?+{len(self.added)}]"
        return f"set[{len(self._items)}]"


class IteratorValue(Value):
    """An iterator over a known list of values (zip, enumerate, range, iter(list), ...)."""

    __slots__ = ("container", "index", "items")

    def __init__(self, items: list[Value], container: Value | None = None) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0
        # NOTE: the live container iterated (a list, a deque), when a graph break must hand
        # a real iterator over it to the resume function (a list appended to after the
        # break is iterated to its new end; a deque changed raises, as in eager).
        self.container = container

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


class DictIteratorValue(IteratorValue):
    """Iteration over a dict or one of its views: like eager, a change of the dict's keys
    during the loop is an error (`RuntimeError: dictionary changed size during iteration`);
    the frame then runs eagerly, which raises it from the user's line."""

    __slots__ = ("dict_value", "keys", "kind")

    def __init__(self, dict_value: DictValue, kind: str = "keys") -> None:
        super().__init__(dict_value.view_items(kind))
        self.dict_value = dict_value
        self.keys = tuple(dict_value.items)
        self.kind = kind

    def next_item(self) -> Value | None:
        if tuple(self.dict_value.items) != self.keys:
            from capture.graph_break import GraphBreakKind, unsupported

            raise unsupported(
                GraphBreakKind.EXCEPTION,
                "RuntimeError: dictionary changed size during iteration (keys changed)",
            )
        # Values may change during the loop (`d[k] += 1`): read them now.
        self.items = self.dict_value.view_items(self.kind)
        return super().next_item()


class SetIteratorValue(IteratorValue):
    """Iteration over a set: like eager, a change of the set's size during the loop is an
    error (`RuntimeError: Set changed size during iteration`); the frame then runs eagerly,
    which raises it from the user's line."""

    __slots__ = ("set_value", "size")

    def __init__(self, set_value: SetValue, items: list[Value]) -> None:
        super().__init__(items)
        self.set_value = set_value
        self.size = len(set_value.items)

    def next_item(self) -> Value | None:
        if len(self.set_value.items) != self.size:
            from capture.graph_break import GraphBreakKind, unsupported

            raise unsupported(GraphBreakKind.EXCEPTION,
                              "RuntimeError: Set changed size during iteration")
        return super().next_item()


class DictViewValue(Value):
    """`d.keys()`, `d.values()`, `d.items()`: live views, read when used (a view taken before
    `d[k] = v` sees the new key)."""

    __slots__ = ("dict_value", "kind")

    def __init__(self, dict_value: DictValue, kind: str) -> None:
        super().__init__(None)
        self.dict_value = dict_value
        self.kind = kind

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def unpack(self) -> list[Value]:
        return self.dict_value.view_items(self.kind)

    def reconstruct(self, cg: CodeBuilder) -> None:
        cg.load_callable(getattr(dict, self.kind))
        cg.reconstruct(self.dict_value)
        cg.call_function(1)

    def describe(self) -> str:
        return f"dict_{self.kind}"


class LazyIteratorValue(IteratorValue):
    """`enumerate(...)` / `zip(...)` over iterators, advanced one item at a time, so the
    items of a list appended while iterated are seen as eager sees them."""

    __slots__ = ("count", "inners")

    def __init__(self, inners: list[IteratorValue], count: int | None = None) -> None:
        super().__init__([])
        self.inners = inners
        self.count = count  # enumerate's next number; None for zip

    def next_item(self) -> Value | None:
        from capture.values.constant import ConstantValue

        if not self.inners:
            return None
        parts: list[Value] = []
        for inner in self.inners:
            item = inner.next_item()
            if item is None:
                return None
            parts.append(item)
        if self.count is not None:
            parts.insert(0, ConstantValue(self.count))
            self.count += 1
        return TupleValue(parts)

    def unpack(self) -> list[Value]:
        rest: list[Value] = []
        while (item := self.next_item()) is not None:
            rest.append(item)
        return rest

    def describe(self) -> str:
        return "enumerate iterator" if self.count is not None else "zip iterator"
