"""Symbolic sizes in inductor: the graph's size symbols (capture's ShapeEnv symbols), read
from example values without guarding on them, their hints (the example's values) for the
choices that need a number, and printing size expressions as Python for the wrapper.

In: FakeTensors / SymInts of a graph traced for symbolic sizes. Out: ints or sympy
expressions over the size symbols (`Layout` sizes and strides, loop ranges, index
arithmetic), evaluated in the wrapper from the inputs' actual sizes.

A size symbol is always >= 2: capture specializes sizes 0 and 1, and the wrapper checks
it before running the kernels (`SymbolicInputs.check_source`), so that code comparing a
size with 1 structurally (`size == 1` is False for a symbol) is right for every size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.sizevars import Expr, FloorDiv, ModIndex, is_static

_hints: dict[sympy.Symbol, int] = {}


class SymbolicUnsupported(NotImplementedError):
    """A graph with symbolic sizes that the symbolic path cannot compile (it is compiled
    for each call's concrete sizes instead)."""


@contextlib.contextmanager
def size_hints(hints: Mapping[sympy.Symbol, int]) -> Iterator[None]:
    """Make `hints` (symbol -> the example's value) what `size_hint` answers with."""
    saved = dict(_hints)
    _hints.clear()
    _hints.update(hints)
    try:
        yield
    finally:
        _hints.clear()
        _hints.update(saved)


def size_hint(size: object) -> int:
    """The example's value of a size (for heuristics only: tiling, thresholds, ordering;
    never for a choice the generated code's correctness depends on)."""
    if isinstance(size, int):
        return size
    assert isinstance(size, sympy.Expr), size
    if size.is_Integer:
        return int(size)
    value = sympy.sympify(size.xreplace(_hints))
    if not value.is_Integer:
        value = sympy.sympify(value).doit()
    if not value.is_Integer:
        raise SymbolicUnsupported(f"no size hint for {size}")
    return int(value)


def hinted_max(sizes: Any, default: int = 1) -> int:
    """The largest hint of `sizes` (a heuristic's measure of an iterable of sizes)."""
    return max((size_hint(s) for s in sizes), default=default)


def _convert(expr: Expr) -> Expr:
    """A ShapeEnv expression with torch's integer functions as ours (FloorDiv, ModIndex)."""
    if expr.is_Integer or isinstance(expr, sympy.Symbol):
        return expr
    if isinstance(expr, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
        return expr.func(*(_convert(a) for a in expr.args))
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return sympy.Pow(_convert(expr.base), expr.exp)
    name = type(expr).__name__
    if name in ("Max", "Min"):  # NOTE: torch's own Max/Min (a slice's clamp, contiguous strides)
        return _clamp(name == "Max", [_convert(a) for a in expr.args])
    if name == "FloorDiv":
        return FloorDiv(_convert(expr.args[0]), _convert(expr.args[1]))
    if name in ("PythonMod", "Mod") and len(expr.args) == 2:
        return ModIndex(_convert(expr.args[0]), _convert(expr.args[1]))
    if name == "ModularIndexing":
        base, div, mod = (_convert(a) for a in expr.args)
        return ModIndex(FloorDiv(base, div), mod)
    raise SymbolicUnsupported(f"size expression {expr} ({name})")


def _clamp(largest: bool, args: list[Expr]) -> Expr:
    """`Max`/`Min` of `args`, without a constant that every other argument reaches for
    symbols >= 2: a contiguous stride `Max(1, s0)` is s0, `Min(1, s0)` is 1."""
    constants = [a for a in args if a.is_Integer]
    others = [a for a in args if not a.is_Integer]
    if len(constants) == 1 and others:
        lows = [_lower_bound(a) for a in others]
        if all(low is not None and low >= int(constants[0]) for low in lows):
            if not largest:
                return constants[0]
            args = others
    return sympy.Max(*args) if largest else sympy.Min(*args)


def _lower_bound(expr: Expr) -> int | None:
    """The least value of a size expression over symbols >= 2 (the symbolic code's domain:
    the wrapper sends smaller sizes elsewhere), when the expression is non-decreasing in
    each symbol (sums, products and floor divisions by positive constants); else None."""
    if expr.is_Integer:
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return 2 if is_size_symbol(expr) else None
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        lows = [_lower_bound(a) for a in expr.args]
        if any(low is None or low < 0 for low in lows):
            return None
        total = 0 if isinstance(expr, sympy.Add) else 1
        for low in lows:
            assert low is not None
            total = total + low if isinstance(expr, sympy.Add) else total * low
        return total
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
        low = _lower_bound(expr.args[0])
        return None if low is None else low // int(expr.args[1])
    return None


def sym_expr(value: object) -> Any:
    """An int, or the sympy expression of a SymInt over the size symbols (read without
    guarding); other values unchanged."""
    if isinstance(value, torch.SymInt):
        node = value.node
        expr = node.expr
        if expr.is_Integer:
            return int(expr)
        if getattr(node, "shape_env", None) is not None and any(
                str(s).startswith("u") for s in expr.free_symbols):
            raise SymbolicUnsupported(f"data-dependent size {expr}")
        return _convert(expr)
    if isinstance(value, (torch.SymFloat, torch.SymBool)):
        raise SymbolicUnsupported(f"symbolic {type(value).__name__} {value}")
    return value


def sym_sizes(values: Any) -> tuple[Any, ...]:
    """`sym_expr` of each size (a tensor's shape or stride)."""
    return tuple(sym_expr(v) for v in values)


def is_symbolic_value(value: object) -> bool:
    """Whether a tensor has a symbolic size, stride or offset, or a value is a SymInt."""
    if isinstance(value, torch.SymInt):
        return not is_static(value.node.expr)
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt)
                   for s in (*value.shape, *value.stride(), value.storage_offset()))
    return False


def hints_of(values: Any) -> dict[sympy.Symbol, int]:
    """Symbol -> hint for every size symbol of the example values."""
    hints: dict[sympy.Symbol, int] = {}

    def visit(v: object) -> None:
        node = getattr(v, "node", None)
        if isinstance(v, torch.SymInt) and node is not None:
            env = getattr(node, "shape_env", None)
            values = getattr(env, "backed_var_to_val", None)
            if values is None:
                values = getattr(env, "var_to_val", {})
            for s in node.expr.free_symbols:
                if s in values:
                    hints[s] = int(values[s])
        elif isinstance(v, torch.Tensor):
            for x in (*v.shape, *v.stride(), v.storage_offset()):
                visit(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)

    visit(values)
    return hints


def pyexpr(expr: object) -> str:
    """A size (int or expression over the size symbols) as Python source."""
    if isinstance(expr, int):
        return repr(expr)
    assert isinstance(expr, sympy.Expr), expr
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return str(expr.name)
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(pyexpr(a) for a in
                                sorted(expr.args, key=sympy.default_sort_key)) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + "*".join(pyexpr(a) for a in expr.args) + ")"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return "(" + "*".join([pyexpr(expr.base)] * int(expr.exp)) + ")"
    if isinstance(expr, FloorDiv):
        return f"({pyexpr(expr.args[0])} // {pyexpr(expr.args[1])})"
    if isinstance(expr, ModIndex):
        return f"({pyexpr(expr.args[0])} % {pyexpr(expr.args[1])})"
    if isinstance(expr, (sympy.Max, sympy.Min)):
        fn = "max" if isinstance(expr, sympy.Max) else "min"
        return f"{fn}({', '.join(pyexpr(a) for a in expr.args)})"
    raise SymbolicUnsupported(f"cannot print size expression {expr!r}")


def pysizes(sizes: Any) -> str:
    """A tuple of sizes as Python source (`(s0, 16)`)."""
    parts = [pyexpr(s) for s in sizes]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def size_symbols(*exprs: object) -> set[sympy.Symbol]:
    """The size symbols (capture's `s...` symbols) that `exprs` use."""
    out: set[sympy.Symbol] = set()
    for e in exprs:
        if isinstance(e, sympy.Expr):
            out.update(s for s in e.free_symbols if is_size_symbol(s))
        elif isinstance(e, (tuple, list)):
            out |= size_symbols(*e)
    return out


def is_size_symbol(sym: object) -> bool:
    """Whether a sympy symbol is one of the graph's size symbols (not a loop variable)."""
    return isinstance(sym, sympy.Symbol) and sym.name[:1] == "s" and sym.name[1:].isdigit()
