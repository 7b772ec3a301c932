"""Lowering rules for indexing with tensors: `index` (advanced indexing), `gather`,
`index_select`, `embedding`. Indices become indirect index variables (negative indices
wrap where ATen's op wraps them), checked at run time: an index out of bounds raises what
ATen raises (`ir/checks.py`). Masks and writes (index_put, scatter) stay extern ATen calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.checks import OUT_OF_RANGE, KernelCheck, index_check
from inductor.ir.nodes import Pointwise, TensorValue
from inductor.ir.ops import Ref, ops
from inductor.lowering.common import broadcast_index, normalize_dim, out_meta
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.sizevars import Expr
from inductor.symbols import sym_sizes

aten = torch.ops.aten


def _broadcast_shape(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    out: list[int] = []
    for dims in zip(*[[1] * (max(map(len, shapes)) - len(s)) + list(s) for s in shapes]):
        # NOTE: the dim that is not 1 (a symbolic size is never 1)
        out.append(0 if 0 in dims else next((d for d in dims if d != 1), 1))
    return tuple(out)


@lowering(aten.index.Tensor)
def _index(ctx: LoweringContext, x: TensorValue, indices: Sequence[Any]) -> Any:
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        return NotImplemented
    meta = out_meta(ctx)
    nd = len(x.size)
    idx_list = list(indices) + [None] * (nd - len(indices))
    positions = [d for d, i in enumerate(idx_list) if i is not None]
    if not positions:
        return x
    if any(x.size[d] == 0 for d in positions):
        return NotImplemented  # NOTE: no element to read for any index: ATen raises
    bshape = _broadcast_shape([idx_list[d].size for d in positions])
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    first = positions[0] if adjacent else 0
    nb = len(bshape)
    src = x

    def inner(idx: Sequence[Expr]) -> Ref:
        bidx = list(idx[first:first + nb])
        rest = list(idx[:first]) + list(idx[first + nb:])
        full: list[Expr] = []
        it = iter(rest)
        for d in range(nd):
            t = idx_list[d]
            if t is None:
                full.append(next(it))
            else:
                v = t.load(broadcast_index(t.size, bshape, bidx))
                check = index_check("IndexError", positions.index(d), src.size[d])
                full.append(ops.indirect(v, src.size[d], check))
        return src.load(full)

    return Pointwise(sym_sizes(meta.shape), x.dtype, x.device, inner)


@lowering(aten.index_select.default)
def _index_select(ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue) -> Any:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    meta = out_meta(ctx)
    src = x
    if nd and src.size[dim] == 0:
        return NotImplemented
    check = OUT_OF_RANGE
    if dim == 1 and nd > 1:
        # NOTE: ATen's CPU kernel for dim 1 reports this way
        check = KernelCheck("RuntimeError", "INDICES element is out of DATA bounds, "
                            f"id={{value}} axis_dim={src.size[dim] if nd else 1}")

    def inner(idx: Sequence[Expr]) -> Ref:
        full = list(idx)
        if nd:
            i = index.load([idx[dim]] if len(index.size) else [])
            full[dim] = ops.indirect(i, src.size[dim], check, wrap=False)
        return src.load(full)

    return Pointwise(sym_sizes(meta.shape), x.dtype, x.device, inner)


@lowering(aten.embedding.default)
def _embedding(ctx: LoweringContext, weight: TensorValue, indices: TensorValue,
               *args: Any) -> Any:
    meta = out_meta(ctx)
    ni = len(indices.size)
    if weight.size[0] == 0:
        return NotImplemented

    def inner(idx: Sequence[Expr]) -> Ref:
        i = indices.load(list(idx[:ni]))
        row = ops.indirect(i, weight.size[0], OUT_OF_RANGE, wrap=False)
        return weight.load([row, idx[ni]])

    return Pointwise(sym_sizes(meta.shape), weight.dtype, weight.device, inner)


@lowering(aten.gather.default)
def _gather(ctx: LoweringContext, x: TensorValue, dim: int, index: TensorValue,
            sparse_grad: bool = False) -> Any:
    nd = len(x.size)
    dim = normalize_dim(dim, nd)
    meta = out_meta(ctx)
    src = x
    if nd and src.size[dim] == 0:
        return NotImplemented
    check = index_check("RuntimeError", dim, src.size[dim] if nd else 1)

    def inner(idx: Sequence[Expr]) -> Ref:
        full = list(idx)
        if nd:
            i = index.load(list(idx))
            full[dim] = ops.indirect(i, src.size[dim], check, wrap=False)
        else:
            full = [sympy.Integer(0)] * 0
        return src.load(full)

    return Pointwise(sym_sizes(meta.shape), x.dtype, x.device, inner)
