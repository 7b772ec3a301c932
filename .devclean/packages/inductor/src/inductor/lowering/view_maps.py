"""Index maps of views and their application: a view of a buffer becomes a new strided
layout when its index map is linear, else an inlined loader over the base (no copy).

Below the lowering rules and the graph walk (`context.realize` re-applies a view to a
realized base); `views.py` holds the rules that build the maps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.ir.layout import Layout, contiguous_strides, view_strides
from inductor.ir.nodes import BufferView, Pointwise, TensorValue
from inductor.ir.ops import Ref
from inductor.sizevars import (
    Expr,
    FloorDiv,
    ModIndex,
    index_symbol,
    is_static,
    linear_coefficients,
    simplify_index,
)
from inductor.symbols import sym_sizes

IndexMap = Callable[[Sequence[Expr]], list[Expr]]


def apply_view(x: TensorValue, new_size: Sequence[int], mapping: IndexMap) -> TensorValue:
    """`x` seen through `mapping` (view index -> index of `x`) with the size `new_size`."""
    new_size = sym_sizes(new_size)
    if isinstance(x, BufferView):
        syms: list[sympy.Symbol] = []
        idx: list[Expr] = []
        ranges: dict[sympy.Symbol, int] = {}
        for d, s in enumerate(new_size):
            if s == 1:
                idx.append(sympy.Integer(0))
            else:
                sym = index_symbol(f"v{d}")
                syms.append(sym)
                ranges[sym] = s
                idx.append(sym)
        reshape = getattr(mapping, "reshape", None)
        if reshape is not None and not all(is_static(s) for s in (
                *new_size, *x.layout.size, *x.layout.stride)):
            # NOTE: symbolic sizes: a reshape's strides by ATen's view rule (its index
            # arithmetic does not simplify over loops of unknown length)
            strides = view_strides(x.layout.size, x.layout.stride, new_size)
            if strides is not None and tuple(reshape[0]) == tuple(x.layout.size):
                return BufferView(x.buffer, Layout(new_size, strides,  # type: ignore[arg-type]
                                                   x.layout.offset, x.dtype, x.device))
        expr = simplify_index(sympy.expand(x.layout.index(mapping(idx))), ranges)
        lin = linear_coefficients(expr, syms)
        if lin is not None:
            coeffs, offset = lin
            it = iter(coeffs)
            default = contiguous_strides(new_size)
            strides = tuple(next(it) if s != 1 else default[d] for d, s in enumerate(new_size))
            lay = Layout(new_size, strides, offset, x.dtype, x.device)
            return BufferView(x.buffer, lay)
    src = x

    def inner(index: Sequence[Expr]) -> Ref:
        return src.load(mapping(index))

    return Pointwise(new_size, x.dtype, x.device, inner, view_of=(x, new_size, mapping))


def reshape_map(old: Sequence[int], new: Sequence[int]) -> IndexMap:
    """The index map of a row-major reshape from `old` to `new` (through the flat index)."""
    old_strides = contiguous_strides(old)
    new_strides = contiguous_strides(new)

    def mapping(idx: Sequence[Expr]) -> list[Expr]:
        flat: Expr = sympy.Integer(0)
        for i, st, sz in zip(idx, new_strides, new):
            if sz != 1:
                flat = flat + i * st
        result: list[Expr] = []
        for d, (st, sz) in enumerate(zip(old_strides, old)):
            if sz == 1:
                result.append(sympy.Integer(0))
                continue
            term: Expr = FloorDiv(flat, st) if st != 1 else flat
            if d > 0:
                term = ModIndex(term, sz)
            result.append(term)
        return result

    mapping.reshape = (tuple(old), tuple(new))  # type: ignore[attr-defined]  # see apply_view
    return mapping
