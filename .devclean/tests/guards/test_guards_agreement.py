"""Property test: the generated guard and the interpreter always agree.

Random trees over random nested values (dicts, lists, tuples, objects, tensors, scalars),
with random checks (most built to pass on the original values), and random inputs made by
mutating the originals. The compiled result must equal `interpret(...) is None`, and a
failing guard must come with a reason.

Each test runs twice: with `GUARDS_NATIVE` off (option `native=0`: the generated code is
pure Python) and on (tensor, global-state and backend checks go to the native checker);
in the native run the native and the pure-Python compiled guards must also agree. Tensors
include Parameters, subclasses (one checked natively, one that overrides an attribute the
checks read and so stays in Python), complex tensors, and mutations that keep everything
but the dispatch key set (negative and conjugate views, `.data =` swaps,
`torch.utils.swap_tensors`, inference tensors).
"""

from __future__ import annotations

import copy
import math
import random
import types
from typing import Any

import pytest
import torch
from guards import (
    AttrSource,
    BufferSource,
    CallSource,
    ConstSource,
    DictKeysMatch,
    EqualsMatch,
    GlobalSource,
    GlobalStateMatch,
    GuardBuilder,
    IdMatch,
    ItemSource,
    KeyAbsent,
    LengthMatch,
    LocalSource,
    NotNone,
    ParamSource,
    Relation,
    SizeSource,
    Source,
    StrideSource,
    SubmoduleSource,
    Sym,
    TensorMatch,
    TypeMatch,
    compile_guard,
    config,
    explain,
    interpret,
)
from guards.codegen import CompiledGuard
from guards.exprs import Const
from guards.native import load_native, native_status
from guards.tree import GuardTree
from hypothesis import given, settings
from hypothesis import strategies as st

SCALARS: list[object] = [0, 1, -3, 7, True, False, None, 1.5, math.nan, -0.0, "a", "train",
                         (1, "x"), (True,), (1.0, (2, None))]


class _Sub(torch.Tensor):
    """A plain subclass (default `__torch_function__`): checked natively, by exact class."""


class _Lying(torch.Tensor):
    """Overrides an attribute the checks read: its checks must stay in Python."""

    @property
    def requires_grad(self) -> bool:  # type: ignore[override]
        return not torch.Tensor.requires_grad.__get__(self)  # type: ignore[attr-defined]


CLASSES: list[type] = [torch.Tensor, torch.nn.Parameter, _Sub, _Lying]


def _as_class(cls: type, u: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """`u`'s data and metadata as an instance of `cls` with the given requires_grad."""
    u = u.detach()
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(u, requires_grad=requires_grad)
    if cls is not torch.Tensor:
        u = u.as_subclass(cls)
    if requires_grad:
        torch.Tensor.requires_grad_(u, True)
    return u


def _like(t: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """`u` with the class and requires_grad of `t` (so that only the intended property
    differs)."""
    real = torch.Tensor.requires_grad.__get__(t)  # type: ignore[attr-defined]  # not _Lying's
    return _as_class(type(t), u, bool(real))


def _tensor(rng: random.Random) -> torch.Tensor:
    shape = tuple(rng.choice([1, 2, 3, 4]) for _ in range(rng.choice([0, 1, 2, 2, 3, 3])))
    dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.complex64])
    t = torch.randn(shape, dtype=dtype)
    if rng.random() < 0.2:  # a view at a storage offset (pinned checks compare it)
        t = torch.randn(t.numel() + 3, dtype=dtype)[3:].view(shape)
    if t.dim() >= 2 and rng.random() < 0.3:
        t = t.transpose(0, 1)
    cls = rng.choice(CLASSES) if rng.random() < 0.4 else torch.Tensor
    return _as_class(cls, t, rng.random() < 0.2)


def _value(rng: random.Random, depth: int) -> object:
    kind = rng.random()
    if depth <= 0 or kind < 0.35:
        return rng.choice(SCALARS) if rng.random() < 0.5 else _tensor(rng)
    n = rng.randint(0, 3)
    if kind < 0.55:
        return {rng.choice(["a", "b", "c", 1, 2]): _value(rng, depth - 1) for _ in range(n)}
    if kind < 0.75:
        return [_value(rng, depth - 1) for _ in range(n)]
    if kind < 0.85:
        return tuple(_value(rng, depth - 1) for _ in range(n))
    ns = types.SimpleNamespace()
    for name in ("p", "q", "r")[:n]:
        setattr(ns, name, _value(rng, depth - 1))
    return ns


def _children(value: object) -> list[tuple[Any, object, bool]]:
    """(key, child value, is_attr) for each child."""
    if isinstance(value, dict):
        return [(k, v, False) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(i, v, False) for i, v in enumerate(value)]
    if isinstance(value, types.SimpleNamespace):
        return [(k, v, True) for k, v in vars(value).items()]
    return []


def _sources(rng: random.Random, L: dict[str, object]) -> list[tuple[Source, object]]:
    out: list[tuple[Source, object]] = []

    def walk(source: Source, value: object, depth: int) -> None:
        out.append((source, value))
        if depth > 4:
            return
        for key, child, is_attr in _children(value):
            if rng.random() < 0.7:
                sub = AttrSource(source, key) if is_attr else ItemSource(source, key)
                walk(sub, child, depth + 1)

    for name, value in L.items():
        walk(LocalSource(name), value, 0)
    if rng.random() < 0.1:  # a source that does not exist: the guard must fail, not raise
        source = rng.choice(out)[0]
        missing = rng.choice([AttrSource(source, "missing"), ItemSource(source, 99),
                              LocalSource("absent")])
        out.append((missing, None))
    return out


def _check_for(rng: random.Random, value: object) -> Any:
    """A check that (usually) passes for `value`."""
    options: list[Any] = [TypeMatch(type(value)), NotNone()]
    if isinstance(value, torch.Tensor):
        dims = frozenset(i for i in range(value.dim()) if rng.random() < 0.3)
        options += [TensorMatch.from_tensor(value, dims, dispatch_keys=rng.random() < 0.5)] * 8
        options += [TensorMatch.from_tensor(value, dispatch_keys=rng.random() < 0.5,
                                            pinned=True)] * 4
    try:
        options.append(EqualsMatch(value))
    except TypeError:
        pass
    if isinstance(value, (dict, list, tuple)):
        options.append(LengthMatch(len(value)))
    if isinstance(value, dict):
        options.append(DictKeysMatch(tuple(value.keys())))
        options.append(KeyAbsent(rng.choice(["a", "zz", 1, 99])))
    if rng.random() < 0.05:
        options.append(IdMatch.of(value))
    if rng.random() < 0.03:
        options.append(rng.choice([TypeMatch(int), EqualsMatch(rng.choice(SCALARS)),
                                   LengthMatch(2)]))
    return rng.choice(options)


def _build(rng: random.Random, L: dict[str, object]) -> GuardBuilder:
    b = GuardBuilder()
    if rng.random() < 0.3:
        b.add_global(GlobalStateMatch.current())
    symbols: dict[str, int] = {}
    sources = _sources(rng, L)
    if rng.random() < 0.4:  # how some of the sources alias now (by identity)
        groups: dict[int, list[Source]] = {}
        for source, value in sources:
            if value is not None and rng.random() < 0.6:
                groups.setdefault(id(value), []).append(source)
        b.add_aliasing(list(groups.values()))
    if rng.random() < 0.1:  # state read through a fixed object
        b.add(ItemSource(ConstSource.of(_SHARED), "k"), EqualsMatch(_SHARED["k"]))
        b.add(ConstSource.of(_SHARED), KeyAbsent(rng.choice(["k", "absent"])))
    for source, value in sources:
        if isinstance(value, torch.Tensor) and rng.random() < 0.2:
            b.add(CallSource(source, "storage_offset"), EqualsMatch(value.storage_offset()))
        if rng.random() < 0.8:
            b.add(source, _check_for(rng, value))
        if isinstance(value, torch.Tensor) and value.dim() and rng.random() < 0.5:
            index = rng.randrange(value.dim())
            name = f"s{len(symbols)}"
            size_or_stride = SizeSource if rng.random() < 0.8 else StrideSource
            b.bind_symbol(name, size_or_stride(source, index))
            symbols[name] = int(value.shape[index] if size_or_stride is SizeSource
                                else value.stride()[index])
    names = list(symbols)
    for _ in range(rng.randint(0, 3) if names else 0):
        a = Sym(rng.choice(names))
        c = Sym(rng.choice(names))
        rel = rng.choice([
            Relation.of(a, "==", c),
            Relation.of(a % rng.randint(1, 4), "==", 0),
            Relation((Const(1), a, Const(8)), ("<=", "<=")),
            Relation.of(a * 2 - c, ">", rng.randint(-4, 4)),
            Relation.of(c // (a - 1), "!=", 3),  # may divide by zero: a failure either way
        ])
        b.add_relation(rel)
    return b


#: A dict read through ConstSource by some trees; never changed.
_SHARED: dict[str, object] = {"k": 3}


def _same_data(t: torch.Tensor) -> torch.Tensor:
    """A new plain tensor with `t`'s values, dtype, shape and strides."""
    plain = t.detach().as_subclass(torch.Tensor)
    return torch.empty_strided(plain.shape, plain.stride(), dtype=plain.dtype).copy_(plain)


def _key_change(rng: random.Random, t: torch.Tensor) -> torch.Tensor:
    """Same class, dtype, shape, strides and requires_grad; another dispatch key set."""
    shape, dtype = tuple(t.shape), t.dtype
    kind = rng.randrange(6)
    if kind == 0:
        return _like(t, torch._neg_view(_same_data(t)))
    if kind == 1 and dtype.is_complex:
        return _like(t, _same_data(t).conj())
    if kind == 2:  # `.data =` keeps the object, takes the other's key set
        u = _like(t, _same_data(t))
        u.data = torch._neg_view(torch.randn(shape, dtype=dtype))
        return u
    if kind == 3:
        u = _like(t, _same_data(t))
        u.data = torch._efficientzerotensor(shape, dtype=dtype)
        return u
    if kind == 4:  # swap_tensors swaps everything, the class included
        u = _like(t, _same_data(t))
        torch.utils.swap_tensors(u, _like(t, torch._neg_view(torch.randn(shape, dtype=dtype))))
        return u
    with torch.inference_mode():
        u = torch.empty_strided(shape, t.stride(), dtype=dtype)
    try:
        return _like(t, u)
    except RuntimeError:  # requires_grad on an inference tensor: only the plain one
        return u


def _mutate_tensor(rng: random.Random, t: torch.Tensor) -> torch.Tensor:
    kind = rng.choice([0, 1, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12, 12, 13, 14, 15,
                       15, 16])
    shape = tuple(t.shape)
    if kind == 15:  # the same sizes and strides at another storage offset
        base = torch.empty(t.storage_offset() + t.untyped_storage().nbytes() // t.element_size()
                           + 2, dtype=t.dtype)
        moved = base.as_strided(shape, t.stride(), t.storage_offset() + rng.choice([1, 2]))
        return _like(t, moved)
    if kind == 16 and t.requires_grad and t.dtype.is_floating_point:  # no longer a leaf
        parent = t.detach().clone().requires_grad_(True)
        return (parent * 1.0).as_subclass(type(t))
    if kind == 12:
        return _key_change(rng, t)
    if kind == 13:  # the same tensor as another class
        return _as_class(rng.choice(CLASSES), _same_data(t), bool(t.requires_grad))
    if kind == 14:
        return _like(t, _same_data(t))  # a new object of the same class: passes
    if kind == 0:
        return t.detach().clone().requires_grad_(not t.requires_grad)
    if kind == 1:
        if t.dtype.is_complex:
            return t.detach().to(torch.complex128)
        return t.detach().double() if t.dtype == torch.float32 else t.detach().float()
    if kind == 2 and t.dim() >= 2:  # same shape, other strides
        return torch.randn(tuple(reversed(shape)), dtype=t.dtype).permute(
            *reversed(range(t.dim())))
    if kind == 3 and t.dim():  # one size changes
        i = rng.randrange(t.dim())
        new = list(shape)
        new[i] = rng.choice([1, 2, 5, 8])
        return torch.randn(new, dtype=t.dtype)
    if kind == 4:  # size-1 dimensions get other strides: still the same layout
        strides = [st if size != 1 else rng.randint(1, 9) for size, st in zip(shape, t.stride())]
        return torch.randn(64, dtype=t.dtype).as_strided(shape, strides)
    if kind == 5:
        with torch.inference_mode():
            return torch.randn(shape, dtype=t.dtype)
    if kind == 6:
        return torch.ones(shape, dtype=torch.complex64).conj()
    if kind == 7 and t.dim():  # a broadcast (stride 0) view
        return torch.randn(shape[-1:] or (1,), dtype=t.dtype).expand(shape)
    if kind == 10:  # same shape, dtype, device: sparse COO layout
        return torch.randn(shape, dtype=t.dtype).to_sparse()
    if kind == 11 and t.dtype == torch.float32 and t.dim() and torch.backends.mkldnn.is_available():
        return torch.randn(shape).to_mkldnn()  # NOTE: is_contiguous() is True for mkldnn
    if kind == 9:  # same everything but the negative bit of the key set
        u = t.detach().clone().requires_grad_(t.requires_grad)
        torch._C._set_neg(u, True)
        return u
    return t.detach().clone().requires_grad_(t.requires_grad)


def _mutate_leaf(rng: random.Random, value: object) -> object:
    if isinstance(value, torch.Tensor):
        return _mutate_tensor(rng, value)
    if isinstance(value, dict) and value and rng.random() < 0.5:
        out = dict(value)
        if rng.random() < 0.5:
            out.pop(rng.choice(list(out)))
        else:
            out = dict(reversed(list(out.items())))
        return out
    if isinstance(value, list) and rng.random() < 0.5:
        return value + [0]
    if isinstance(value, types.SimpleNamespace) and vars(value) and rng.random() < 0.5:
        ns = types.SimpleNamespace(**vars(value))
        delattr(ns, rng.choice(list(vars(ns))))
        return ns
    return rng.choice(SCALARS) if rng.random() < 0.7 else _value(rng, 1)


def _copy(value: object) -> object:
    """A structural copy sharing the leaves (tensors, scalars)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, types.SimpleNamespace):
        return types.SimpleNamespace(**{k: _copy(v) for k, v in vars(value).items()})
    return value


def _mutate(rng: random.Random, L: dict[str, object]) -> dict[str, object]:
    """A copy of L with exactly one value somewhere replaced (usually a small change)."""
    out: dict[str, object] = {k: _copy(v) for k, v in L.items()}
    holder: Any = out
    key: Any = rng.choice(list(out))
    tensors = _tensor_slots(out)
    if len(tensors) > 1 and rng.random() < 0.15:  # one tensor now at two places (aliasing)
        (holder, key), other = rng.sample(tensors, 2)
        _set(holder, key, _get(*other))
        return out
    if tensors and rng.random() < 0.5:  # NOTE: tensors carry the richest checks
        holder, key = rng.choice(tensors)
        _set(holder, key, _mutate_tensor(rng, _get(holder, key)))
        return out
    while True:
        value = holder[key] if not isinstance(holder, types.SimpleNamespace) \
            else getattr(holder, key)
        kids = _children(value)
        if not kids or rng.random() < 0.15:
            break
        child_key, _, _ = rng.choice(kids)
        if isinstance(value, tuple):  # tuples are immutable: rebuild, then descend
            value = list(value)
            _set(holder, key, value)
        holder, key = value, child_key
    _set(holder, key, _mutate_leaf(rng, value))
    return out


def _tensor_slots(value: Any) -> list[tuple[Any, Any]]:
    """(holder, key) of every tensor inside the mutable containers of `value`."""
    slots: list[tuple[Any, Any]] = []
    items: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    elif isinstance(value, types.SimpleNamespace):
        items = list(vars(value).items())
    for key, child in items:
        if isinstance(child, torch.Tensor):
            slots.append((value, key))
        else:
            slots += _tensor_slots(child)
    return slots


def _get(holder: Any, key: Any) -> Any:
    return getattr(holder, key) if isinstance(holder, types.SimpleNamespace) else holder[key]


def _set(holder: Any, key: Any, value: object) -> None:
    if isinstance(holder, types.SimpleNamespace):
        setattr(holder, key, value)
    else:
        holder[key] = value


#: Each agreement test runs with the option `native` (env GUARDS_NATIVE) off, then on.
NATIVE_MODES = pytest.mark.parametrize("native", [False, True],
                                       ids=["native_off", "native_on"])


def _require_native(native: bool) -> None:
    """Skip the native run (saying why) where the native checker cannot be built (waits
    for a build in progress, so that the native run is deterministic)."""
    if native and load_native(wait=True) is None:
        pytest.skip(f"native checker not built here: {native_status()}")


def _compile(tree: GuardTree, names: list[str], native: bool) -> list[CompiledGuard]:
    """The guards to compare with the interpreter: the default compile under the option
    (native or not as the option says), and in the native run also the pure-Python one."""
    with config.patch(native=int(native)):
        guard = compile_guard(tree, names)  # NOTE: also the positional variant, fn_args
    assert guard.fn_args is not None
    if not native:
        assert not guard.native
        return [guard]
    assert guard.native == _has_native_checks(tree), guard.source
    return [guard, compile_guard(tree, names, native=False)]


def _has_native_checks(tree: GuardTree) -> bool:
    """Whether the native compile must use the checker (tensor checks of checkable
    classes, or a global-state check)."""
    from guards.native.plan import native_class

    if any(isinstance(check, GlobalStateMatch) for check in tree.root_checks):
        return True

    def visit(node: Any) -> bool:
        return any(isinstance(c, TensorMatch) and native_class(c.cls) for c in node.checks) \
            or any(visit(child) for child in node.children)

    return any(visit(node) for node in tree.children)


@NATIVE_MODES
@settings(max_examples=150, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_compiled_and_interpreted_agree(native: bool, rng: random.Random) -> None:
    _require_native(native)
    L = {name: _value(rng, 3) for name in ("x", "y", "cfg")[: rng.randint(1, 3)]}
    tree = _build(rng, L).build()
    names = list(L)
    guards = _compile(tree, names, native)
    for guard in guards:
        assert guard.fn(L, {}) == (interpret(tree, L, {}) is None), guard.source
    for _ in range(10):
        inputs = _mutate(rng, L)
        failure = interpret(tree, inputs, {})
        for guard in guards:
            assert guard.fn_args is not None
            passed = guard.fn(inputs, {})
            assert passed == (failure is None), (guard.source, failure)
            assert guard.fn_args(*[inputs[name] for name in names], {}) == passed, guard.source
        if failure is not None:
            reason = explain(tree, inputs, {})
            assert isinstance(reason, str) and reason


class _Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(2))
        self.norm = torch.nn.BatchNorm1d(width)


def _module_sources(root: Source, module: torch.nn.Module) -> list[tuple[Source, object]]:
    out: list[tuple[Source, object]] = [(root, module)]
    for name, param in module._parameters.items():
        out.append((ParamSource(root, name), param))
    for name, buf in module._buffers.items():
        out.append((BufferSource(root, name), buf))
    for name, child in module._modules.items():
        if child is not None:
            out += _module_sources(SubmoduleSource(root, name), child)
    return out


def _mutate_module(rng: random.Random, model: _Block) -> _Block:
    model = copy.deepcopy(model)
    kind = rng.randrange(6)
    layer = model.layers[rng.randrange(len(model.layers))]
    if kind == 0:
        layer.weight.requires_grad_(False)
    elif kind == 1:
        layer.weight = torch.nn.Parameter(torch.randn(3, 3))
    elif kind == 2:
        del model.layers[0]
    elif kind == 3:
        model.norm.running_mean = model.norm.running_mean.double()
    elif kind == 4:
        model.eval()
    elif kind == 5:
        layer.bias = None
    return model


@NATIVE_MODES
@settings(max_examples=60, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_module_and_global_sources_agree(native: bool, rng: random.Random) -> None:
    _require_native(native)
    model = _Block(rng.choice([2, 4]))
    in_globals = rng.random() < 0.5
    root: Source = GlobalSource("model") if in_globals else LocalSource("self")
    b = GuardBuilder()
    for source, value in _module_sources(root, model):
        if rng.random() < 0.7:
            b.add(source, _check_for(rng, value))
    b.add(AttrSource(root, "training"), EqualsMatch(True))
    tree = b.build()
    guards = _compile(tree, ["self"], native)

    def frames(m: _Block) -> tuple[dict[str, object], dict[str, object]]:
        return ({"self": None}, {"model": m}) if in_globals else ({"self": m}, {})

    L, G = frames(model)
    for guard in guards:
        assert guard.fn(L, G) == (interpret(tree, L, G) is None), guard.source
    for _ in range(6):
        L, G = frames(_mutate_module(rng, model))
        expected = interpret(tree, L, G) is None
        for guard in guards:
            assert guard.fn_args is not None
            passed = guard.fn(L, G)
            assert passed == expected, guard.source
            assert guard.fn_args(L["self"], G) == passed, guard.source
