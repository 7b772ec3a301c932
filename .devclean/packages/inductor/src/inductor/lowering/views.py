"""View ops as index rewrites: a view of a buffer becomes a new strided layout when the
index map is linear, and an inlined loader (no copy) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.layout import Layout, view_strides
from inductor.ir.nodes import BufferView, Pointwise, TensorValue
from inductor.ir.ops import Ref, ops
from inductor.lowering.common import filled, normalize_dim, out_size
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.lowering.view_maps import apply_view, reshape_map
from inductor.sizevars import (
    Clamp,
    Expr,
    FloorDiv,
    ModIndex,
    is_static,
)
from inductor.symbols import size_hint, sym_sizes

aten = torch.ops.aten
prims = torch.ops.prims


@lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
          prims.reshape.default)
def _view(ctx: LoweringContext, x: TensorValue, size: Sequence[int]) -> TensorValue:
    new = out_size(ctx)
    if tuple(new) == tuple(x.size):
        return x
    if 0 in new or 0 in x.size:
        return Pointwise(tuple(new), x.dtype, x.device,
                         lambda idx: ops.constant(0, x.dtype))
    if isinstance(x, BufferView) and not all(
            is_static(s) for s in (*new, *x.layout.size, *x.layout.stride)):
        # NOTE: symbolic sizes: the flat index's FloorDiv/ModIndex do not simplify over a
        # loop of unknown length; ATen's view rule gives the strides directly.
        strides = view_strides(x.layout.size, x.layout.stride, new)
        if strides is not None:
            return BufferView(x.buffer, Layout(tuple(new), strides,  # type: ignore[arg-type]
                                               x.layout.offset, x.dtype, x.device))
    return apply_view(x, new, reshape_map(x.size, new))


@lowering(aten.permute.default, prims.transpose.default)
def _permute(ctx: LoweringContext, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    nd = len(x.size)
    dims = [normalize_dim(d, nd) for d in dims]
    inv = [0] * nd
    for i, d in enumerate(dims):
        inv[d] = i
    new = [x.size[d] for d in dims]
    return apply_view(x, new, lambda idx: [idx[inv[d]] for d in range(nd)])


@lowering(aten.transpose.int)
def _transpose(ctx: LoweringContext, x: TensorValue, a: int, b: int) -> TensorValue:
    nd = len(x.size)
    dims = list(range(nd))
    if nd:
        a, b = normalize_dim(a, nd), normalize_dim(b, nd)
        dims[a], dims[b] = dims[b], dims[a]
    return _permute(ctx, x, dims)


@lowering(aten.t.default)
def _t(ctx: LoweringContext, x: TensorValue) -> TensorValue:
    return _permute(ctx, x, list(reversed(range(len(x.size)))))


@lowering(aten.expand.default, prims.broadcast_in_dim.default)
def _expand(ctx: LoweringContext, x: TensorValue, size: Sequence[int], *rest: Any,
            **kwargs: Any) -> TensorValue:
    new = out_size(ctx)
    assert ctx.node is not None
    if ctx.node.target is prims.broadcast_in_dim.default:
        bdims = list(rest[0])

        def bmap(idx: Sequence[Expr]) -> list[Expr]:
            return [idx[d] if x.size[i] != 1 else sympy.Integer(0)
                    for i, d in enumerate(bdims)]

        return apply_view(x, new, bmap)
    lead = len(new) - len(x.size)

    def emap(idx: Sequence[Expr]) -> list[Expr]:
        return [sympy.Integer(0) if s == 1 else idx[lead + d] for d, s in enumerate(x.size)]

    return apply_view(x, new, emap)


@lowering(aten.unsqueeze.default)
def _unsqueeze(ctx: LoweringContext, x: TensorValue, dim: int) -> TensorValue:
    new = out_size(ctx)
    dim = normalize_dim(dim, len(new))
    return apply_view(x, new, lambda idx: [i for d, i in enumerate(idx) if d != dim])


@lowering(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, prims.squeeze.default)
def _squeeze(ctx: LoweringContext, x: TensorValue, dims: Any = None) -> TensorValue:
    nd = len(x.size)
    if dims is None:
        drop = {d for d in range(nd) if x.size[d] == 1}
    else:
        ds = [dims] if isinstance(dims, int) else list(dims)
        drop = {normalize_dim(d, nd) for d in ds if nd and x.size[normalize_dim(d, nd)] == 1}
    keep = [d for d in range(nd) if d not in drop]
    new = [x.size[d] for d in keep]

    def smap(idx: Sequence[Expr]) -> list[Expr]:
        it = iter(idx)
        return [sympy.Integer(0) if d in drop else next(it) for d in range(nd)]

    return apply_view(x, new, smap)


@lowering(aten.slice.Tensor)
def _slice(ctx: LoweringContext, x: TensorValue, dim: int = 0, start: Any = None,
           end: Any = None, step: int = 1) -> TensorValue:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    new = out_size(ctx)
    s = _slice_start(start, x.size[dim])

    def smap(idx: Sequence[Expr]) -> list[Expr]:
        out = list(idx)
        out[dim] = idx[dim] * step + s
        return out

    return apply_view(x, new, smap)


def _slice_start(start: Any, size: Any) -> Any:
    """A slice bound as an index: a negative bound counts from the end, and the bound is
    clamped to [0, size]. For a symbolic bound or size (an int argument, `x[:, -n:]`) the
    example's values decide each of those steps: tracing the slice on fakes took the same
    decisions in the ShapeEnv, whose guards keep every call on the example's side of them
    (`x[:, -n:]` guards n >= 0 and n <= size)."""
    if start is None:
        return 0
    if isinstance(start, int) and isinstance(size, int):
        s = start + size if start < 0 else start
        return min(max(s, 0), size)
    s = start + size if size_hint(start) < 0 else start
    if size_hint(s) < 0:
        return 0
    if size_hint(s) > size_hint(size):
        return size
    return s


@lowering(aten.select.int)
def _select(ctx: LoweringContext, x: TensorValue, dim: int, index: int) -> TensorValue:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    if index < 0:
        index += x.size[dim]
    new = out_size(ctx)

    def smap(idx: Sequence[Expr]) -> list[Expr]:
        out = list(idx)
        out.insert(dim, sympy.Integer(index))
        return out

    return apply_view(x, new, smap)


@lowering(aten.as_strided.default)
def _as_strided(ctx: LoweringContext, x: TensorValue, size: Sequence[int],
                stride: Sequence[int], storage_offset: int | None = None) -> Any:
    if not isinstance(x, BufferView):
        x = ctx.realize(x)
    base = x.buffer.layout
    off = x.layout.offset if storage_offset is None else int(storage_offset)
    if not (base.is_contiguous() or storage_offset is None):
        return NotImplemented
    lay = Layout(sym_sizes(size), sym_sizes(stride), off,
                 x.dtype, x.device)
    return BufferView(x.buffer, lay)


_CAT_EXTERN_PARTS = 3
_CAT_EXTERN_NUMEL = 32768


@lowering(aten.cat.default, prims.cat.default)
def _cat(ctx: LoweringContext, tensors: Sequence[Any], dim: int = 0) -> Any:
    new = out_size(ctx)
    dim = normalize_dim(dim, len(new))
    # NOTE: a part with no elements along `dim` (or a legacy 1-D empty tensor) contributes
    # nothing: kept, its load (clamped to index 0 of an empty buffer) would read outside it
    parts = [t for t in tensors if not (
        (len(t.size) == 1 and t.size[0] == 0)
        or (len(t.size) == len(new) and is_static(t.size[dim]) and int(t.size[dim]) == 0))]
    innermost = dim == len(new) - 1 and len(parts) <= 7  # codegen splits at <= 6 cuts
    if len(parts) > 8 or (len(parts) >= _CAT_EXTERN_PARTS and not innermost
                          and math.prod(new) >= _CAT_EXTERN_NUMEL):
        # NOTE: the select chain loads every part at every element (gathers when a part is
        # a permuted view); with many parts over a large output ATen's copy per part wins.
        # Along the innermost dim the C++ loop is split per part (`_clamp_pieces`), each
        # piece loading only its own part, and the parts' producers fuse into the cat.
        return NotImplemented
    if not parts:
        return filled(ctx, 0)
    dtype = ctx.node.meta["example_value"].dtype if ctx.node is not None else parts[0].dtype
    offsets = []
    acc = 0
    for t in parts:
        offsets.append(acc)
        acc += t.size[dim]

    def inner(idx: Sequence[Expr]) -> Ref:
        value: Ref | None = None
        for t, off in reversed(list(zip(parts, offsets))):
            sub = list(idx)
            sub[dim] = Clamp(idx[dim] - off, 0, _last(t.size[dim]))
            v = ops.to_dtype(t.load(sub), dtype)
            if value is None:
                value = v
            else:
                cond = ops.lt(ops.index_expr(idx[dim], torch.int64),
                              ops.constant(offsets[parts.index(t) + 1], torch.int64))
                value = ops.where(cond, v, value)
        assert value is not None
        return value

    return Pointwise(tuple(new), dtype, parts[0].device, inner)


@lowering(aten.constant_pad_nd.default)
def _pad(ctx: LoweringContext, x: TensorValue, pad: Sequence[int], value: float = 0) -> Any:
    new = out_size(ctx)
    nd = len(x.size)
    pads = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        pads[nd - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        return NotImplemented
    src = x

    def inner(idx: Sequence[Expr]) -> Ref:
        sub: list[Expr] = []
        conds: list[Ref] = []
        for d, (lo, _) in enumerate(pads):
            if pads[d] == (0, 0):
                sub.append(idx[d])
                continue
            shifted = idx[d] - lo
            sub.append(Clamp(shifted, 0, _last(src.size[d])))
            i = ops.index_expr(idx[d], torch.int64)
            conds.append(ops.logical_and(
                ops.ge(i, ops.constant(lo, torch.int64)),
                ops.lt(i, ops.constant(lo + src.size[d], torch.int64))))
        v = src.load(sub)
        if not conds:
            return v
        c = conds[0]
        for other in conds[1:]:
            c = ops.logical_and(c, other)
        return ops.where(c, v, ops.constant(value, v.dtype))

    return Pointwise(tuple(new), x.dtype, x.device, inner)


@lowering(aten.flip.default)
def _flip(ctx: LoweringContext, x: TensorValue, dims: Sequence[int]) -> Any:
    """An index reversal along `dims`, fused into its neighbours (cumsum's backward is a
    flip, a cumsum and a flip: two extern copies before)."""
    nd = len(x.size)
    flipped = {normalize_dim(int(d), nd) for d in dims}
    src = x

    def inner(idx: Sequence[Expr]) -> Ref:
        return src.load([_last(src.size[d]) - idx[d] if d in flipped else idx[d]
                         for d in range(nd)])

    return Pointwise(tuple(x.size), x.dtype, x.device, inner)


@lowering(aten.split_with_sizes.default, aten.split.Tensor)
def _split(ctx: LoweringContext, x: TensorValue, sizes: Any, dim: int = 0) -> Any:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    total = x.size[dim]
    if isinstance(sizes, int):
        step = max(sizes, 1)
        sizes = [min(step, total - s) for s in range(0, total, step)] or [0]
    parts = []
    start = 0
    for size in sizes:
        new = list(x.size)
        new[dim] = size

        def smap(idx: Sequence[Expr], start: int = start) -> list[Expr]:
            out = list(idx)
            out[dim] = idx[dim] + start
            return out

        parts.append(apply_view(x, new, smap))
        start += size
    return parts


@lowering(aten.unbind.int)
def _unbind(ctx: LoweringContext, x: TensorValue, dim: int = 0) -> Any:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    new = [s for d, s in enumerate(x.size) if d != dim]
    parts = []
    for i in range(x.size[dim]):
        def smap(idx: Sequence[Expr], i: int = i) -> list[Expr]:
            out = list(idx)
            out.insert(dim, sympy.Integer(i))
            return out

        parts.append(apply_view(x, new, smap))
    return parts


@lowering(aten.slice_scatter.default)
def _slice_scatter(ctx: LoweringContext, base: TensorValue, src: TensorValue, dim: int = 0,
                   start: Any = None, end: Any = None, step: int = 1) -> Any:
    nd = len(base.size)
    dim = normalize_dim(dim, nd)
    size = base.size[dim]
    n = src.size[dim] if nd else 1
    if all(isinstance(v, (int, type(None))) for v in (start, end, size, n)):
        s = 0 if start is None else int(start)
        e = size if end is None else int(end)
        s = min(max(s + size if s < 0 else s, 0), size)
        e = min(max(e + size if e < 0 else e, s), size)
        last: Expr = sympy.Integer(max(n - 1, 0))
    else:
        # NOTE: symbolic bounds (`x[:, n:]`'s backward): within [0, size] as the trace's
        # slice found them, which the guards keep (`_slice_start`)
        s = _slice_start(start, size)
        e = size if end is None else _slice_start(end, size)
        last = sympy.Max(sympy.sympify(n) - 1, 0)
    dtype = base.dtype

    def bound(v: Any) -> Ref:
        return ops.constant(v, torch.int64) if isinstance(v, int) else ops.index_expr(
            sympy.sympify(v), torch.int64)

    def inner(idx: Sequence[Expr]) -> Ref:
        i = idx[dim]
        sub = list(idx)
        sub[dim] = Clamp(FloorDiv(i - s, step) if step != 1 else i - s, 0, last)
        iv = ops.index_expr(i, torch.int64)
        cond = ops.logical_and(ops.ge(iv, bound(s)), ops.lt(iv, bound(e)))
        if step != 1:
            rem = ops.index_expr(ModIndex(i - s + step * size, step), torch.int64)
            cond = ops.logical_and(cond, ops.eq(rem, ops.constant(0, torch.int64)))
        return ops.where(cond, ops.to_dtype(src.load(sub), dtype), base.load(list(idx)))

    return Pointwise(tuple(base.size), dtype, base.device, inner)


@lowering(aten.select_scatter.default)
def _select_scatter(ctx: LoweringContext, base: TensorValue, src: TensorValue, dim: int,
                    index: int) -> Any:
    nd = len(base.size)
    dim = normalize_dim(dim, nd)
    if index < 0:
        index += base.size[dim]
    dtype = base.dtype

    def inner(idx: Sequence[Expr]) -> Ref:
        sub = [v for d, v in enumerate(idx) if d != dim]
        cond = ops.eq(ops.index_expr(idx[dim], torch.int64), ops.constant(index, torch.int64))
        return ops.where(cond, ops.to_dtype(src.load(sub), dtype), base.load(list(idx)))

    return Pointwise(tuple(base.size), dtype, base.device, inner)


def _last(size: Any) -> Any:
    """The last index of a dim (0 for an empty one; a symbolic size is >= 1 where a kernel
    reads it)."""
    return max(size - 1, 0) if is_static(size) else size - 1
