"""Property test: the generated guard and the interpreter always agree.

Random trees over random nested values (dicts, lists, tuples, objects, tensors, scalars),
with random checks (most built to pass on the original values), and random inputs made by
mutating the originals. The compiled result must equal `interpret(...) is None`, and a
failing guard must come with a reason.
"""

from __future__ import annotations

import copy
import math
import random
import types
from typing import Any

import torch
from guards import (
    AttrSource,
    BufferSource,
    DictKeysMatch,
    EqualsMatch,
    GlobalSource,
    GlobalStateMatch,
    GuardBuilder,
    ItemSource,
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
    explain,
    interpret,
)
from guards.exprs import Const
from hypothesis import given, settings
from hypothesis import strategies as st

SCALARS: list[object] = [0, 1, -3, 7, True, False, None, 1.5, math.nan, -0.0, "a", "train",
                         (1, "x"), (True,), (1.0, (2, None))]


def _tensor(rng: random.Random) -> torch.Tensor:
    shape = tuple(rng.choice([1, 2, 3, 4]) for _ in range(rng.choice([0, 1, 2, 2, 3, 3])))
    t = torch.randn(shape, dtype=rng.choice([torch.float32, torch.float64]))
    if t.dim() >= 2 and rng.random() < 0.3:
        t = t.transpose(0, 1)
    if rng.random() < 0.2:
        t.requires_grad_(True)
    return t


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
    try:
        options.append(EqualsMatch(value))
    except TypeError:
        pass
    if isinstance(value, (dict, list, tuple)):
        options.append(LengthMatch(len(value)))
    if isinstance(value, dict):
        options.append(DictKeysMatch(tuple(value.keys())))
    if rng.random() < 0.03:
        options.append(rng.choice([TypeMatch(int), EqualsMatch(rng.choice(SCALARS)),
                                   LengthMatch(2)]))
    return rng.choice(options)


def _build(rng: random.Random, L: dict[str, object]) -> GuardBuilder:
    b = GuardBuilder()
    if rng.random() < 0.3:
        b.add_global(GlobalStateMatch.current())
    symbols: dict[str, int] = {}
    for source, value in _sources(rng, L):
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


def _mutate_tensor(rng: random.Random, t: torch.Tensor) -> torch.Tensor:
    kind = rng.choice([0, 1, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11])  # other strides (2) most often
    shape = tuple(t.shape)
    if kind == 0:
        return t.detach().clone().requires_grad_(not t.requires_grad)
    if kind == 1:
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


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False))
def test_compiled_and_interpreted_agree(rng: random.Random) -> None:
    L = {name: _value(rng, 3) for name in ("x", "y", "cfg")[: rng.randint(1, 3)]}
    tree = _build(rng, L).build()
    names = list(L)
    guard = compile_guard(tree, names)  # NOTE: also the positional variant, fn_args
    assert guard.fn_args is not None
    assert guard.fn(L, {}) == (interpret(tree, L, {}) is None), guard.source
    for _ in range(10):
        inputs = _mutate(rng, L)
        passed = guard.fn(inputs, {})
        failure = interpret(tree, inputs, {})
        assert passed == (failure is None), (guard.source, failure)
        assert guard.fn_args(*[inputs[name] for name in names], {}) == passed, guard.source
        if not passed:
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


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_module_and_global_sources_agree(rng: random.Random) -> None:
    model = _Block(rng.choice([2, 4]))
    in_globals = rng.random() < 0.5
    root: Source = GlobalSource("model") if in_globals else LocalSource("self")
    b = GuardBuilder()
    for source, value in _module_sources(root, model):
        if rng.random() < 0.7:
            b.add(source, _check_for(rng, value))
    b.add(AttrSource(root, "training"), EqualsMatch(True))
    tree = b.build()
    guard = compile_guard(tree, ["self"])
    assert guard.fn_args is not None

    def frames(m: _Block) -> tuple[dict[str, object], dict[str, object]]:
        return ({"self": None}, {"model": m}) if in_globals else ({"self": m}, {})

    L, G = frames(model)
    assert guard.fn(L, G) == (interpret(tree, L, G) is None), guard.source
    for _ in range(6):
        L, G = frames(_mutate_module(rng, model))
        passed = guard.fn(L, G)
        assert passed == (interpret(tree, L, G) is None), guard.source
        assert guard.fn_args(L["self"], G) == passed, guard.source
