"""Sources render readably, and fetch() agrees with the generated access code."""

from __future__ import annotations

import types

import torch
from guards import (
    AttrSource,
    BufferSource,
    ClosureSource,
    DefaultSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ParamSource,
    SizeSource,
    Source,
    StrideSource,
    SubmoduleSource,
)


def _code_value(source: Source, L: dict[str, object], G: dict[str, object]) -> object:
    consts: dict[str, object] = {}

    def const(value: object) -> str:
        name = f"c{len(consts)}"
        consts[name] = value
        return name

    expr = "L" if isinstance(source.root(), LocalSource) else "G"
    for link in source.chain():
        expr = link.code(expr, const)
    return eval(expr, {"L": L, "G": G, **consts})


def _fetch(source: Source, L: dict[str, object], G: dict[str, object]) -> object:
    value: object = None
    for link in source.chain():
        base = (L if isinstance(link, LocalSource) else G) if link.base is None else value
        value = link.fetch(base)
    return value


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 4) for _ in range(2)])
        self.bn = torch.nn.BatchNorm1d(4)


def _make_closure() -> types.FunctionType:
    captured = 41

    def inner(a: int, b: int = 7, *, c: str = "k") -> int:
        return a + captured

    return inner  # type: ignore[return-value]


def test_render_and_agree() -> None:
    net = Net()
    fn = _make_closure()
    x = torch.randn(8, 3)
    L = {"self": net, "x": x, "cfg": {"mode": "train", 3: (1, 2)}, "fn": fn}
    G = {"g": types.SimpleNamespace(weight=x)}
    me = LocalSource("self")
    cases: list[tuple[Source, str, object]] = [
        (AttrSource(GlobalSource("g"), "weight"), "G['g'].weight", x),
        (SizeSource(LocalSource("x"), 0), "L['x'].shape[0]", 8),
        (StrideSource(LocalSource("x"), 0), "L['x'].stride()[0]", 3),
        (ItemSource(ItemSource(LocalSource("cfg"), 3), 1), "L['cfg'][3][1]", 2),
        (ItemSource(LocalSource("cfg"), "mode"), "L['cfg']['mode']", "train"),
        (ParamSource(SubmoduleSource(SubmoduleSource(me, "layers"), "1"), "weight"),
         "L['self'].layers[1].weight", net.layers[1].weight),
        (BufferSource(SubmoduleSource(me, "bn"), "running_mean"),
         "L['self'].bn.running_mean", net.bn.running_mean),
        (ClosureSource(LocalSource("fn"), 0, "captured"),
         "L['fn'].__closure__[0].cell_contents", 41),
        (DefaultSource(LocalSource("fn"), 0), "L['fn'].__defaults__[0]", 7),
        (DefaultSource(LocalSource("fn"), "c"), "L['fn'].__kwdefaults__['c']", "k"),
        (AttrSource(LocalSource("x"), "__class__"), "L['x'].__class__", torch.Tensor),
    ]
    for source, text, expected in cases:
        assert source.name() == text
        assert _fetch(source, L, G) is expected or _fetch(source, L, G) == expected
        assert _code_value(source, L, G) is expected or _code_value(source, L, G) == expected


def test_sources_are_hashable_values() -> None:
    a = AttrSource(LocalSource("self"), "w")
    b = AttrSource(LocalSource("self"), "w")
    assert a == b and hash(a) == hash(b)
    assert a != AttrSource(LocalSource("self"), "v")
    assert a.root() == LocalSource("self")
    assert a.chain() == (LocalSource("self"), a)
