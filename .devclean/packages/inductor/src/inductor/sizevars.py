"""Index arithmetic over sympy: the integer functions the loop IR uses, range-aware
simplification, and printing to C++.

In: sympy expressions built by lowering (sums of loop variables times strides, with
`FloorDiv`/`ModIndex` from reshapes). Out: simplified expressions and C++ strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeAlias

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

Expr: TypeAlias = sympy.Expr


class FloorDiv(sympy.Function):  # type: ignore[misc]  # NOTE: sympy is untyped
    """`floor(base / divisor)` for integer operands (divisor > 0)."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, base: Expr, divisor: Expr) -> Expr | None:
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        return None


class ModIndex(sympy.Function):  # type: ignore[misc]  # NOTE: sympy is untyped
    """`base mod divisor` (Python semantics) for integer operands (divisor > 0)."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, base: Expr, divisor: Expr) -> Expr | None:
        if divisor == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) % int(divisor))
        return None


class Clamp(sympy.Function):  # type: ignore[misc]  # NOTE: sympy is untyped
    """`min(max(x, lo), hi)`: keeps indices of masked-out loads in bounds."""

    is_integer = True
    nargs = 3

    @classmethod
    def eval(cls, x: Expr, lo: Expr, hi: Expr) -> Expr | None:
        if x.is_Integer and lo.is_Integer and hi.is_Integer:
            return sympy.Integer(min(max(int(x), int(lo)), int(hi)))
        return None


def index_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def bounds(expr: Expr, ranges: Mapping[sympy.Symbol, int]) -> tuple[int, int] | None:
    """Inclusive integer bounds of `expr`, or None when unknown (a loop over a symbolic
    size: its bound holds for one size only, so it is never used)."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if isinstance(expr, sympy.Symbol):
        size = ranges.get(expr)
        if size is None or not is_static(size):
            return None
        return 0, max(int(size) - 1, 0)
    if isinstance(expr, sympy.Add):
        lo = hi = 0
        for term in expr.args:
            b = bounds(term, ranges)
            if b is None:
                return None
            lo += b[0]
            hi += b[1]
        return lo, hi
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if not coeff.is_Integer:
            return None
        b = bounds(rest, ranges)
        if b is None:
            return None
        c = int(coeff)
        return (c * b[0], c * b[1]) if c >= 0 else (c * b[1], c * b[0])
    if isinstance(expr, FloorDiv):
        b = bounds(expr.args[0], ranges)
        d = expr.args[1]
        if b is None or not d.is_Integer:
            return None
        return b[0] // int(d), b[1] // int(d)
    if isinstance(expr, ModIndex):
        d = expr.args[1]
        if not d.is_Integer:
            return None
        b = bounds(expr.args[0], ranges)
        if b is not None and b[0] >= 0 and b[1] < int(d):
            return b
        return 0, int(d) - 1
    if isinstance(expr, Clamp):
        lo, hi = expr.args[1], expr.args[2]
        if lo.is_Integer and hi.is_Integer:
            return int(lo), int(hi)
    return None


def _split_divisible(expr: Expr, d: int) -> tuple[Expr, Expr]:
    """Split `expr` into (terms whose integer coefficient is divisible by d, the rest)."""
    divisible: list[Expr] = []
    rest: list[Expr] = []
    for term in sympy.Add.make_args(expr):
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % d == 0:
            divisible.append(term)
        else:
            rest.append(term)
    return sympy.Add(*divisible), sympy.Add(*rest)


def _gcd_split(base: Expr, d: int,
               ranges: Mapping[sympy.Symbol, int]) -> tuple[Expr, Expr, int] | None:
    """Write base = big + small with g = gcd(coefficients of big, d) and 0 <= small < g."""
    terms = list(sympy.Add.make_args(base))
    keyed: list[tuple[int, Expr]] = []
    for term in terms:
        coeff, _ = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return None
        keyed.append((abs(int(coeff)), term))
    keyed.sort(key=lambda kv: kv[0])
    for cut in range(len(keyed), -1, -1):
        small = sympy.Add(*[t for _, t in keyed[:cut]])
        big_terms = [t for _, t in keyed[cut:]]
        g = d
        for c, _ in keyed[cut:]:
            g = math.gcd(g, c)
        if g <= 1 and big_terms:
            continue
        sb = bounds(small, ranges)
        if sb is not None and sb[0] >= 0 and sb[1] < g:
            return sympy.Add(*big_terms), small, g
    return None


def _combine_div_mod(expr: Expr) -> Expr:
    """a*FloorDiv(X, m) + (a/m)*ModIndex(X, m) -> (a/m)*X."""
    if not isinstance(expr, sympy.Add):
        return expr
    divs: dict[tuple[Expr, Expr], tuple[int, Expr]] = {}
    mods: dict[tuple[Expr, Expr], tuple[int, Expr]] = {}
    for term in expr.args:
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Integer:
            continue
        if isinstance(rest, FloorDiv):
            divs[(rest.args[0], rest.args[1])] = (int(coeff), term)
        elif isinstance(rest, ModIndex):
            mods[(rest.args[0], rest.args[1])] = (int(coeff), term)
    result = expr
    for key, (a, dterm) in divs.items():
        if key in mods:
            b, mterm = mods[key]
            if a == b * int(key[1]):
                result = result - dterm - mterm + b * key[0]
    return sympy.expand(result) if result is not expr else expr


def simplify_index(expr: Expr, ranges: Mapping[sympy.Symbol, int]) -> Expr:
    """Simplify FloorDiv/ModIndex using the ranges of the loop variables."""
    if not expr.has(FloorDiv, ModIndex, Clamp):
        return expr
    if isinstance(expr, sympy.Add):
        return _combine_div_mod(sympy.Add(*(simplify_index(a, ranges) for a in expr.args)))
    if isinstance(expr, sympy.Mul):
        return sympy.expand(sympy.Mul(*(simplify_index(a, ranges) for a in expr.args)))
    if isinstance(expr, FloorDiv):
        base = simplify_index(expr.args[0], ranges)
        d = expr.args[1]
        if not d.is_Integer:
            return FloorDiv(base, d)
        dv = int(d)
        split = _gcd_split(base, dv, ranges)
        if split is not None:
            big, _, g = split
            base = sympy.expand(big / g)
            dv //= g
            if dv == 1:
                return base
        div, rest = _split_divisible(base, dv)
        rb = bounds(rest, ranges)
        if rb is not None and rb[0] >= 0:
            quotient = sympy.expand(div / dv)
            if rb[1] < dv:
                return quotient
            return quotient + FloorDiv(rest, dv)
        return FloorDiv(base, dv)
    if isinstance(expr, ModIndex):
        base = simplify_index(expr.args[0], ranges)
        d = expr.args[1]
        if not d.is_Integer:
            return ModIndex(base, d)
        dv = int(d)
        split = _gcd_split(base, dv, ranges)
        scale, extra = 1, sympy.Integer(0)
        if split is not None:
            big, extra, g = split
            base = sympy.expand(big / g)
            dv //= g
            scale = g
        _, rest = _split_divisible(base, dv)
        rb = bounds(rest, ranges)
        if rb is not None and rb[0] >= 0 and rb[1] < dv:
            inner: Expr = rest
        elif rb is not None and rb[0] >= 0:
            inner = ModIndex(rest, dv)
        else:
            inner = ModIndex(base, dv)
        return sympy.expand(scale * inner + extra)
    if isinstance(expr, Clamp):
        x = simplify_index(expr.args[0], ranges)
        lo, hi = expr.args[1], expr.args[2]
        xb = bounds(x, ranges)
        if (xb is not None and lo.is_Integer and hi.is_Integer
                and xb[0] >= int(lo) and xb[1] <= int(hi)):
            return x
        return Clamp(x, lo, hi)
    return expr


def linear_coefficients(
    expr: Expr, symbols: list[sympy.Symbol]
) -> tuple[list[int], int] | None:
    """(coefficient per symbol, constant) when `expr` is integer-linear in `symbols`."""
    expr = sympy.expand(expr)
    if expr.has(FloorDiv, ModIndex, Clamp):
        return None
    coeffs: list[int] = []
    for s in symbols:
        c = expr.coeff(s)
        if not _size_constant(c, symbols):
            return None
        coeffs.append(int(c) if c.is_Integer else c)
    const = expr.subs({s: 0 for s in symbols})
    if not _size_constant(const, symbols) or sympy.expand(
            const + sum(c * s for c, s in zip(coeffs, symbols)) - expr) != 0:
        return None
    return coeffs, int(const) if const.is_Integer else const


def _size_constant(c: Expr, symbols: list[sympy.Symbol]) -> bool:
    """An integer, or a polynomial over the graph's size symbols (`s0*32`): constant in
    the loops (`symbols`)."""
    if c.is_Integer:
        return True
    if c.free_symbols & set(symbols) or not c.free_symbols:
        return False
    return all(s.name[:1] == "s" and s.name[1:].isdigit() for s in c.free_symbols) and (
        c.is_polynomial(*c.free_symbols) and all(
            k.is_Integer for k in sympy.Poly(c, *c.free_symbols).coeffs()))


def _int_literal(v: int) -> str:
    return str(v) if -(2**31) < v < 2**31 else f"{v}LL"


def cexpr(expr: Expr) -> str:
    """Print an index expression as C++ (int64_t arithmetic, non-negative operands)."""
    if expr.is_Integer:
        return _int_literal(int(expr))
    if isinstance(expr, sympy.Symbol):
        return str(expr.name)
    if isinstance(expr, sympy.Add):
        parts = [cexpr(a) for a in sorted(expr.args, key=sympy.default_sort_key)]
        return "(" + " + ".join(parts) + ")" if len(parts) > 1 else parts[0]
    if isinstance(expr, sympy.Mul):
        return "*".join(_cfactor(a) for a in expr.args)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return "*".join([_cfactor(expr.base)] * int(expr.exp))
    if isinstance(expr, FloorDiv):
        return f"ind_floordiv({cexpr(expr.args[0])}, {cexpr(expr.args[1])})"
    if isinstance(expr, ModIndex):
        return f"ind_mod({cexpr(expr.args[0])}, {cexpr(expr.args[1])})"
    if isinstance(expr, Clamp):
        a = [cexpr(x) for x in expr.args]
        return f"ind_clamp({a[0]}, {a[1]}, {a[2]})"
    if isinstance(expr, sympy.Max):
        return f"std::max<int64_t>({cexpr(expr.args[0])}, {cexpr(sympy.Max(*expr.args[1:]))})"
    if isinstance(expr, sympy.Min):
        return f"std::min<int64_t>({cexpr(expr.args[0])}, {cexpr(sympy.Min(*expr.args[1:]))})"
    raise NotImplementedError(f"cannot print index expression {expr!r}")


def _cfactor(expr: Expr) -> str:
    s = cexpr(expr)
    return s if isinstance(expr, (sympy.Symbol, sympy.Integer)) else f"({s})"


def is_static(size: object) -> bool:
    """Whether a size is a number (an int or a sympy integer), not an expression over the
    graph's size symbols."""
    return isinstance(size, int) or (isinstance(size, sympy.Expr) and bool(size.is_Integer))
