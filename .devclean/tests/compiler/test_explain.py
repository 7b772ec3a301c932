"""`compiler.explain`: graphs, graph breaks with the user's file, line and source text, ops
and guards per graph, and a report ordered by cost."""

from __future__ import annotations

import contextlib

import compiler
import torch


def branchy(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:  # the break
        b = b * -1
    return x * b


def test_explain_counts_graphs_and_names_the_break():
    a, b = torch.randn(4), -torch.ones(4)
    out = compiler.explain(branchy)(a, b)
    assert out.graph_count == 2 and len(out.graphs) == 2
    assert out.graph_break_count == 1
    brk = out.break_reasons[0]
    assert brk.filename == __file__
    assert brk.source == "if b.sum() < 0:  # the break"
    assert not brk.whole_frame_eager
    assert out.ops_per_graph[0] >= 3 and out.ops_per_graph[1] >= 1
    assert all(n > 0 for n in out.guards_per_graph)
    report = str(out)
    assert f"{__file__}:{brk.lineno}" in report and "graph break" in report
    # the program ran once, with eager's result
    torch.testing.assert_close(branchy(a, b), a / (a.abs() + 1) * b.abs())


@contextlib.contextmanager
def _opened():
    yield


def in_generated_context(x):
    with _opened():
        print("inside")  # a break in a generator-based context: the frame runs eagerly
        return x + 1


def test_explain_reports_a_frame_left_to_eager():
    out = compiler.explain(in_generated_context)(torch.ones(2))
    assert out.graph_count == 0
    assert out.break_reasons and out.break_reasons[0].whole_frame_eager
    assert "frame runs eagerly" in str(out)


def test_explain_a_module_without_breaks():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    out = compiler.explain(model)(torch.randn(2, 4))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    assert out.ops_per_graph == [2]
    assert str(out).startswith("1 graph(s), 0 graph break(s)")
