"""Runtime checks of data-dependent values, added to a captured graph before it is handed on.

While tracing, fake kernels assume facts about unbacked symbols (`u0 = t.item()`, the size of
`nonzero(x)`) and record them in the ShapeEnv as deferred runtime asserts (`narrow`'s start in
range, two data-dependent sizes equal rather than broadcast, `torch._check(n > 0)` in the
program), and narrow the symbols' value ranges (a size is >= 0). Nothing checks those facts
unless the graph does: here each becomes `aten._assert_scalar(condition, message)` computed
from the graph's own nodes, so bad data raises at run time instead of giving numbers for a
case the trace never considered.

IR in: the frame's FX graph (every node with its example value) and its ShapeEnv.
IR out: the same graph with `sym_size` nodes for unbacked sizes and one assert per fact.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import sympy  # type: ignore[import-untyped]  # sympy ships no type information
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo

from capture import node_meta

__all__ = ["add_runtime_checks"]

_COMPARISONS: dict[type, Callable[[Any, Any], Any]] = {
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.StrictLessThan: operator.lt,
    sympy.LessThan: operator.le,
    sympy.StrictGreaterThan: operator.gt,
    sympy.GreaterThan: operator.ge,
}
# torch's sympy functions (torch.utils._sympy.functions) and sympy's, by class name
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "FloorDiv": operator.floordiv,
    "PythonMod": operator.mod,
    "Mod": operator.mod,
    "Max": torch.sym_max,
    "Min": torch.sym_min,
    "Pow": operator.pow,
}
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


class _Untranslatable(Exception):
    pass


def add_runtime_checks(graph: torch.fx.Graph, shape_env: ShapeEnv | None) -> int:
    """Append the ShapeEnv's facts about this graph's unbacked symbols as asserts; returns
    how many were added (0 for graphs without data-dependent values, at no cost)."""
    if shape_env is None or not shape_env.var_to_range:
        return 0
    symbols = _bind_symbols(graph, shape_env)
    if not symbols:
        return 0
    facts: list[tuple[Any, str]] = []
    for asserts in list(shape_env.deferred_runtime_asserts.values()):
        facts.extend((ra.expr, ra.msg) for ra in asserts)
    for symbol, node in list(symbols.items()):
        if node.op == "call_method" and node.target == "item":
            facts.extend(_range_facts(shape_env, symbol))
    builder = _Builder(graph, symbols)
    added = 0
    seen: set[str] = set()
    for expr, msg in facts:
        key = str(expr)
        if key in seen or not expr.free_symbols <= symbols.keys():
            continue
        seen.add(key)
        try:
            condition = builder.build(expr)
        except _Untranslatable:
            continue  # NOTE: the ATen tracer (aotgrad) records the same fact from its trace
        text = f"data-dependent check failed: {expr}" + (f" ({msg})" if msg else "")
        node = builder.call(torch.ops.aten._assert_scalar.default, (condition, text), None)
        node.meta.setdefault("stack_trace", "")
        added += 1
    return added


def _bind_symbols(graph: torch.fx.Graph, shape_env: ShapeEnv) -> dict[Any, torch.fx.Node]:
    """Each unbacked symbol -> a node computing it: the `.item()` that read it, or a new
    `size(dim)` of the first tensor with that size. (Symbols of input sizes and ints are
    backed: their facts are guards, checked before the graph runs.)"""
    symbols: dict[Any, torch.fx.Node] = {}
    sizes: list[tuple[Any, torch.fx.Node, int]] = []
    backed = shape_env.backed_var_to_val
    for node in list(graph.nodes):
        value = node_meta.get_example_value(node) if node.op != "output" else None
        if isinstance(value, _SYMBOLIC):
            expr = value.node.expr
            if isinstance(expr, sympy.Symbol) and expr not in backed:
                symbols.setdefault(expr, node)
        elif isinstance(value, torch.Tensor):
            dims: tuple[object, ...] = tuple(value.shape)
            for dim, size in enumerate(dims):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol) \
                        and size.node.expr not in backed:
                    sizes.append((size.node.expr, node, dim))
    output = next((n for n in graph.nodes if n.op == "output"), None)
    for symbol, node, dim in sizes:
        if symbol in symbols:
            continue
        if output is None:
            size_node = graph.call_method("size", (node, dim))
        else:
            with graph.inserting_before(output):
                size_node = graph.call_method("size", (node, dim))
        node_meta.set_example_value(size_node, node_meta.get_example_value(node).shape[dim])
        symbols[symbol] = size_node
    return symbols


def _range_facts(shape_env: ShapeEnv, symbol: Any) -> list[tuple[Any, str]]:
    bounds = shape_env.var_to_range.get(symbol)
    if bounds is None or not symbol.is_integer:
        return []
    facts: list[tuple[Any, str]] = []
    if bounds.lower.is_finite and bounds.lower not in (int_oo, -int_oo):
        facts.append((symbol >= bounds.lower, "value range"))
    if bounds.upper.is_finite and bounds.upper not in (int_oo, -int_oo):
        facts.append((symbol <= bounds.upper, "value range"))
    return facts


class _Builder:
    """sympy expression -> FX nodes on Python numbers (operator functions), before output."""

    def __init__(self, graph: torch.fx.Graph, symbols: dict[Any, torch.fx.Node]) -> None:
        self.graph = graph
        self.symbols = symbols
        self.output = next((n for n in graph.nodes if n.op == "output"), None)

    def call(self, target: Any, args: tuple[Any, ...], example: Any) -> torch.fx.Node:
        if self.output is None:
            node = self.graph.call_function(target, args)
        else:
            with self.graph.inserting_before(self.output):
                node = self.graph.call_function(target, args)
        node_meta.set_example_value(node, example)
        return node

    def _apply(self, fn: Callable[..., Any], args: list[Any]) -> Any:
        examples = [node_meta.get_example_value(a) if isinstance(a, torch.fx.Node) else a
                    for a in args]
        if not any(isinstance(a, torch.fx.Node) for a in args):
            return fn(*examples)
        return self.call(fn, tuple(args), fn(*examples))

    def build(self, expr: Any) -> Any:
        if isinstance(expr, sympy.Symbol):
            return self.symbols[expr]
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if isinstance(expr, (sympy.Float, sympy.Rational)):
            return float(expr)
        if isinstance(expr, (sympy.Add, sympy.Mul, sympy.And, sympy.Or)):
            fn = {sympy.Add: operator.add, sympy.Mul: operator.mul,
                  sympy.And: operator.and_, sympy.Or: operator.or_}[type(expr)]
            result = self.build(expr.args[0])
            for arg in expr.args[1:]:
                result = self._apply(fn, [result, self.build(arg)])
            return result
        if isinstance(expr, sympy.Not):
            return self._apply(torch.sym_not, [self.build(expr.args[0])])
        if type(expr) in _COMPARISONS:
            left, right = (self.build(a) for a in expr.args)
            return self._apply(_COMPARISONS[type(expr)], [left, right])
        binary = _BINARY.get(type(expr).__name__)
        if binary is not None:
            result = self.build(expr.args[0])
            for arg in expr.args[1:]:  # Max/Min take any number of arguments
                result = self._apply(binary, [result, self.build(arg)])
            return result
        raise _Untranslatable(type(expr).__name__)
