"""Snapshots (guards/snapshot.py, native/snapshot.cpp): the state of pinned objects checked by
dict versions. Every test compares the compiled guard with the interpreter (`interpret`,
which reads everything anew) after a change, on two calls in a row: the first after a
change runs the full guard and re-arms, the second runs the snapshot."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import guards.snapshot as snapshot_mod
import pytest
import torch
from guards import (
    AttrSource,
    BufferSource,
    CompiledGuard,
    DictKeysMatch,
    EqualsMatch,
    GlobalStateMatch,
    GuardBuilder,
    GuardTree,
    IdMatch,
    ItemSource,
    KeyAbsent,
    LengthMatch,
    LocalSource,
    ParamSource,
    Source,
    SubmoduleSource,
    TensorMatch,
    TypeMatch,
    compile_guard,
    config,
    interpret,
)
from guards.native import load_native, native_status

HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


@pytest.fixture(autouse=True)
def _native() -> None:
    module = load_native(wait=True)
    if module is None:
        pytest.skip(f"native checker not built here: {native_status()}")
    if not module.SNAPSHOTS:
        pytest.skip("this Python has no dict versions: snapshots are off")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2)
        self.bn = torch.nn.BatchNorm2d(4)
        self.act = torch.nn.ReLU()
        self.cfg = {"mode": "fast", "depth": 2}
        self.scale = 0.5


def guard_module(b: GuardBuilder, source: Source, module: torch.nn.Module) -> None:
    """The guards capture installs for a module call (identity, hooks, no instance forward,
    its constant attributes, parameters, buffers, children)."""
    b.add(source, IdMatch.of(module))
    for table in HOOKS:
        b.add(AttrSource(source, table), LengthMatch(len(getattr(module, table))))
    b.add(AttrSource(source, "__dict__"), KeyAbsent("forward"))
    b.add(AttrSource(source, "training"), EqualsMatch(module.training))
    for name, value in vars(module).items():
        if type(value) in (int, float, str, tuple) and not name.startswith("_"):
            b.add(AttrSource(source, name), EqualsMatch(value))
    for name, p in module._parameters.items():
        if p is not None:
            b.add(ParamSource(source, name), TensorMatch.from_tensor(p))
    for name, buf in module._buffers.items():
        if buf is not None:
            b.add(BufferSource(source, name), TensorMatch.from_tensor(buf))
    for name, child in module._modules.items():
        if child is not None:
            guard_module(b, SubmoduleSource(source, name), child)


def block_tree(m: Block) -> GuardTree:
    b = GuardBuilder()
    b.add_global(GlobalStateMatch.current())
    root = LocalSource("self")
    guard_module(b, root, m)
    cfg = AttrSource(root, "cfg")
    b.add(cfg, TypeMatch(dict))
    b.add(cfg, DictKeysMatch(("mode", "depth")))
    b.add(ItemSource(cfg, "mode"), EqualsMatch("fast"))
    b.add(LocalSource("x"), TensorMatch.from_tensor(torch.ones(2)))
    return b.build()


def compiled(tree: GuardTree) -> CompiledGuard:
    with config.patch(native=2):
        guard = compile_guard(tree)
    assert "snapshot_check" in guard.source, guard.source[:2000]
    return guard


def snapshot_of(guard: CompiledGuard) -> Any:
    cells = guard.fn.__closure__ or ()
    return next(c.cell_contents.__self__ for c in cells
                if type(getattr(c.cell_contents, "__self__", None)).__name__ == "Snapshot")


def agree(guard: CompiledGuard, tree: GuardTree, L: dict[str, object]) -> bool:
    """Two calls in a row agree with the interpreter; returns the answer."""
    expected = interpret(tree, L, {}) is None
    assert guard.fn(L, {}) is expected
    assert guard.fn(L, {}) is expected
    if expected and "snapshot_check" in guard.source:
        # NOTE: a pass leaves the snapshot valid (or given up for good: see the last test)
        state = snapshot_of(guard).counts()["state"]
        assert state == 2 or guard.fn(L, {}) is expected
    return expected


def test_fast_path_is_taken_and_holds_refs() -> None:
    m = Block()
    tree = block_tree(m)
    guard = compiled(tree)
    L = {"self": m, "x": torch.ones(2)}
    assert agree(guard, tree, L)
    snap = snapshot_of(guard)
    counts = snap.counts()
    assert counts["state"] == 2  # valid: the last call ran the snapshot
    assert counts["tensors"] == len(list(m.parameters())) + len(list(m.buffers()))
    assert counts["objects"] == 4  # the block and its three children


MUTATIONS: dict[str, Callable[[Block], None]] = {
    "forward hook on a child": lambda m: m.conv.register_forward_hook(lambda *a: None),
    "pre-hook on the root": lambda m: m.register_forward_pre_hook(lambda *a: None),
    "hooks table cleared after a hook": lambda m: (
        m.act.register_forward_hook(lambda *a: None), m.act._forward_hooks.clear()),
    "attribute reassigned": lambda m: setattr(m.conv, "stride", (1, 1)),
    "attribute written into __dict__": lambda m: m.conv.__dict__.__setitem__("stride", (1, 1)),
    "object.__setattr__": lambda m: object.__setattr__(m.bn, "eps", 1e-3),
    "train() on one child": lambda m: m.bn.train(False),
    "eval() then train() (same values, new versions)": lambda m: (m.eval(), m.train()),
    "forward monkeypatched": lambda m: setattr(m.act, "forward", lambda x: x + 1),
    "parameter replaced": lambda m: setattr(
        m.conv, "weight", torch.nn.Parameter(torch.zeros_like(m.conv.weight))),
    "parameter replaced, other shape": lambda m: setattr(
        m.conv, "weight", torch.nn.Parameter(torch.zeros(4, 3, 1, 1))),
    "requires_grad_ flipped": lambda m: m.conv.weight.requires_grad_(False),
    ".data of another shape": lambda m: setattr(m.conv.bias, "data", torch.zeros(5)),
    "buffer resized in place": lambda m: m.bn.running_mean.resize_(8),
    "buffer dtype changed": lambda m: setattr(m.bn.running_var, "data",
                                              m.bn.running_var.double()),
    "child replaced": lambda m: setattr(m, "act", torch.nn.ReLU()),
    "child deleted from _modules": lambda m: m._modules.pop("act"),
    "__class__ reassigned": lambda m: setattr(m.act, "__class__", torch.nn.ReLU6),
    "__dict__ replaced": lambda m: setattr(m.bn, "__dict__", dict(vars(m.bn))),
    "_parameters replaced": lambda m: setattr(m.conv, "_parameters", collections.OrderedDict(
        m.conv._parameters)),
    "dict entry of a plain attribute": lambda m: m.cfg.__setitem__("mode", "slow"),
    "dict key added": lambda m: m.cfg.__setitem__("extra", 1),
    "dict reordered": lambda m: m.cfg.__setitem__("mode", m.cfg.pop("mode")),
    "float attribute": lambda m: setattr(m, "scale", 0.25),
    "property on the class": lambda m: setattr(type(m.conv), "groups", property(lambda s: 2)),
    "nothing (a new equal tuple)": lambda m: setattr(m.conv, "padding", (0, 0)),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_agrees_with_interpreter(name: str) -> None:
    m = Block()
    conv_cls = type(m.conv)
    saved = dict(vars(conv_cls))
    tree = block_tree(m)
    guard = compiled(tree)
    L = {"self": m, "x": torch.ones(2)}
    assert agree(guard, tree, L)
    try:
        MUTATIONS[name](m)
        agree(guard, tree, L)
    finally:
        for key in set(vars(conv_cls)) - set(saved):
            delattr(conv_cls, key)
        for key, value in saved.items():
            if key not in ("__dict__", "__weakref__") and vars(conv_cls).get(key) is not value:
                setattr(conv_cls, key, value)


def test_mutation_then_undo_passes_again() -> None:
    m = Block()
    tree = block_tree(m)
    guard = compiled(tree)
    L = {"self": m, "x": torch.ones(2)}
    assert agree(guard, tree, L)
    handle = m.conv.register_forward_hook(lambda *a: None)
    assert not agree(guard, tree, L)
    handle.remove()
    assert agree(guard, tree, L)
    assert snapshot_of(guard).counts()["state"] == 2


def test_input_tensor_and_global_state_still_checked() -> None:
    m = Block()
    tree = block_tree(m)
    guard = compiled(tree)
    assert agree(guard, tree, {"self": m, "x": torch.ones(2)})
    assert not agree(guard, tree, {"self": m, "x": torch.ones(3)})
    with torch.no_grad():
        assert not agree(guard, tree, {"self": m, "x": torch.ones(2)})
    assert not agree(guard, tree, {"self": Block(), "x": torch.ones(2)})


def test_list_attribute_is_left_to_python() -> None:
    """A length of a list is not fixed by any dict version: that module is no region."""
    m = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(4)])
    m.extra = [1, 2]
    b = GuardBuilder()
    guard_module(b, LocalSource("self"), m)
    b.add(AttrSource(LocalSource("self"), "extra"), LengthMatch(2))
    tree = b.build()
    with config.patch(native=2):
        guard = compile_guard(tree)
    L: dict[str, object] = {"self": m}
    assert agree(guard, tree, L)
    m.extra.append(3)
    assert not agree(guard, tree, L)


def test_aliasing_with_an_input_keeps_the_region_in_python() -> None:
    m = Block()
    b = GuardBuilder()
    guard_module(b, LocalSource("self"), m)
    b.add(LocalSource("x"), TensorMatch.from_tensor(m.bn.running_mean))
    b.add_aliasing([[BufferSource(SubmoduleSource(LocalSource("self"), "bn"),
                                  "running_mean")], [LocalSource("x")]])
    tree = b.build()
    with config.patch(native=2):
        guard = compile_guard(tree)
    assert "snapshot_check" not in guard.source
    assert agree(guard, tree, {"self": m, "x": torch.zeros(4)})
    assert not agree(guard, tree, {"self": m, "x": m.bn.running_mean})


def test_small_trees_and_option_off_generate_no_snapshot(monkeypatch: Any) -> None:
    m = Block()
    tree = block_tree(m)
    with config.patch(native=2, snapshots=0):
        assert "snapshot_check" not in compile_guard(tree).source
    monkeypatch.setattr(snapshot_mod, "MIN_REGION_NODES", 10_000)
    with config.patch(native=2):
        assert "snapshot_check" not in compile_guard(tree).source


def test_arm_failure_with_passing_guard_falls_back_for_good() -> None:
    """A value whose kind changed under the same guard (a hooks table that became a plain
    dict subclass) cannot be armed: the full guard alone answers from then on."""
    m = Block()
    tree = block_tree(m)
    guard = compiled(tree)
    L = {"self": m, "x": torch.ones(2)}
    assert agree(guard, tree, L)

    class Hooks(dict):  # type: ignore[type-arg]
        pass

    object.__setattr__(m.act, "_forward_hooks", Hooks())
    assert agree(guard, tree, L)
    assert snapshot_of(guard).counts()["state"] != 2
    m.act.scale_extra = 1  # NOTE: still answered right by the full guard
    m.conv.stride = (1, 1)
    assert not agree(guard, tree, L)


class Base(torch.nn.Module):
    depth = 2  # NOTE: class attributes, read through instances
    table = {"k": 1}  # noqa: RUF012 - mutated by the tests on purpose


class Leaf(Base):
    kind = "a"


def class_attribute_tree(m: torch.nn.Sequential) -> GuardTree:
    b = GuardBuilder()
    root = LocalSource("self")
    guard_module(b, root, m)
    leaf = SubmoduleSource(root, "1")
    b.add(AttrSource(leaf, "kind"), EqualsMatch("a"))
    b.add(AttrSource(leaf, "depth"), EqualsMatch(2))
    b.add(ItemSource(AttrSource(leaf, "table"), "k"), EqualsMatch(1))
    return b.build()


CLASS_MUTATIONS: dict[str, Callable[[torch.nn.Module], None]] = {
    "class attribute reassigned": lambda leaf: setattr(Leaf, "kind", "b"),
    "base class attribute reassigned": lambda leaf: setattr(Base, "depth", 3),
    "shadowed by an instance attribute": lambda leaf: setattr(leaf, "kind", "b"),
    "shadowed with the same value": lambda leaf: setattr(leaf, "kind", "a"),
    "shadowed through __dict__": lambda leaf: leaf.__dict__.__setitem__("depth", 5),
    "class attribute deleted": lambda leaf: delattr(Leaf, "kind"),
    "item of a class attribute": lambda leaf: Base.table.__setitem__("k", 2),
    "made a property": lambda leaf: setattr(Leaf, "kind", property(lambda s: "a")),
}


@pytest.mark.parametrize("name", list(CLASS_MUTATIONS))
def test_class_attribute_reads_are_covered_and_agree(name: str) -> None:
    """Attributes an instance dict lacks, read from the class (transformers' layers read
    `gradient_checkpointing` so): covered by the object's type version tag and instance
    dict version, so any change to the class, a base or the instance fails the snapshot."""
    saved = {cls: dict(vars(cls)) for cls in (Base, Leaf)}
    table = dict(Base.table)
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), Leaf(), torch.nn.Linear(2, 2))
    tree = class_attribute_tree(m)
    guard = compiled(tree)
    L: dict[str, object] = {"self": m}
    assert agree(guard, tree, L)
    assert "kind" not in guard.source.split("def guard(L, G)")[1]  # NOTE: the snapshot's
    try:
        CLASS_MUTATIONS[name](m[1])
        agree(guard, tree, L)
    finally:
        for cls, attrs in saved.items():
            for key in set(vars(cls)) - set(attrs):
                delattr(cls, key)
            for key, value in attrs.items():
                if key not in ("__dict__", "__weakref__") and vars(cls).get(key) is not value:
                    setattr(cls, key, value)
        Base.table.clear()
        Base.table.update(table)


class Config:
    """Looks attributes up through its own `__getattribute__` (as transformers' configs do):
    no snapshot can stand for its reads."""

    def __init__(self) -> None:
        self.depth = 2

    def __getattribute__(self, name: str) -> Any:
        return object.__getattribute__(self, name)


def test_uncoverable_subtree_is_a_hole_checked_in_python() -> None:
    """A read the snapshot cannot make (an object with its own `__getattribute__`) leaves
    that subtree to Python, read down its path from the root; the rest of the module stays
    one region."""
    m = Block()
    m.config = Config()
    b = GuardBuilder()
    root = LocalSource("self")
    guard_module(b, root, m)
    b.add(AttrSource(AttrSource(root, "config"), "depth"), EqualsMatch(2))
    b.add(AttrSource(AttrSource(root, "config"), "__dict__"), KeyAbsent("width"))
    tree = b.build()
    guard = compiled(tree)
    L: dict[str, object] = {"self": m}
    assert agree(guard, tree, L)
    fast = guard.source.split("def guard(L, G)")[1]
    assert ".depth" in fast and "_forward_hooks" not in fast
    assert snapshot_of(guard).counts()["objects"] == 4
    m.config.depth = 3
    assert not agree(guard, tree, L)
    m.config.depth = 2
    assert agree(guard, tree, L)
    m.config.width = 1
    assert not agree(guard, tree, L)
    del m.config.width
    m.config = Config()  # NOTE: a new object on the path, equal: passes, re-armed
    assert agree(guard, tree, L)
    m.conv.register_forward_hook(lambda *a: None)
    assert not agree(guard, tree, L)
