"""The guard tree: accessor nodes shared by source prefix, with leaf checks on each node.

In: (Source, Check) pairs, symbol bindings and relations, added through `GuardBuilder`.
Out: a frozen `GuardTree` whose evaluation order (root checks, then per node: its checks,
then its children, depth first in insertion order) is the same for the interpreter and
the generated code. Relations are placed right after the binding of their last symbol, and
aliasing checks right after the binding of their last object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from guards.checks import (
    AliasCheck,
    BackendMatch,
    Check,
    GlobalStateMatch,
    IdentityBind,
    RelationCheck,
    SymbolBind,
)
from guards.exprs import Relation
from guards.sources import Source


@dataclass(frozen=True, slots=True)
class GuardNode:
    """One accessor (a source) with its checks and the accessors that read from it."""

    source: Source
    checks: tuple[Check, ...]
    children: tuple[GuardNode, ...]

    def count_nodes(self) -> int:
        """How many accessor nodes this subtree holds (itself included)."""
        return 1 + sum(child.count_nodes() for child in self.children)


@dataclass(frozen=True, slots=True)
class GuardTree:
    """A built guard tree: root checks (global state, backend, constant relations) and the
    accessor nodes rooted at locals and globals.

    Print it with `render()`; compile it with `compile_guard`, walk it with `interpret`.
    """

    root_checks: tuple[Check, ...]
    children: tuple[GuardNode, ...]
    symbols: tuple[tuple[str, Source], ...]

    def render(self) -> str:
        """The tree as indented text, one check per line, in evaluation order."""
        lines: list[str] = []
        for check in self.root_checks:
            lines.append(check.describe(""))

        def visit(node: GuardNode, depth: int) -> None:
            pad = "  " * depth
            lines.append(f"{pad}{node.source.name()}")
            for check in node.checks:
                lines.append(f"{pad}  | {check.describe(node.source.name())}")
            for child in node.children:
                visit(child, depth + 1)

        for node in self.children:
            visit(node, 0)
        return "\n".join(lines)

    def count_nodes(self) -> int:
        """How many distinct accessors the tree fetches."""
        return sum(node.count_nodes() for node in self.children)

    def count_checks(self) -> int:
        """How many leaf checks the tree holds (root checks included)."""

        def count(node: GuardNode) -> int:
            return len(node.checks) + sum(count(child) for child in node.children)

        return len(self.root_checks) + sum(count(node) for node in self.children)


class _Building:
    """A mutable node while building."""

    __slots__ = ("checks", "children", "source")

    def __init__(self, source: Source) -> None:
        self.source = source
        self.checks: dict[Check, None] = {}
        self.children: dict[Source, _Building] = {}


class GuardBuilder:
    """Collects guards and builds a `GuardTree`.

    Example::

        b = GuardBuilder()
        x = LocalSource("x")
        b.add(x, TensorMatch.from_tensor(t, dynamic_dims={0}))
        b.bind_symbol("s0", SizeSource(x, 0))
        b.add_relation(parse_relation("2 <= s0 <= 1024"))
        b.add_global(GlobalStateMatch.current())
        tree = b.build()

    Adding the same (source, check) twice keeps one. Checks on a node run in the order they
    were first added; nodes run in the order their sources were first seen.
    """

    def __init__(self) -> None:
        self._root_checks: dict[Check, None] = {}
        self._roots: dict[Source, _Building] = {}
        self._symbols: dict[str, Source] = {}
        self._relations: dict[Relation, None] = {}
        self._slots: dict[Source, str] = {}
        self._aliasing: dict[AliasCheck, None] = {}

    def _node(self, source: Source) -> _Building:
        level = self._roots
        node: _Building | None = None
        for link in source.chain():
            node = level.get(link)
            if node is None:
                node = _Building(link)
                level[link] = node
            level = node.children
        assert node is not None
        return node

    def add(self, source: Source, check: Check) -> GuardBuilder:
        """Require `check` of the value at `source`. Returns self, for chaining."""
        if isinstance(check, (GlobalStateMatch, BackendMatch)):
            raise TypeError(f"{type(check).__name__} hangs off the root: use add_global")
        if isinstance(check, (SymbolBind, RelationCheck)):
            raise TypeError("use bind_symbol / add_relation for symbols and relations")
        if isinstance(check, (IdentityBind, AliasCheck)):
            raise TypeError("use add_aliasing for identity relations")
        self._node(source).checks[check] = None
        return self

    def add_global(self, check: Check) -> GuardBuilder:
        """Require a root check: GlobalStateMatch or BackendMatch (run before any access)."""
        self._root_checks[check] = None
        return self

    def touch(self, source: Source) -> GuardBuilder:
        """Make sure `source` is fetched (its reading must not raise) without a check."""
        self._node(source)
        return self

    def bind_symbol(self, symbol: str, source: Source) -> GuardBuilder:
        """Bind size symbol `symbol` to the int at `source` (once per symbol)."""
        previous = self._symbols.get(symbol)
        if previous is not None and previous != source:
            raise ValueError(f"symbol {symbol} is already bound to {previous.name()}; "
                             f"express {source.name()} == {symbol} as a relation")
        self._symbols[symbol] = source
        self._node(source).checks[SymbolBind(symbol)] = None
        return self

    def add_relation(self, relation: Relation) -> GuardBuilder:
        """Require `relation` over bound symbols; checked as soon as its symbols are bound."""
        self._relations[relation] = None
        return self

    def add_aliasing(self, groups: Sequence[Sequence[Source]]) -> GuardBuilder:
        """Require that the sources in each group hold one same object, and that the
        objects of different groups are pairwise distinct (`L['a'] is L['b']`,
        `L['a'] is not L['c']`). Groups of one source only take part in distinctness."""
        slot_groups: list[tuple[str, ...]] = []
        labels: list[tuple[str, ...]] = []
        for group in groups:
            if not group:
                continue
            slots = []
            for source in group:
                slot = self._slots.get(source)
                if slot is None:
                    slot = f"o{len(self._slots)}"
                    self._slots[source] = slot
                    self._node(source).checks[IdentityBind(slot)] = None
                slots.append(slot)
            slot_groups.append(tuple(slots))
            labels.append(tuple(source.name() for source in group))
        if sum(len(group) for group in slot_groups) > 1:
            self._aliasing[AliasCheck(tuple(slot_groups), tuple(labels))] = None
        return self

    def build(self) -> GuardTree:
        """The frozen tree. Raises ValueError if a relation mentions an unbound symbol."""
        unbound = {s for r in self._relations for s in r.symbols()} - set(self._symbols)
        if unbound:
            raise ValueError(f"relations mention unbound symbols: {sorted(unbound)}")
        pending = list(self._relations)
        bound: set[str] = set()
        root_checks = list(self._root_checks)
        root_checks.extend(RelationCheck(r) for r in pending if not r.symbols())
        pending = [r for r in pending if r.symbols()]

        aliasing = list(self._aliasing)
        bound_slots: set[str] = set()

        def freeze(node: _Building) -> GuardNode:
            nonlocal pending, aliasing
            checks: list[Check] = []
            for check in node.checks:
                checks.append(check)
                if isinstance(check, SymbolBind):
                    bound.add(check.symbol)
                    ready = [r for r in pending if r.symbols() <= bound]
                    checks.extend(RelationCheck(r) for r in ready)
                    pending = [r for r in pending if r not in ready]
                elif isinstance(check, IdentityBind):
                    bound_slots.add(check.slot)
                    done = [a for a in aliasing if a.slots() <= bound_slots]
                    checks.extend(done)
                    aliasing = [a for a in aliasing if a not in done]
            children = tuple(freeze(child) for child in node.children.values())
            return GuardNode(node.source, tuple(checks), children)

        children = tuple(freeze(node) for node in self._roots.values())
        assert not pending, pending
        assert not aliasing, aliasing
        return GuardTree(tuple(root_checks), children, tuple(self._symbols.items()))
