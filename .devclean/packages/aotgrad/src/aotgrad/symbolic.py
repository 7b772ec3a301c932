"""Data-dependent Python numbers computed from `.item()` results, recorded as ATen ops.

`x.narrow(0, start_tensor, 2)` reads `u0 = start.item()` and slices at a sympy expression of
u0 (the index wrapped when negative). The tracer binds each `.item()` result to its node; an
expression over such symbols is rebuilt here from ATen ops on the 0-d tensors they were read
from, then read back with `aten._local_scalar_dense`, so the graph computes it at run time.

IR in: a sympy expression and the `_local_scalar_dense` nodes of its free symbols.
IR out: nodes appended to the tracer's graph; the last one is the value's node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sympy  # type: ignore[import-untyped]  # sympy ships no type information
import torch
from torch import fx

__all__ = ["UnsupportedExpression", "condition_node", "expression_node"]

aten = torch.ops.aten

Emit = Callable[[Any, tuple[Any, ...], dict[str, Any]], fx.Node]

_COMPARISONS: dict[type, Any] = {
    sympy.Eq: aten.eq.Tensor,
    sympy.Ne: aten.ne.Tensor,
    sympy.StrictLessThan: aten.lt.Tensor,
    sympy.LessThan: aten.le.Tensor,
    sympy.StrictGreaterThan: aten.gt.Tensor,
    sympy.GreaterThan: aten.ge.Tensor,
}


# torch's sympy functions (torch.utils._sympy.functions) by class name: `int(x.item())` is
# TruncToInt, `float(n)` ToFloat, `n // 2` FloorDiv, `n % 2` PythonMod, `n / 2` *TrueDiv.
_TO_INT64 = (aten._to_copy.default, {"dtype": torch.int64})
_TO_FLOAT64 = (aten._to_copy.default, {"dtype": torch.float64})
_UNARY: dict[str, list[tuple[Any, dict[str, Any]]]] = {
    "TruncToInt": [(aten.trunc.default, {}), _TO_INT64],
    "FloorToInt": [(aten.floor.default, {}), _TO_INT64],
    "CeilToInt": [(aten.ceil.default, {}), _TO_INT64],
    "ToFloat": [_TO_FLOAT64],
}
_BINARY: dict[str, tuple[Any, dict[str, Any]]] = {
    "FloorDiv": (aten.div.Tensor_mode, {"rounding_mode": "floor"}),
    "PythonMod": (aten.remainder.Tensor, {}),
    "Mod": (aten.remainder.Tensor, {}),
    "IntTrueDiv": (aten.div.Tensor, {}),
    "FloatTrueDiv": (aten.div.Tensor, {}),
    "Max": (aten.maximum.default, {}),
    "Min": (aten.minimum.default, {}),
}


class UnsupportedExpression(Exception):
    """The expression uses a construct this translation does not cover."""


class _Builder:
    def __init__(self, symbols: Mapping[str, fx.Node], emit: Emit) -> None:
        self.symbols = symbols
        self.emit = emit

    def tensor(self, value: Any) -> Any:
        """A node, or a Python number for constant sub-expressions."""
        if isinstance(value, sympy.Symbol):
            node = self.symbols.get(str(value))
            if node is None:
                raise UnsupportedExpression(f"unbound symbol {value}")
            if node.target is aten._local_scalar_dense.default:
                source = node.args[0]  # the tensor `.item()` read
                assert isinstance(source, fx.Node)
                return source
            # A size read with `aten.sym_size.int`: a Python int, made a 0-d tensor.
            return self.emit(aten.scalar_tensor.default, (node,), {"dtype": torch.int64})
        if isinstance(value, (sympy.Integer, sympy.Float, sympy.Rational)):
            return int(value) if value.is_integer else float(value)
        if value is sympy.true:
            return True
        if value is sympy.false:
            return False
        if isinstance(value, sympy.Add):
            return self._fold(aten.add.Tensor, value.args)
        if isinstance(value, sympy.Mul):
            return self._fold(aten.mul.Tensor, value.args)
        if isinstance(value, sympy.And):
            return self._fold(aten.logical_and.default, value.args)
        if isinstance(value, sympy.Or):
            return self._fold(aten.logical_or.default, value.args)
        if isinstance(value, sympy.Not):
            return self.emit(aten.logical_not.default, (self._as_node(value.args[0]),), {})
        if type(value) in _COMPARISONS:
            left, right = (self._as_node(a) for a in value.args)
            return self.emit(_COMPARISONS[type(value)], (left, right), {})
        if isinstance(value, sympy.Piecewise):
            return self._piecewise(list(value.args))
        name = type(value).__name__
        if name in _UNARY:
            node = self._as_node(value.args[0])
            for target, kwargs in _UNARY[name]:
                node = self.emit(target, (node,), dict(kwargs))
            return node
        if name in _BINARY:
            target, kwargs = _BINARY[name]
            result = self._as_node(value.args[0])
            for arg in value.args[1:]:  # Max/Min take any number of arguments
                result = self.emit(target, (result, self._as_node(arg)), dict(kwargs))
            return result
        raise UnsupportedExpression(f"{type(value).__name__} in {value}")

    def _as_node(self, value: Any) -> fx.Node:
        built = self.tensor(value)
        if isinstance(built, fx.Node):
            return built
        dtype = torch.bool if isinstance(built, bool) else (
            torch.int64 if isinstance(built, int) else torch.float64)
        return self.emit(aten.scalar_tensor.default, (built,), {"dtype": dtype})

    def _fold(self, op: Any, args: tuple[Any, ...]) -> Any:
        built = [self.tensor(a) for a in args]
        nodes = [b for b in built if isinstance(b, fx.Node)]
        constants = [b for b in built if not isinstance(b, fx.Node)]
        if not nodes:
            raise UnsupportedExpression("constant sub-expression")
        result = nodes[0]
        for other in [*nodes[1:], *constants]:
            result = self.emit(op, (result, other), {})
        return result

    def _piecewise(self, pieces: list[tuple[Any, Any]]) -> fx.Node:
        value, condition = pieces[0]
        if condition is sympy.true or len(pieces) == 1:
            return self._as_node(value)
        rest = self._piecewise(pieces[1:])
        return self.emit(aten.where.self,
                         (self._as_node(condition), self._as_node(value), rest), {})


def expression_node(expr: Any, symbols: Mapping[str, fx.Node], emit: Emit) -> fx.Node:
    """A node computing `expr` (over `.item()` symbols) as a Python number at run time."""
    built = _Builder(symbols, emit)._as_node(expr)
    return emit(aten._local_scalar_dense.default, (built,), {})


def condition_node(expr: Any, symbols: Mapping[str, fx.Node], emit: Emit) -> fx.Node:
    """A 0-d bool tensor node computing the condition `expr` at run time (for asserts)."""
    return _Builder(symbols, emit)._as_node(expr)
