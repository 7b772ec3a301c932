"""Saved values in the layout the forward's compiler picks (`aotgrad.saved_layout`): the
backward graph is compiled for the strides the compiled forward reports, its outputs keep
theirs, and where it cannot follow the forward is compiled again with every stride fixed."""

from __future__ import annotations

from typing import Any

import aotgrad
import pytest
import torch
from aotgrad.saved_layout import (
    SAVED_OUTPUTS_START,
    compile_forward,
    restride_backward,
    saved_outputs_start,
)
from aotgrad.trace import new_fake_mode
from torch import fx

aten = torch.ops.aten
CL = torch.channels_last


def _graph(build: Any, *shapes: tuple[int, ...]) -> fx.GraphModule:
    """A graph of placeholders with fake example values of `shapes`, body from `build`."""
    mode = new_fake_mode()
    graph = fx.Graph()
    inputs = []
    for i, shape in enumerate(shapes):
        node = graph.placeholder(f"a{i}")
        with mode:
            node.meta["example_value"] = torch.empty(shape)
        inputs.append(node)
    outputs = build(graph, *inputs)
    for node in graph.nodes:
        if node.op == "call_function":
            args = fx.node.map_arg(node.args, lambda n: n.meta["example_value"])
            with mode:
                node.meta["example_value"] = node.target(*args, **node.kwargs)
    graph.output(outputs)
    return fx.GraphModule(torch.nn.Module(), graph)


def _relu_mul(graph: fx.Graph, saved: fx.Node, grad: fx.Node) -> tuple[fx.Node, ...]:
    mask = graph.call_function(aten.gt.Scalar, (saved, 0.0))
    out = graph.call_function(aten.mul.Tensor, (grad, mask))
    return (out,)


def test_backward_follows_the_saved_layout_and_keeps_output_strides() -> None:
    bw = _graph(_relu_mul, (2, 4, 3, 3), (2, 4, 3, 3))
    cl_strides = torch.empty(2, 4, 3, 3).to(memory_format=CL).stride()
    new = restride_backward(bw, [cl_strides])
    assert new is not None and new is not bw
    placeholders = [n for n in new.graph.nodes if n.op == "placeholder"]
    assert placeholders[0].meta["example_value"].stride() == cl_strides
    assert placeholders[1].meta["example_value"].is_contiguous()  # not a saved input
    mask = next(n for n in new.graph.nodes if n.target is aten.gt.Scalar)
    assert mask.meta["example_value"].stride() == cl_strides  # derived as eager would
    (out,) = next(n for n in new.graph.nodes if n.op == "output").args[0]
    assert out.meta["example_value"].is_contiguous()  # the gradient's strides as before
    torch.manual_seed(0)
    saved, grad = torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3)
    (want,) = bw(saved, grad)
    (got,) = new(saved.to(memory_format=CL), grad)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_backward_unchanged_when_the_strides_agree() -> None:
    bw = _graph(_relu_mul, (2, 4, 3, 3), (2, 4, 3, 3))
    assert restride_backward(bw, [(36, 9, 3, 1)]) is bw
    assert restride_backward(bw, [None]) is bw


def test_a_read_through_explicit_strides_refuses() -> None:
    def build_plain(graph: fx.Graph, saved: fx.Node, grad: fx.Node) -> tuple[fx.Node, ...]:
        flat = graph.call_function(aten.as_strided.default, (saved, [72], [1]))
        return (graph.call_function(aten.mul.Tensor, (grad, flat)),)

    bw = _graph(build_plain, (2, 4, 3, 3), (72,))
    cl_strides = torch.empty(2, 4, 3, 3).to(memory_format=CL).stride()
    assert restride_backward(bw, [cl_strides]) is None  # other elements, same strides


class _LayoutCompiler:
    """Runs the graph; given a training forward, returns its saved 4-D values
    channels-last and reports it (as a layout-choosing compiler would)."""

    def __init__(self) -> None:
        self.marks: list[int | None] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        start = saved_outputs_start(gm)
        self.marks.append(start)
        strides: list[tuple[int, ...] | None] = []
        for i, v in enumerate(next(n for n in gm.graph.nodes if n.op == "output").args[0]):
            value = v.meta["example_value"]
            if start is not None and i >= start and value.dim() == 4:
                strides.append(tuple(value.to(memory_format=CL).stride()))
            else:
                strides.append(tuple(value.stride()))

        def run(*args: Any) -> Any:
            outs = list(gm(*args))
            return [o.contiguous(memory_format=CL) if start is not None and i >= start
                    and o.dim() == 4 else o for i, o in enumerate(outs)]

        run.output_strides = strides  # type: ignore[attr-defined]  # the reported strides
        return run


def _forward(graph: fx.Graph, x: fx.Node) -> tuple[fx.Node, ...]:
    y = graph.call_function(aten.relu.default, (x,))
    return (graph.call_function(aten.sum.default, (y,)), y)


def test_compile_forward_marks_saved_outputs_and_restrides_the_backward() -> None:
    fw = _graph(_forward, (2, 4, 3, 3))
    bw = _graph(_relu_mul, (2, 4, 3, 3), (2, 4, 3, 3))
    compiler = _LayoutCompiler()
    compiled, new_bw = compile_forward(compiler, fw, bw, 1, [])
    assert compiler.marks == [1]
    assert fw.meta[SAVED_OUTPUTS_START] == 1
    saved = next(n for n in new_bw.graph.nodes if n.op == "placeholder")
    assert saved.meta["example_value"].is_contiguous(memory_format=CL)
    x = torch.randn(2, 4, 3, 3)
    _loss, y = compiled(x)
    assert y.is_contiguous(memory_format=CL)


def test_compile_forward_fixes_strides_where_the_backward_cannot_follow() -> None:
    fw = _graph(_forward, (2, 4, 3, 3))

    def build(graph: fx.Graph, saved: fx.Node, grad: fx.Node) -> tuple[fx.Node, ...]:
        flat = graph.call_function(aten.as_strided.default, (saved, [72], [1]))
        return (graph.call_function(aten.mul.Tensor, (grad, flat)),)

    bw = _graph(build, (2, 4, 3, 3), (72,))
    compiler = _LayoutCompiler()
    compiled, new_bw = compile_forward(compiler, fw, bw, 1, [])
    assert compiler.marks == [1, None]  # compiled again, every output's strides fixed
    assert new_bw is bw
    assert saved_outputs_start(fw) is None
    _, y = compiled(torch.randn(2, 4, 3, 3))
    assert y.is_contiguous()


def test_compile_forward_rejects_strides_it_did_not_leave_to_the_compiler() -> None:
    fw = _graph(_forward, (2, 4, 3, 3))

    def build(graph: fx.Graph, saved: fx.Node, grad: fx.Node) -> tuple[fx.Node, ...]:
        flat = graph.call_function(aten.as_strided.default, (saved, [72], [1]))
        return (graph.call_function(aten.mul.Tensor, (grad, flat)),)

    bw = _graph(build, (2, 4, 3, 3), (72,))

    def stubborn(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        run: Any = gm
        run.output_strides = [(), (36, 1, 12, 4)]  # channels-last whatever it is told
        return run

    with pytest.raises(RuntimeError, match="strides"):
        compile_forward(stubborn, fw, bw, 1, [])


def test_aot_eager_training_graphs_keep_their_layouts() -> None:
    # NOTE: a compiler that reports nothing keeps every value's strides: the backward is
    # the partitioner's graph itself.
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return gm

    x = torch.randn(2, 4, 3, 3, requires_grad=True)
    f = aotgrad.aot_function(lambda t: torch.relu(t).sum(), keep)
    f(x).backward()
    want = x.grad
    assert want is not None
    torch.testing.assert_close(want, (x > 0).float())
    assert len(graphs) == 2
    assert saved_outputs_start(graphs[0]) is not None
    assert saved_outputs_start(graphs[1]) is None


def test_gradients_keep_exact_strides_without_a_copy_where_only_size_one_dims_differ() -> None:
    # A depthwise weight's gradient [C, 1, 3, 3] comes out channels-last as (9, 1, 3, 1):
    # the same memory as eager's (9, 9, 3, 1), given back as a view, not a copy.
    def build(graph: fx.Graph, saved: fx.Node) -> tuple[fx.Node, ...]:
        first = graph.call_function(aten.slice.Tensor, (saved, 1, 0, 1))
        return (graph.call_function(aten.mul.Tensor, (first, 2.0)),)

    bw = _graph(build, (2, 4, 3, 3))
    (old_out,) = next(n for n in bw.graph.nodes if n.op == "output").args[0]
    assert old_out.meta["example_value"].stride() == (9, 9, 3, 1)
    new = restride_backward(bw, [(36, 1, 12, 4)])
    assert new is not None
    (out,) = next(n for n in new.graph.nodes if n.op == "output").args[0]
    assert out.target is aten.as_strided.default
    assert out.args[0].meta["example_value"].stride() == (9, 1, 3, 1)
    assert out.meta["example_value"].stride() == (9, 9, 3, 1)
    x = torch.randn(2, 4, 3, 3)
    (got,) = new(x.to(memory_format=CL))
    assert got.stride() == (9, 9, 3, 1)
    torch.testing.assert_close(got, x[:, :1] * 2.0, rtol=0, atol=0)
