"""Snapshot regions: the parts of a guard tree checked by dict versions instead of polling.

A guard on a module reads, on every call, the same few hundred attributes, hook tables and
`__dict__` entries of objects pinned by identity (`L['self'] is <module>`). A *region* is a
subtree rooted at such a pinned object whose every read is a plain one (an attribute held in
an instance `__dict__`, or a plain class attribute the instance dict lacks, the `__dict__`
itself, an item of a dict, a module's parameter, buffer or child) and whose every check
depends only on the identity of what it reads, on immutable constants, on dict contents, on
types, or on tensor metadata. A subtree below the root that is not so is a *hole*: the fast
path reads down to it and checks it in Python. The native
`Snapshot` (guards/native/snapshot.cpp) records the versions of the dicts such a region
reads; while none changed, and no recorded type or tensor changed, the region's checks
still hold. The generated guard then checks, per call, the region root's identity in Python
and the whole snapshot in one native call; anything else falls back to the full guard (see
`SnapshotSet.refresh`), which re-arms the snapshot.

In: a GuardTree and the loaded native module. Out: `plan_regions(...)`, the region roots
with the `Snapshot` constructor's arguments. Trees without a large enough region, Python
versions without dict versions (3.14), and GUARDS_SNAPSHOTS=0 get none.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from guards.checks import (
    AliasCheck,
    Check,
    DictKeysMatch,
    EqualsMatch,
    IdentityBind,
    IdMatch,
    KeyAbsent,
    LengthMatch,
    NotNone,
    TensorMatch,
    TypeMatch,
)
from guards.native.plan import tensor_spec
from guards.sources import (
    AttrSource,
    BufferSource,
    ConstSource,
    ItemSource,
    ParamSource,
    SubmoduleSource,
)
from guards.tree import GuardNode, GuardTree

# The step kinds and value needs of snapshot.cpp.
ATTR, INSTANCE_DICT, ITEM, CLASS_ATTR = 0, 1, 2, 3
OBJECT, TYPE, DICT, EXACT_DICT, TENSOR, LENGTH = 1, 2, 4, 8, 16, 32

#: A region smaller than this many accessor nodes is left to the generated Python.
MIN_REGION_NODES = 8

_DICT_TYPES = (dict, collections.OrderedDict)
_CONTAINERS: dict[type, str] = {
    ParamSource: "_parameters", BufferSource: "_buffers", SubmoduleSource: "_modules",
}


class _NotCoverable(Exception):
    """A node or check a snapshot cannot stand for."""


def _child_key(source: Any) -> str:
    if isinstance(source, ParamSource):
        return source.param
    if isinstance(source, BufferSource):
        return source.buffer
    child: str = source.child
    return child


def _instance_namespace(obj: object) -> dict[str, object] | None:
    """The instance dict `obj.<name>` reads, when its class looks attributes up the generic
    way and the instance dict is a plain dict; else None."""
    if _class_lookup(type(obj), "__getattribute__") is not object.__dict__["__getattribute__"]:
        return None
    try:
        namespace = vars(obj)
    except TypeError:
        return None
    return namespace if type(namespace) is dict else None


def _plain_instance_attribute(obj: object, name: str) -> bool:
    """Whether `obj.<name>` reads `vars(obj)[name]`: the class looks attributes up the
    generic way, has no data descriptor of that name, and the instance dict holds it."""
    namespace = _instance_namespace(obj)
    if namespace is None or name not in namespace:
        return False
    found = _class_lookup(type(obj), name)
    return found is None or not (hasattr(type(found), "__set__")
                                 or hasattr(type(found), "__delete__"))


def _plain_class_attribute(obj: object, name: str) -> tuple[object] | None:
    """`(value,)` when `obj.<name>` is a plain class attribute: the lookup is the generic
    one, the instance dict (a dict) lacks the name, and a class along the MRO holds a value
    that is no descriptor (read as it is, not bound); else None."""
    namespace = _instance_namespace(obj)
    if namespace is None or name in namespace:
        return None
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            found = klass.__dict__[name]
            return None if hasattr(type(found), "__get__") else (found,)
    return None


def _class_lookup(cls: type, name: str) -> object:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


@dataclass
class Region:
    """One region: its root node and object, the program arming it, its identity slots."""

    node: GuardNode
    root: object
    needs: list[int] = field(default_factory=list)
    tensors_of: dict[int, int] = field(default_factory=dict)
    steps: list[tuple[int, int, object]] = field(default_factory=list)
    slots: set[str] = field(default_factory=set)
    aliasing: list[AliasCheck] = field(default_factory=list)
    nodes: int = 0
    #: subtrees the snapshot cannot stand for, each as its path of nodes from the root: the
    #: fast path reads down the path and checks the last node's subtree in Python
    holes: list[list[GuardNode]] = field(default_factory=list)

    def spec(self) -> tuple[object, int, int, tuple[tuple[int, int, object, int, int], ...]]:
        """The Snapshot constructor's region tuple."""
        steps = tuple((parent, kind, key, self.needs[i + 1], self.tensors_of.get(i + 1, -1))
                      for i, (parent, kind, key) in enumerate(self.steps))
        return (self.root, self.needs[0], self.tensors_of.get(0, -1), steps)


class _Planner:
    """Builds the program of one region, peeking at the objects as they are now to decide
    what each read is (arming checks all of it again)."""

    def __init__(self, region: Region, tensors: list[tuple[Any, ...]]) -> None:
        self.region = region
        self.tensors = tensors
        self.intermediate: dict[tuple[int, str], tuple[int, object]] = {}
        self.journal: list[tuple[int, int]] = []  # NOTE: (value index, its needs before)

    def add_value(self, parent: int, kind: int, key: object) -> int:
        self.region.steps.append((parent, kind, key))
        self.region.needs.append(0)
        return len(self.region.needs) - 1

    def visit(self, node: GuardNode, index: int, value: object,
              path: list[GuardNode]) -> None:
        """Plan `node` (at `path`, root first) and its subtree; a child subtree that cannot
        be covered becomes a hole, unless `node` is the root (the region then fails)."""
        self.region.nodes += 1
        for check in node.checks:
            self.check(check, index, value)
        for child in node.children:
            mark = self._mark()
            try:
                child_index, child_value = self.read(child.source, index, value)
                self.visit(child, child_index, child_value, [*path, child])
            except _NotCoverable:
                self._rollback(mark)  # NOTE: the holes found inside it go too
                self.region.holes.append([*path, child])

    def _mark(self) -> tuple[int, int, int, int, int, frozenset[str], int, int]:
        r = self.region
        return (len(r.steps), len(self.tensors), len(self.journal), len(self.intermediate),
                r.nodes, frozenset(r.slots), len(r.aliasing), len(r.holes))

    def _rollback(self, mark: tuple[int, int, int, int, int, frozenset[str], int, int]) -> None:
        """Forget what a failed subtree added to the program (a hole is not armed)."""
        steps, tensors, journal, intermediate, nodes, slots, aliasing, holes = mark
        r = self.region
        del r.holes[holes:]
        while len(self.journal) > journal:
            index, before = self.journal.pop()
            if index < len(r.needs):
                r.needs[index] = before
        del r.steps[steps:], r.needs[steps + 1:], self.tensors[tensors:], r.aliasing[aliasing:]
        r.tensors_of = {k: v for k, v in r.tensors_of.items() if k <= steps}
        for key in list(self.intermediate)[intermediate:]:
            del self.intermediate[key]
        r.nodes, r.slots = nodes, set(slots)

    def need(self, index: int, flags: int) -> None:
        self.journal.append((index, self.region.needs[index]))
        self.region.needs[index] |= flags

    def check(self, check: Check, index: int, value: object) -> None:
        kind = type(check)
        if kind in (IdMatch, EqualsMatch, NotNone):
            return  # NOTE: fixed by the identity of the value (constants are immutable)
        if kind is TypeMatch:
            self.need(index, TYPE)
        elif kind is LengthMatch:
            if type(value) not in (*_DICT_TYPES, tuple, str):
                raise _NotCoverable("a length of a mutable non-dict")
            self.need(index, LENGTH)
        elif kind is KeyAbsent:
            key = check.key  # type: ignore[attr-defined]
            if type(value) not in _DICT_TYPES or type(key) not in (str, int):
                raise _NotCoverable("a membership test outside a dict")
            self.need(index, DICT)
        elif kind is DictKeysMatch:
            if type(value) is not dict:
                raise _NotCoverable("key order of a non-dict")
            self.need(index, EXACT_DICT)
        elif kind is TensorMatch:
            spec = tensor_spec(check)  # type: ignore[arg-type]
            if spec is None:
                raise _NotCoverable("a tensor class checked in Python")
            self.region.tensors_of[index] = len(self.tensors)
            self.tensors.append(spec)
            self.need(index, TENSOR)
        elif kind is IdentityBind:
            self.region.slots.add(check.slot)  # type: ignore[attr-defined]
        elif kind is AliasCheck:
            self.region.aliasing.append(check)  # type: ignore[arg-type]
        else:
            raise _NotCoverable(kind.__name__)

    def read(self, source: object, index: int, value: object) -> tuple[int, object]:
        """The program index and current value of `source` read from value `index`."""
        if type(source) in _CONTAINERS:
            container = _CONTAINERS[type(source)]
            key = _child_key(source)
            found = self.intermediate.get((index, container))
            if found is None:
                found = self.intermediate[(index, container)] = self.attribute(
                    index, value, container)
            return self.item(found[0], found[1], key)
        if type(source) is AttrSource:
            name = source.attr
            if name == "__dict__":
                if not isinstance(_class_lookup(type(value), "__dict__"),
                                  type(_class_lookup(_Probe, "__dict__"))) or \
                        _instance_namespace(value) is None:
                    raise _NotCoverable("a __dict__ that is not the instance dict")
                self.need(index, OBJECT)
                return self.add_value(index, INSTANCE_DICT, "__dict__"), vars(value)
            return self.attribute(index, value, name)
        if type(source) is ItemSource:
            return self.item(index, value, source.key)
        raise _NotCoverable(type(source).__name__)

    def attribute(self, index: int, value: object, name: str) -> tuple[int, object]:
        if _plain_instance_attribute(value, name):
            self.need(index, OBJECT)
            return self.add_value(index, ATTR, name), vars(value)[name]
        found = _plain_class_attribute(value, name)
        if found is None:
            raise _NotCoverable(f"attribute {name!r} not read from an instance or class dict")
        # NOTE: the object's record (type, version tag, instance dict version) fixes this
        # read: the instance dict still lacks the name, the class and its bases are unchanged
        self.need(index, OBJECT)
        return self.add_value(index, CLASS_ATTR, name), found[0]

    def item(self, index: int, value: object, key: object) -> tuple[int, object]:
        if type(value) not in _DICT_TYPES or type(key) not in (str, int):
            raise _NotCoverable("an item of a non-dict")
        if key not in value:  # type: ignore[operator]
            raise _NotCoverable("a missing item")
        self.need(index, DICT)
        return self.add_value(index, ITEM, key), value[key]  # type: ignore[index]


class _Probe:
    """A plain class: its `__dict__` descriptor is the kind every plain class has."""


def _region_at(node: GuardNode, tensors: list[tuple[Any, ...]]) -> Region | None:
    pins = [c for c in node.checks if type(c) is IdMatch and c.holds_object()]
    if not pins or isinstance(node.source, ConstSource):
        return None
    root = pins[0].obj
    region = Region(node, root, needs=[0])
    mark = len(tensors)
    try:
        _Planner(region, tensors).visit(node, 0, root, [node])
    except _NotCoverable:
        del tensors[mark:]
        return None
    return region


def plan_regions(tree: GuardTree, native: Any) -> tuple[list[Region], list[tuple[Any, ...]]]:
    """The regions of `tree` (outermost first) and the tensor specs they index, or ([], [])
    when the native module has no snapshots."""
    from guards import config

    if native is None or not getattr(native, "SNAPSHOTS", 0) or not config.options.snapshots:
        return [], []
    tensors: list[tuple[Any, ...]] = []
    regions: list[Region] = []

    def walk(node: GuardNode) -> None:
        region = _region_at(node, tensors)
        if region is not None and region.nodes >= MIN_REGION_NODES:
            regions.append(region)
            return
        for child in node.children:
            walk(child)

    for node in tree.children:
        walk(node)
    return _drop_split_aliasing(tree, regions), tensors


def _drop_split_aliasing(tree: GuardTree, regions: list[Region]) -> list[Region]:
    """Regions whose identity slots take part in an aliasing check only with slots of
    regions: the fast path neither binds them nor runs such a check."""
    inside: dict[int, AliasCheck] = {}

    def collect(node: GuardNode) -> None:
        for check in node.checks:
            if type(check) is AliasCheck:
                inside[id(check)] = check
        for child in node.children:
            collect(child)

    for node in tree.children:
        collect(node)
    kept = list(regions)
    while True:
        slots = {slot for region in kept for slot in region.slots}
        located = {id(check) for region in kept for check in region.aliasing}
        # NOTE: an aliasing check is skipped with its region, so it must lie in one and read
        # only slots of regions; a region slot read by a check outside regions is unbound.
        bad = [check for key, check in inside.items()
               if (key in located or check.slots() & slots)
               and not (key in located and check.slots() <= slots)]
        if not bad:
            return kept
        touched = set().union(*(check.slots() for check in bad))
        bad_ids = {id(check) for check in bad}
        kept = [region for region in kept
                if not (region.slots & touched)
                and not any(id(check) in bad_ids for check in region.aliasing)]


class SnapshotSet:
    """The slow path of a guard with snapshots: arm, run the full guard, commit if it passed.

    `live` turns False when arming fails although the full guard passes (a region that
    cannot be snapshotted as the objects now are): from then on the full guard alone runs.
    """

    def __init__(self, snapshot: Any, full: Callable[[dict[str, object], dict[str, object]],
                                                     bool]) -> None:
        self.snapshot = snapshot
        self.full = full
        self.live = True

    def refresh(self, L: dict[str, object], G: dict[str, object]) -> bool:
        """The full guard's answer; on a pass the snapshot holds the state it passed on."""
        if not self.live:
            return self.full(L, G)
        token = self.snapshot.arm()
        ok = self.full(L, G)
        if not ok:
            self.snapshot.disarm()
        elif token:
            self.snapshot.commit(token)
        else:
            self.live = False
        return ok
