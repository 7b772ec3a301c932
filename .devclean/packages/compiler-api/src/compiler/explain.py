"""`explain`: run a function once under capture and report its graphs and graph breaks."""

from __future__ import annotations

import linecache
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import capture
import torch

from compiler.validation import expect


@dataclass(frozen=True, slots=True)
class GraphBreakInfo:
    """One place where capture split the program or left a frame to eager Python.

    Attributes:
        reason: What capture could not put in a graph.
        filename: The user's file of the construct.
        lineno: Its line number.
        source: The source text of that line.
        whole_frame_eager: True when the whole frame ran eagerly (no graph break was
            possible there, e.g. inside a `try` block), not just that one construct.
    """

    reason: str
    filename: str
    lineno: int
    source: str
    whole_frame_eager: bool = False


@dataclass(frozen=True, slots=True)
class ExplainOutput:
    """What `explain` found.

    Attributes:
        graphs: The captured FX graphs, in compile order.
        graph_count: `len(graphs)`.
        graph_break_count: How many graph breaks and eager frames capture met.
        break_reasons: One `GraphBreakInfo` per break, in the order they happened.
        ops_per_graph: Operator nodes (calls) of each graph.
        guards_per_graph: Guard checks of each graph's cache entry.
        compile_time: Seconds spent capturing (all frames, backends included).
        run_time: Seconds of the whole call, compiles included.
    """

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list[GraphBreakInfo] = field(default_factory=list)
    ops_per_graph: list[int] = field(default_factory=list)
    guards_per_graph: list[int] = field(default_factory=list)
    compile_time: float = 0.0
    run_time: float = 0.0

    def __str__(self) -> str:
        headline = (
            f"{self.graph_count} graph(s), {self.graph_break_count} graph break(s), "
            f"{sum(self.ops_per_graph)} op(s); capture took {self.compile_time:.3f} s"
        )
        lines = [headline]
        if self.break_reasons:
            lines.append("Graph breaks (each splits a graph or runs code eagerly):")
            # NOTE: whole frames left to eager Python cost most: listed first.
            ordered = sorted(self.break_reasons, key=lambda b: not b.whole_frame_eager)
            for i, brk in enumerate(ordered, 1):
                what = "frame runs eagerly" if brk.whole_frame_eager else "graph break"
                lines.append(f"  {i}. {what}: {brk.reason}")
                lines.append(f"     {brk.filename}:{brk.lineno}: {brk.source}")
            lines.append(
                "  To remove a break: rewrite the construct, mark a helper "
                "`compiler.disable` (a break around that call only), or see "
                "`fullgraph=True` for the first one with hints."
            )
        if self.graphs:
            lines.append("Graphs (largest first):")
            order = sorted(range(self.graph_count), key=lambda i: -self.ops_per_graph[i])
            for i in order:
                lines.append(
                    f"  graph {i}: {self.ops_per_graph[i]} op(s), "
                    f"{self.guards_per_graph[i]} guard check(s)"
                )
        return "\n".join(lines)


def explain(fn: Callable[..., Any]) -> Callable[..., ExplainOutput]:
    """Report how `fn` is captured: graphs, graph breaks with their reasons, guards.

    Args:
        fn: A function, bound method or `torch.nn.Module`.

    Returns:
        A function taking `fn`'s arguments: it runs `fn` once through capture with the eager
        backend (so the program's effects happen once, as in a normal call) and returns an
        `ExplainOutput`; `str()` of it is a report ordered by what costs most.

    Raises:
        TypeError: `fn` is not callable.

    Examples:
        >>> import torch, compiler
        >>> def f(x):
        ...     y = x.sin()
        ...     if y.sum() > 0:
        ...         return y * 2
        ...     return y
        >>> out = compiler.explain(f)(torch.ones(3))
        >>> out.graph_count, out.graph_break_count
        (2, 1)
        >>> out.break_reasons[0].source
        'if y.sum() > 0:'

    Notes:
        Each call of the returned function compiles `fn` afresh (its own cache), so the
        report describes exactly that call; entries of `compiler.compile(fn)` are untouched.
    """
    expect("explain", "fn", fn, "a callable", callable(fn))

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        graphs: list[torch.fx.GraphModule] = []

        def counting(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            graphs.append(gm)
            return gm.forward

        compiled = capture.optimize(fn, backend=counting)
        start = time.perf_counter()
        with capture.recording() as records:
            compiled(*args, **kwargs)
        run_time = time.perf_counter() - start
        breaks: list[GraphBreakInfo] = []
        guards_of: dict[int, int] = {}
        for record in records:
            brk = record.extra.get("graph_break")
            if isinstance(brk, capture.Unsupported):
                breaks.append(_info(brk, whole_frame=False))
            elif record.unsupported is not None:
                breaks.append(_info(record.unsupported, whole_frame=True))
            if record.graph is not None:
                guards_of[id(record.graph)] = record.guard_tree.count_checks()
        return ExplainOutput(
            graphs=graphs,
            graph_count=len(graphs),
            graph_break_count=len(breaks),
            break_reasons=breaks,
            ops_per_graph=[_ops(gm) for gm in graphs],
            guards_per_graph=[guards_of.get(id(gm), 0) for gm in graphs],
            compile_time=sum(r.capture_seconds for r in records),
            run_time=run_time,
        )

    return run


def _ops(gm: torch.fx.GraphModule) -> int:
    calls = ("call_function", "call_method", "call_module")
    return sum(1 for node in gm.graph.nodes if node.op in calls)


def _info(error: capture.Unsupported, whole_frame: bool) -> GraphBreakInfo:
    frame = error.where[-1] if error.where else None
    filename = frame.filename if frame else "?"
    lineno = frame.lineno if frame else 0
    source = linecache.getline(filename, lineno).strip() if frame else ""
    return GraphBreakInfo(error.explanation, filename, lineno, source, whole_frame)
