"""Splitting the innermost loop of a kernel by the divisor of its merged dims.

A view that merges permuted dims (`x.transpose(1, 2).reshape(b, s, h * d)`, the attention
heads put back together; cat of such parts) loads at `FloorDiv(x + c, d)` and
`ModIndex(x + c, d)` of the innermost loop variable `x`: one division per element, and a
gather the compiler cannot vectorize. Written as `x = d * xh + xj` with `xj` in `[0, d)`,
those become `xh + c / d` and `xj`: contiguous loads in a vectorized `xj` loop.
"""

from __future__ import annotations

from collections.abc import Iterable

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.sizevars import FloorDiv, ModIndex

__all__ = ["MIN_DIVISOR", "fold_divisor", "split_divisor", "split_symbols"]

# NOTE: below this the inner loop is too short to vectorize well.
MIN_DIVISOR = 8


def split_symbols(sym: sympy.Symbol) -> tuple[sympy.Symbol, sympy.Symbol]:
    """The (outer, inner) loop variables that replace `sym`."""
    return (sympy.Symbol(f"{sym.name}h", integer=True),
            sympy.Symbol(f"{sym.name}j", integer=True))


def split_divisor(indices: Iterable[sympy.Expr], sym: sympy.Symbol, start: int,
                  end: int) -> int | None:
    """The divisor `d` when every FloorDiv/ModIndex of `sym` in `indices` is of `sym + c` by
    the same `d`, with `c`, `start` and `end` multiples of `d`; else None (no split)."""
    found: int | None = None
    for expr in indices:
        for atom in expr.atoms(FloorDiv, ModIndex):
            base, divisor = atom.args
            if sym not in base.free_symbols:
                continue
            off = base - sym
            if not (off.is_Integer and divisor.is_Integer):
                return None
            d = int(divisor)
            if (found is not None and d != found) or int(off) % d:
                return None
            found = d
    if found is None or found < MIN_DIVISOR or start % found or end % found:
        return None
    return found


def fold_divisor(expr: sympy.Expr, sym: sympy.Symbol, d: int) -> sympy.Expr:
    """`expr` with `FloorDiv(sym + c, d)` -> `symh + c / d` and `ModIndex(sym + c, d)` ->
    `symj` (valid under `split_divisor`'s conditions)."""
    if not expr.has(FloorDiv, ModIndex):
        return expr
    outer, inner = split_symbols(sym)

    def fold(atom: sympy.Expr) -> sympy.Expr:
        base, divisor = atom.args
        off = base - sym
        if sym not in base.free_symbols or not off.is_Integer or divisor != d:
            return atom
        if isinstance(atom, FloorDiv):
            return outer + int(off) // d
        return inner

    return expr.replace(lambda e: isinstance(e, (FloorDiv, ModIndex)), fold)
