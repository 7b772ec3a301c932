"""Differential cases found by the OpInfo conformance run, and guards on reads that may change
after compiling.

- ATen `OpOverload`/`OpOverloadPacket` values (in closures, `functools.partial`, arguments)
  are called as graph nodes; slices, `None` and `Ellipsis` held in closures index tensors;
  a `torch.nn.functional` function given a module or function is inlined.
- Container-module length/keys, `hasattr`/`getattr` with a default, attributes of user
  Python modules and globals of other user modules are guarded: changing them after the
  first call recompiles, never reuses a stale graph.
"""

from __future__ import annotations

import functools
import operator
import sys
import types

import capture
import pytest
import torch
import torch.nn.functional as F
from _differential import CountingBackend, assert_same, t
from torch import nn


def _compile(fn):
    capture.reset()
    backend = CountingBackend()
    return capture.optimize(fn, backend=backend, fullgraph=True), backend


# -- OpOverload / OpOverloadPacket calls -------------------------------------------------
_SOFTMAX = torch.ops.aten._softmax.default
_SLICE_PACKET = torch.ops.aten.slice
_SAFE_SOFTMAX = functools.partial(torch.ops.aten._safe_softmax.default, dim=1)


def _apply(fn, x, *args):
    return fn(x, *args)


@pytest.mark.parametrize(
    ("fn", "target"),
    [
        (lambda x: _SOFTMAX(x, 1, False), torch.ops.aten._softmax.default),
        (lambda x: _SLICE_PACKET(x, 0, 1, 3), torch.ops.aten.slice),
        (lambda x: _SAFE_SOFTMAX(x), torch.ops.aten._safe_softmax.default),
        (lambda x: _apply(torch.ops.aten.relu.default, x), torch.ops.aten.relu.default),
        (
            lambda x: torch.ops.aten._softmax_backward_data(x, x.softmax(1), 1, x.dtype),
            torch.ops.aten._softmax_backward_data,
        ),
    ],
    ids=["overload_closure", "packet_closure", "partial_overload", "overload_arg", "packet_attr"],
)
def test_op_overload_calls_become_nodes(fn, target):
    compiled, backend = _compile(fn)
    x = t(4, 5)
    assert_same(compiled(x), fn(x))
    assert target in backend.targets()
    assert backend.frame_count == 1


def test_op_overload_in_closure_is_guarded():
    ops = [torch.ops.aten.relu.default]

    def make():
        op = ops[0]
        return lambda x: op(x)

    fn = make()
    compiled, backend = _compile(fn)
    x = t(6)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 1


# -- slices, None and Ellipsis as index values -------------------------------------------
_INDEX = (slice(1, 3), None, Ellipsis)
_SLICE = slice(0, 2)
_STEP = slice(None, None, 2)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.Tensor.__getitem__(x, (slice(1, 3), 0)),
        lambda x: operator.getitem(x, _INDEX),
        lambda x: x[_SLICE],
        lambda x: x[_STEP, _SLICE] * 2,
        lambda x: torch.Tensor.__getitem__(x, (Ellipsis, None, slice(None, -1))),
    ],
    ids=["method_tuple", "operator_closure", "closure_slice", "two_closure_slices", "ellipsis"],
)
def test_slice_values_index_tensors(fn):
    compiled, backend = _compile(fn)
    x = t(4, 5)
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 1


def test_closure_slice_is_guarded():
    box = {"s": slice(0, 2)}

    def make(s):
        return lambda x: x[s]

    fn = make(box["s"])
    compiled, backend = _compile(fn)
    x = t(5, 3)
    assert_same(compiled(x), fn(x))
    # A new closure over a different slice: same code, different cell contents.
    other = make(slice(1, 4))
    compiled_other = capture.optimize(other, backend=backend, fullgraph=True)
    assert_same(compiled_other(x), other(x))
    assert backend.frame_count == 2


# -- torch.nn.functional given a callable ------------------------------------------------
@pytest.mark.parametrize(
    "distance",
    [nn.PairwiseDistance(), lambda a, b: (a - b).abs().sum(-1), None],
    ids=["module", "lambda", "default"],
)
def test_functional_with_callable_argument_is_inlined(distance):
    def fn(anchor, pos, neg):
        return F.triplet_margin_with_distance_loss(
            anchor, pos, neg, distance_function=distance, margin=0.5
        )

    compiled, backend = _compile(fn)
    args = (t(3, 4, seed=1), t(3, 4, seed=2), t(3, 4, seed=3))
    assert_same(compiled(*args), fn(*args))
    assert backend.frame_count == 1
    if distance is not None:
        assert F.triplet_margin_with_distance_loss not in backend.targets()


# -- guards on module containers ----------------------------------------------------------
class Stack(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        if kind == "list":
            self.layers = nn.ModuleList([nn.Linear(3, 3)])
        elif kind == "seq":
            self.layers = nn.Sequential(nn.Linear(3, 3))
        else:
            self.layers = nn.ModuleDict({"a": nn.Linear(3, 3)})

    def forward(self, x):
        if self.kind == "dict":
            for key in self.layers:
                x = self.layers[key](x)
            return x + len(self.layers)
        for layer in self.layers:
            x = layer(x)
        return x * len(self.layers)

    def grow(self) -> None:
        if self.kind == "dict":
            self.layers["b"] = nn.Linear(3, 3)
        else:
            self.layers.append(nn.Linear(3, 3))


@pytest.mark.parametrize("kind", ["list", "seq", "dict"])
def test_container_growth_recompiles(kind):
    torch.manual_seed(0)
    model = Stack(kind)
    compiled, backend = _compile(model)
    x = t(2, 3)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        assert_same(compiled(x), model(x))
        assert backend.frame_count == 1
        model.grow()
        assert_same(compiled(x), model(x))
        assert backend.frame_count == 2


def test_module_list_index_and_truth_recompile():
    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.extra = nn.ModuleList()

        def forward(self, x):
            if self.extra:
                x = self.extra[-1](x)
            return x + 1

    model = Head()
    compiled, backend = _compile(model)
    x = t(2, 3)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        model.extra.append(nn.Linear(3, 3))
        assert_same(compiled(x), model(x))
        assert backend.frame_count == 2
        model.extra.append(nn.Linear(3, 3))
        assert_same(compiled(x), model(x))
        assert backend.frame_count == 3


def test_children_iteration_recompiles():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(3, 3)

        def forward(self, x):
            for child in self.children():
                x = child(x)
            return x

    model = Net()
    compiled, backend = _compile(model)
    x = t(2, 3)
    with torch.no_grad():
        assert_same(compiled(x), model(x))
        model.b = nn.Linear(3, 3)
        assert_same(compiled(x), model(x))
        assert backend.frame_count == 2


# -- hasattr / getattr with default ------------------------------------------------------
class OptionalAttrs(nn.Module):
    def forward(self, x):
        if hasattr(self, "scale"):
            x = x * self.scale
        return x + getattr(self, "shift", 0.0)


def test_module_attribute_appearing_and_disappearing_recompiles():
    model = OptionalAttrs()
    compiled, backend = _compile(model)
    x = t(4)
    assert_same(compiled(x), model(x))
    model.scale = 3.0
    assert_same(compiled(x), model(x))
    assert backend.frame_count == 2
    model.shift = 1.5
    assert_same(compiled(x), model(x))
    assert backend.frame_count == 3
    del model.scale
    del model.shift
    assert_same(compiled(x), model(x))
    assert backend.frame_count == 3  # back to the first entry's assumptions
    model.register_buffer("scale", torch.full((4,), 2.0))
    assert_same(compiled(x), model(x))
    assert backend.frame_count == 4


class Config:
    pass


def test_object_hasattr_recompiles():
    cfg = Config()

    def fn(x, c):
        return x * 2 if hasattr(c, "double") else x + 1

    compiled, backend = _compile(fn)
    x = t(3)
    assert_same(compiled(x, cfg), fn(x, cfg))
    cfg.double = True
    assert_same(compiled(x, cfg), fn(x, cfg))
    assert backend.frame_count == 2


# -- attributes of user Python modules, globals of other modules -------------------------
_HELPER_SOURCE = """
SCALE = 2.0
MODE = "mul"

def helper(x):
    if MODE == "mul":
        return x * SCALE
    return x + SCALE
"""


@pytest.fixture
def helper_module():
    module = types.ModuleType("capture_conformance_helper")
    code = compile(_HELPER_SOURCE, "<capture_conformance_helper>", "exec")
    exec(code, module.__dict__)  # noqa: S102  # a module made for the test
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_python_module_attributes_are_guarded(helper_module):
    mod = helper_module

    def fn(x):
        return x + mod.SCALE

    compiled, backend = _compile(fn)
    x = t(3)
    assert_same(compiled(x), fn(x))
    mod.SCALE = 5.0
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 2


def test_globals_of_other_modules_are_guarded(helper_module):
    mod = helper_module

    def fn(x):
        return mod.helper(x)

    compiled, backend = _compile(fn)
    x = t(3)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 1
    mod.SCALE = -1.0  # read by helper through its own globals
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 2
    mod.MODE = "add"
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 3
    mod.helper = lambda x: x - 7
    assert_same(compiled(x), fn(x))
    assert backend.frame_count == 4


# -- data-dependent ops stay clear errors (fullgraph) or run eagerly ----------------------
def _split_at(x, idx):
    return torch.tensor_split(x, idx)


def test_value_reading_op_is_one_graph_with_unbacked_sizes():
    # tensor_split's C++ composite reads the indices' data; capture runs torch's Python
    # implementation instead (`.item()` of each index: unbacked symbols, no guard).
    capture.reset()
    backend = CountingBackend()
    compiled = capture.optimize(_split_at, backend=backend, fullgraph=True)
    x = t(6)
    for idx in (torch.tensor([1, 3]), torch.tensor([4, 2]), torch.tensor([0, 6])):
        assert_same(compiled(x, idx), _split_at(x, idx))
    assert backend.frame_count == 1


def test_value_reading_op_falls_back_without_fullgraph():
    capture.reset()
    compiled = capture.optimize(_split_at, backend=CountingBackend(), fullgraph=False)
    x, idx = t(6), torch.tensor([1, 3])
    assert_same(compiled(x, idx), _split_at(x, idx))
