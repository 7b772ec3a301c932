"""Cases: node metadata of captured graphs (example_value, stack_trace, nn_module_stack,
source_fn), and that compiling a GraphModule again keeps the original source locations."""

from __future__ import annotations

import os

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, line_of, t
from torch import nn

HERE = os.path.basename(__file__)


def simple(x, y):
    a = x * y  # LINE_MUL
    b = torch.sin(a)  # LINE_SIN
    return b.relu() + a  # LINE_RET


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()  # LINE_INNER


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Inner(), Inner()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x * 2  # LINE_OUTER


def _capture(target, *args):
    capture.reset()
    backend = CountingBackend()
    compiled = capture.optimize(target, backend=backend, fullgraph=True)
    compiled(*args)
    assert backend.frame_count == 1
    return backend.graphs[0]


def test_every_node_has_example_value():
    gm = _capture(simple, t(4), t(4, seed=1))
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "call_function", "call_method", "call_module"):
            assert "example_value" in node.meta, node.format_node()
            assert "val" not in node.meta, "only example_value carries values"
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value = node.meta["example_value"]
            assert isinstance(value, torch.Tensor) and tuple(value.shape) == (4,)


def test_stack_trace_on_every_call_node_points_to_user_line():
    gm = _capture(simple, t(4), t(4, seed=1))
    lines = {line_of(simple, m) for m in ("# LINE_MUL", "# LINE_SIN", "# LINE_RET")}
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert calls
    for node in calls:
        trace = node.meta.get("stack_trace")
        assert trace, f"{node.format_node()} has no stack_trace"
        assert HERE in trace, trace
        assert any(f"line {n}," in trace for n in lines), trace
    sin = [n for n in calls if n.target in (torch.sin, "sin")]
    assert sin and f"line {line_of(simple, '# LINE_SIN')}," in sin[0].meta["stack_trace"]
    assert "b = torch.sin(a)" in sin[0].meta["stack_trace"]


def test_source_fn_on_every_call_node():
    gm = _capture(simple, t(4), t(4, seed=1))
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            source_fn = node.meta.get("source_fn")
            assert isinstance(source_fn, tuple) and len(source_fn) == 2, node.format_node()
            assert isinstance(source_fn[0], str)


def test_nn_module_stack_paths_and_classes():
    torch.manual_seed(0)
    gm = _capture(Outer(), t(2, 4))
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    linear_nodes = [n for n in calls if n.target is torch._C._nn.linear
                    or n.target is torch.nn.functional.linear]
    assert len(linear_nodes) == 2
    for i, node in enumerate(linear_nodes):
        stack = node.meta.get("nn_module_stack")
        assert isinstance(stack, dict) and stack, node.format_node()
        paths = [v[0] for v in stack.values()]
        classes = [v[1] for v in stack.values()]
        assert any(p.endswith((f"blocks.{i}", f"blocks[{i}]")) for p in paths), paths
        assert any(p.endswith((f"blocks.{i}.fc", f"blocks[{i}].fc")) for p in paths), paths
        assert Inner in classes and nn.Linear in classes, classes
        assert f"line {line_of(Inner.forward, '# LINE_INNER')}," in node.meta["stack_trace"]


def test_compiling_a_graph_module_keeps_original_stack_traces():
    gm = _capture(simple, t(4), t(4, seed=1))
    original = {
        str(n.target): n.meta["stack_trace"]
        for n in gm.graph.nodes if n.op in ("call_function", "call_method")
    }
    second = CountingBackend()
    capture.reset()
    compiled = capture.optimize(gm, backend=second, fullgraph=True)
    x, y = t(4), t(4, seed=1)
    assert_same(compiled(x, y), gm(x, y))
    assert second.frame_count == 1
    again = [n for n in second.graphs[0].graph.nodes if n.op in ("call_function", "call_method")]
    assert again
    for node in again:
        trace = node.meta.get("stack_trace", "")
        assert HERE in trace, f"{node.format_node()} lost its original location: {trace!r}"
        if str(node.target) in original:
            assert trace == original[str(node.target)]


def test_symbolic_traced_module_compiles_with_metadata():
    torch.manual_seed(0)
    traced = torch.fx.symbolic_trace(Inner())
    gm = _capture(traced, t(2, 4))
    assert any(n.op in ("call_function", "call_method") for n in gm.graph.nodes)
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            assert node.meta.get("stack_trace"), node.format_node()


@pytest.mark.parametrize("fn", [simple], ids=["simple"])
def test_graph_returns_a_tuple(fn):
    gm = _capture(fn, t(4), t(4, seed=1))
    out = gm(t(4), t(4, seed=1))
    assert isinstance(out, tuple)
