"""Lowering rules for reductions (sum, mean, amax/amin, argmax/argmin, prod, var, any/all).

Every reduction is realized into a ComputedBuffer whose body reads its (inlined) pointwise
prologue; the scheduler later fuses reductions over the same rows with their epilogues.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.codegen.cascade import CASCADE_MIN
from inductor.ir.layout import Layout, contiguous_strides
from inductor.ir.loop_body import record_reduction
from inductor.ir.nodes import BufferView, ComputedBuffer, TensorValue
from inductor.ir.ops import Ref, compute_dtype, ops
from inductor.lowering.common import normalize_dims, out_meta
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.lowering.view_maps import apply_view, reshape_map
from inductor.sizevars import Expr, is_static
from inductor.symbols import SymbolicUnsupported, size_hint, sym_sizes

aten = torch.ops.aten
prims = torch.ops.prims

Post = Callable[[Ref], Ref]


def reduce(
    ctx: LoweringContext,
    x: TensorValue,
    dims: Sequence[int],
    kind: str,
    out_dtype: torch.dtype,
    *,
    keepdim: bool,
    layout: Layout | None = None,
    value_fn: Callable[[Ref, list[Expr]], Ref] | None = None,
    post: Post | None = None,
    acc_dtype: torch.dtype | None = None,
) -> BufferView:
    """Reduce `x` over `dims`; `value_fn(v, kept_index)` maps each loaded value first."""
    nd = len(x.size)
    dims = sorted(d for d in dims if d < nd)
    kept = [d for d in range(nd) if d not in dims]
    if keepdim:
        out_size = tuple(1 if d in dims else x.size[d] for d in range(nd))
    else:
        out_size = tuple(x.size[d] for d in kept)
    reduce_sizes = [x.size[d] for d in dims]
    if layout is None:
        layout = Layout.contiguous(out_size, out_dtype, x.device)
    if layout.numel() == 0:
        return ctx.empty(layout)
    name = ctx.new_name()
    buf = ComputedBuffer(name, layout, None, ctx.node.name if ctx.node else "")
    ctx.register(buf)
    acc = compute_dtype(acc_dtype or (out_dtype if kind not in ("argmax", "argmin")
                                      else x.dtype))
    rstrides = contiguous_strides(reduce_sizes)

    def body(idx: list[Expr], ridx: list[Expr]) -> None:
        full: list[Expr] = [sympy.Integer(0)] * nd
        kept_idx = [idx[d] for d in range(nd) if d not in dims] if keepdim else list(idx)
        for d, i in zip(kept, kept_idx):
            full[d] = i
        for d, r in zip(dims, ridx):
            full[d] = r
        v = x.load(full)
        if value_fn is not None:
            v = value_fn(v, kept_idx)
        if kind in ("any", "all"):
            v = ops.to_dtype(v, torch.bool)
        else:
            v = ops.to_dtype(v, acc)
        if kind in ("argmax", "argmin"):
            lin: Expr = sympy.Integer(0)
            for r, st in zip(ridx, rstrides):
                lin = lin + r * st
            result = ops.reduction(kind, v, ops.index_expr(lin, torch.int64))
        else:
            result = ops.reduction(kind, v)
        if post is not None:
            result = post(result)
        ops.store_reduction(name, layout.index(idx), result)

    buf.body = record_reduction(out_size, reduce_sizes, body, ctx.buffer_dtype)
    ctx.kernels.append(buf)
    return BufferView(buf, layout)


def _node_layout(ctx: LoweringContext, item: int | None = None) -> Layout:
    meta = out_meta(ctx, item)
    return ctx.node_layout(meta, sym_sizes(meta.shape), meta.dtype, meta.device)


@lowering(prims.sum.default)
def _prims_sum(ctx: LoweringContext, x: TensorValue, dims: Any,
               output_dtype: Any = None) -> BufferView:
    return _sum(ctx, x, dims)


@lowering(prims.var.default)
def _prims_var(ctx: LoweringContext, x: TensorValue, dims: Any, correction: Any = 1,
               output_dtype: Any = None) -> Any:
    return _var_lower(ctx, x, dims, correction=correction)


@lowering(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False,
         *, dtype: Any = None, **kwargs: Any) -> BufferView:
    meta = out_meta(ctx)
    nd = len(x.size)
    ds = normalize_dims(dims, nd)
    kind = "any" if meta.dtype == torch.bool else "sum"
    return reduce(ctx, x, ds, kind, meta.dtype, keepdim=keepdim and nd > 0,
                  layout=_node_layout(ctx))


@lowering(aten.mean.dim, aten.mean.default)
def _mean(ctx: LoweringContext, x: TensorValue, dims: Any = None, keepdim: bool = False,
          *, dtype: Any = None) -> BufferView:
    meta = out_meta(ctx)
    nd = len(x.size)
    ds = normalize_dims(dims, nd)
    n = 1
    for d in ds:
        n *= x.size[d]
    cd = compute_dtype(meta.dtype)

    def post(v: Ref) -> Ref:
        return ops.truediv(v, _count(n, cd))

    return reduce(ctx, x, ds, "sum", meta.dtype, keepdim=keepdim and nd > 0,
                  layout=_node_layout(ctx), post=post)


def _reduces_empty(x: TensorValue, dims: Sequence[int]) -> bool:
    """Whether a reduction without an identity (max, min, argmax, argmin) reduces over no
    elements: ATen raises (each op with its own message and type), so the op stays an
    extern call that raises on every call, never a kernel returning its initial value."""
    return any(x.size[d] == 0 for d in dims) or (not dims and 0 in x.size)


@lowering(aten.amax.default, aten.amin.default)
def _amax(ctx: LoweringContext, x: TensorValue, dims: Any = None,
          keepdim: bool = False) -> Any:
    assert ctx.node is not None
    kind = "max" if "amax" in str(ctx.node.target) else "min"
    meta = out_meta(ctx)
    nd = len(x.size)
    if _reduces_empty(x, normalize_dims(dims, nd)):
        return NotImplemented
    return reduce(ctx, x, normalize_dims(dims, nd), kind, meta.dtype,
                  keepdim=keepdim and nd > 0, layout=_node_layout(ctx))


@lowering(aten.max.default, aten.min.default)
def _max_all(ctx: LoweringContext, x: TensorValue) -> Any:
    assert ctx.node is not None
    kind = "max" if "max" in str(ctx.node.target) else "min"
    if 0 in x.size:
        return NotImplemented
    return reduce(ctx, x, list(range(len(x.size))), kind, x.dtype, keepdim=False,
                  layout=_node_layout(ctx))


@lowering(aten.argmax.default, aten.argmin.default)
def _argmax(ctx: LoweringContext, x: TensorValue, dim: int | None = None,
            keepdim: bool = False) -> Any:
    assert ctx.node is not None
    kind = "argmax" if "argmax" in str(ctx.node.target) else "argmin"
    nd = len(x.size)
    if 0 in x.size and (dim is None or _reduces_empty(x, normalize_dims(dim, nd))):
        return NotImplemented
    if dim is None:
        if nd > 1:
            n = 1
            for s in x.size:
                n *= s
            x = apply_view(x, [n], reshape_map(x.size, [n]))
        dims = list(range(len(x.size)))
        keepdim = keepdim and nd > 0 and False
    else:
        dims = normalize_dims(dim, nd)
    return reduce(ctx, x, dims, kind, torch.int64, keepdim=keepdim and nd > 0,
                  layout=_node_layout(ctx))


@lowering(aten.max.dim, aten.min.dim)
def _max_dim(ctx: LoweringContext, x: TensorValue, dim: int, keepdim: bool = False) -> Any:
    assert ctx.node is not None
    is_max = "max" in str(ctx.node.target)
    nd = len(x.size)
    dims = normalize_dims(dim, nd)
    if _reduces_empty(x, dims):
        return NotImplemented
    values = reduce(ctx, x, dims, "max" if is_max else "min", x.dtype,
                    keepdim=keepdim and nd > 0, layout=_node_layout(ctx, 0))
    indices = reduce(ctx, x, dims, "argmax" if is_max else "argmin", torch.int64,
                     keepdim=keepdim and nd > 0, layout=_node_layout(ctx, 1))
    return (values, indices)


@lowering(aten.prod.dim_int, aten.prod.default)
def _prod(ctx: LoweringContext, x: TensorValue, dim: Any = None, keepdim: bool = False,
          *, dtype: Any = None, **kwargs: Any) -> BufferView:
    meta = out_meta(ctx)
    nd = len(x.size)
    kind = "all" if meta.dtype == torch.bool else "prod"
    return reduce(ctx, x, normalize_dims(dim, nd), kind, meta.dtype,
                  keepdim=keepdim and nd > 0, layout=_node_layout(ctx))


@lowering(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.default,
          aten.all.dims)
def _any_all(ctx: LoweringContext, x: TensorValue, dim: Any = None,
             keepdim: bool = False) -> BufferView:
    assert ctx.node is not None
    kind = "any" if "any" in str(ctx.node.target) else "all"
    nd = len(x.size)
    return reduce(ctx, x, normalize_dims(dim, nd), kind, torch.bool,
                  keepdim=keepdim and nd > 0, layout=_node_layout(ctx))


def _var(ctx: LoweringContext, x: TensorValue, dims: Any, correction: Any,
         keepdim: bool, layout: Layout) -> tuple[BufferView, BufferView]:
    nd = len(x.size)
    ds = normalize_dims(dims, nd)
    n = 1
    for d in ds:
        n *= x.size[d]
    corr = 1.0 if correction is None else float(correction)
    dtype = layout.dtype
    cd = compute_dtype(dtype)
    # NOTE: ATen accumulates a float var/std in double (Welford); over long rows so do we
    # (short rows, as in layer norm, keep float for speed; their error is small anyway).
    acc = torch.float64 if dtype.is_floating_point and size_hint(n) > CASCADE_MIN else cd
    mean_layout = Layout.contiguous(
        tuple(1 if d in ds else x.size[d] for d in range(nd)), dtype, x.device)

    def mean_post(v: Ref) -> Ref:
        return ops.truediv(v, _count(n, acc))

    mean = reduce(ctx, x, ds, "sum", dtype, keepdim=True, layout=mean_layout, post=mean_post,
                  acc_dtype=acc)
    kept = [d for d in range(nd) if d not in ds]

    def centered(v: Ref, kept_idx: list[Expr]) -> Ref:
        midx: list[Expr] = [sympy.Integer(0)] * nd
        for d, i in zip(kept, kept_idx):
            midx[d] = i
        diff = ops.sub(ops.to_dtype(v, acc), ops.to_dtype(mean.load(midx), acc))
        return ops.mul(diff, diff)

    def var_post(v: Ref) -> Ref:
        if not is_static(n):
            if corr not in (0.0, 1.0):
                raise SymbolicUnsupported(f"correction {corr} over a symbolic size")
            return ops.truediv(v, _count(n - int(corr), acc))  # NOTE: a size symbol is >= 2
        return ops.truediv(v, ops.constant(max(n - corr, 0.0), acc))

    var = reduce(ctx, x, ds, "sum", dtype, keepdim=keepdim, layout=layout,
                 value_fn=centered, post=var_post, acc_dtype=acc)
    return var, mean


@lowering(aten.var.correction)
def _var_lower(ctx: LoweringContext, x: TensorValue, dims: Any = None, *,
               correction: Any = None, keepdim: bool = False, **kwargs: Any) -> Any:
    nd = len(x.size)
    if nd == 0:
        return NotImplemented
    return _var(ctx, x, dims, correction, keepdim, _node_layout(ctx))[0]


@lowering(aten.var_mean.correction)
def _var_mean(ctx: LoweringContext, x: TensorValue, dims: Any = None, *,
              correction: Any = None, keepdim: bool = False) -> Any:
    nd = len(x.size)
    if nd == 0:
        return NotImplemented
    var, mean = _var(ctx, x, dims, correction, keepdim, _node_layout(ctx, 0))
    meta = out_meta(ctx, 1)
    if sym_sizes(meta.shape) != mean.size:
        return var, apply_view(mean, sym_sizes(meta.shape),
                               reshape_map(mean.size, sym_sizes(meta.shape)))
    return var, mean


def _count(n: object, dtype: torch.dtype) -> Ref:
    """The number of elements `n` as a value: a constant, or for a symbolic size its
    expression, evaluated in the kernel from the size arguments."""
    if is_static(n):
        return ops.constant(float(n), dtype)  # type: ignore[arg-type]
    return ops.index_expr(n, dtype)
