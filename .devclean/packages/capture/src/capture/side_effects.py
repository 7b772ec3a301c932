"""Mutations of Python state that existed before the call, recorded for replay.

In: list/dict/set mutations, attribute writes and global writes made while tracing. Out:
an ordered record that `bytecode.codegen` turns into replay bytecode after the graph call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guards.sources import AttrSource

from capture.graph_break import GraphBreakKind, unsupported
from capture.values import ConstantValue

if TYPE_CHECKING:
    from capture.values import Value

#: The value a recorded `del obj.name` leaves in the attribute writes (`store_attr`): the
#: replay deletes the attribute, and a later read in the trace finds it missing.
DELETED = ConstantValue(object())


class SideEffects:
    """Ordered record of the mutations to replay."""

    def __init__(self) -> None:
        # Mutated containers that have a source (new containers need no replay).
        self.containers: dict[int, Value] = {}
        # Attribute writes on existing objects: id(owner value) -> (owner, {name: value}).
        self.attr_writes: dict[int, tuple[Value, dict[str, Value]]] = {}
        # Global writes: (id(globals dict), name) -> (globals dict, name, value).
        self.global_writes: dict[tuple[int, str], tuple[dict[str, object], str, Value]] = {}
        # Writes to existing closure cells: id(cell value) -> (cell value, new contents).
        self.cell_writes: dict[int, tuple[Value, Value]] = {}
        # Closure cells of functions inlined so far: id(real cell) -> (real cell, its value),
        # so that every function closing over one cell (or one function inlined twice) sees
        # the writes made earlier in the trace.
        self.real_cells: dict[int, tuple[object, Value]] = {}

    def mutate_container(self, container: Value) -> None:
        """Note that `container` (list, dict, set) changed.

        A container made inside the call needs no replay; one that existed before must be
        reachable from the frame (a source) to be replayed. One reached some other way (no
        source: nothing guards that the same object is reached next call) is unsupported:
        the frame runs eagerly rather than drop or misdirect the mutation."""
        source = container.source
        if isinstance(source, AttrSource) and source.attr == "__dict__":
            # NOTE: `obj.__dict__.update(...)` on an existing object: its attribute reads
            # later in the trace would see the old values (they read the object, not this
            # dict); the write runs eagerly.
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                f"changing the __dict__ of an existing object ({source.name()})",
            )
        if source is not None:
            self.containers[id(container)] = container
        elif getattr(container, "real", None) is not None:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                f"mutating the existing {container.describe()}, which is not reachable from "
                "the function's arguments or globals",
            )

    @staticmethod
    def key(owner: Value) -> int:
        """Identity of the real object behind `owner` (values may be rebuilt per read)."""
        for attr in ("obj", "module", "value"):
            real = getattr(owner, attr, None)
            if real is not None:
                return id(real)
        return id(owner)

    def store_attr(self, owner: Value, name: str, value: Value) -> None:
        """Record `owner.name = value` for an existing object."""
        entry = self.attr_writes.setdefault(self.key(owner), (owner, {}))
        entry[1][name] = value

    def pending_attr(self, owner: Value, name: str) -> Value | None:
        """The value written to `owner.name` earlier in this trace, if any."""
        entry = self.attr_writes.get(self.key(owner))
        if entry is None:
            return None
        return entry[1].get(name)

    def pending_class_attr(self, cls: type, name: str) -> Value | None:
        """The value written earlier in this trace to `name` on `cls` or the base class that a
        lookup through `cls` (or one of its instances) finds first, if any."""
        for klass in cls.__mro__:
            entry = self.attr_writes.get(id(klass))
            if entry is not None and name in entry[1]:
                if entry[1][name] is DELETED:
                    continue  # `del K.x` here: the lookup goes on to the bases
                return entry[1][name]
            if name in vars(klass):
                return None
        return None

    def store_global(self, f_globals: dict[str, object], name: str, value: Value) -> None:
        """Record `global name; name = value`."""
        self.global_writes[(id(f_globals), name)] = (f_globals, name, value)

    def pending_global(self, f_globals: dict[str, object], name: str) -> Value | None:
        entry = self.global_writes.get((id(f_globals), name))
        return None if entry is None else entry[2]

    def store_cell(self, cell: Value, value: Value) -> None:
        """Record a write to a closure cell that exists outside the trace."""
        self.cell_writes[id(cell)] = (cell, value)

    def cell_value(self, cell: object) -> Value | None:
        """The value tracking the real closure cell `cell`, if a function using it was
        inlined before in this trace."""
        known = self.real_cells.get(id(cell))
        return None if known is None else known[1]

    def remember_cell(self, cell: object, value: Value) -> None:
        """Track the real closure cell `cell` as `value` for the rest of the trace."""
        self.real_cells[id(cell)] = (cell, value)

    def is_empty(self) -> bool:
        return not (self.containers or self.attr_writes or self.global_writes or self.cell_writes)
