"""Lowering of max pooling (`max_pool2d_with_indices`) to the loop IR: each output element
scans its window as eager's kernels do, so values and indices are eager's exactly.

The window is unrolled (at most `MAX_WINDOW` elements): positions in row-major order
(`kh` outer, `kw` inner), positions outside the input skipped (padding, `ceil_mode`), an
element taken when it is the first inside the input, greater than the maximum so far, or NaN
(so the last NaN wins, and among equal maxima the first). The index is `h * W + w` in the
input plane. Loads are clamped into the input, so no masked load is needed. The values and
the indices are two pointwise nodes over the same window: in inference the indices are
dead and never computed (a ResNet stem's pool then runs as one fused kernel instead of
ATen's with-indices kernel).

The backward (`max_pool2d_with_indices_backward`) is a pointwise node over the input's
gradient, so it fuses with the gradient's consumers (a ResNet stem's ReLU and batch-norm
backward) instead of ATen's scatter kernel (238 us of a ResNet-50 training step on an H200,
channels-last): each input element gathers the gradients of the windows that cover it and
whose saved index is its own position, in increasing output order as eager adds them
(`_max_pool2d_backward`). Only for channels-last gradients: there the gathered positions
move with the channel, the innermost index, so the C++ target vectorizes them (8x64x112x112,
one thread: 8.9 ms against ATen's 12.4); with the width innermost they are a division per
element and position (NCHW: 79 ms against 12.6), and NCHW stays ATen's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inductor.ir.nodes import Pointwise, TensorValue
from inductor.ir.ops import Ref, compute_dtype, ops
from inductor.lowering.common import out_meta
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.sizevars import Clamp, Expr, FloorDiv, is_static
from inductor.symbols import sym_sizes

aten = torch.ops.aten

MAX_WINDOW = 64  # NOTE: larger windows stay ATen's (an unrolled scan grows with the window)


def _pair(v: Any, default: Sequence[int]) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    vals = [int(x) for x in v] or list(default)
    return (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[1])


@lowering(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(ctx: LoweringContext, x: TensorValue, kernel_size: Any,
                             stride: Any = (), padding: Any = 0, dilation: Any = 1,
                             ceil_mode: bool = False) -> Any:
    if len(x.size) not in (3, 4) or not all(is_static(s) for s in x.size):
        return NotImplemented
    kh, kw = _pair(kernel_size, ())
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, ())
    dh, dw = _pair(dilation, ())
    if kh * kw > MAX_WINDOW or x.dtype not in (torch.float32, torch.float16, torch.bfloat16,
                                               torch.float64):
        return NotImplemented
    height, width = int(x.size[-2]), int(x.size[-1])
    if height == 0 or width == 0:
        return NotImplemented
    src = x
    lead = len(x.size) - 2

    def scan(idx: Sequence[Expr]) -> tuple[Ref, Ref]:
        oh, ow = idx[lead], idx[lead + 1]
        i_oh = ops.index_expr(oh, torch.int64)
        i_ow = ops.index_expr(ow, torch.int64)
        best: Ref | None = None
        where: Ref | None = None
        seen: Ref | None = None
        for a in range(kh):
            for b in range(kw):
                h = oh * sh - ph + a * dh
                w = ow * sw - pw + b * dw
                v = src.load([*idx[:lead], Clamp(h, 0, height - 1), Clamp(w, 0, width - 1)])
                hi = ops.add(ops.mul(i_oh, ops.constant(sh, torch.int64)),
                             ops.constant(a * dh - ph, torch.int64))
                wi = ops.add(ops.mul(i_ow, ops.constant(sw, torch.int64)),
                             ops.constant(b * dw - pw, torch.int64))
                valid = _inside(hi, height)
                valid = ops.logical_and(valid, _inside(wi, width))
                pos = ops.add(ops.mul(hi, ops.constant(width, torch.int64)), wi)
                if best is None or where is None or seen is None:
                    best, where, seen = v, pos, valid
                    continue
                take = ops.logical_or(ops.logical_not(seen),
                                      ops.logical_or(ops.gt(v, best), ops.isnan(v)))
                take = ops.logical_and(valid, take)
                best = ops.where(take, v, best)
                where = ops.where(take, pos, where)
                seen = ops.logical_or(seen, valid)
        assert best is not None and where is not None
        return best, where

    values = Pointwise(sym_sizes(out_meta(ctx, 0).shape), x.dtype, x.device,
                       lambda idx: scan(idx)[0])
    indices = Pointwise(sym_sizes(out_meta(ctx, 1).shape), torch.int64, x.device,
                        lambda idx: scan(idx)[1])
    return (values, indices)


@lowering(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_backward(ctx: LoweringContext, grad: TensorValue, x: TensorValue,
                         kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                         ceil_mode: bool, indices: TensorValue) -> Any:
    """Each input element's gradient: the sum over the output windows that cover it (at
    offset `a, b` of the window: output row `(h + ph - a * dh) / sh` where that divides)
    of their gradient where their saved index is this element's position. Windows are
    visited in increasing output position, the order eager accumulates them in; a window
    position outside the output, or not on the stride, adds nothing (its loads clamped)."""
    sizes = (*x.size, *grad.size)
    meta = out_meta(ctx)
    if len(x.size) != 4 or not all(is_static(s) for s in sizes) or meta.stride(1) != 1 \
            or meta.shape[1] == 1:
        return NotImplemented  # NOTE: only channels-last (module docstring)
    kh, kw = _pair(kernel_size, ())
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, ())
    dh, dw = _pair(dilation, ())
    if kh * kw > MAX_WINDOW or grad.dtype not in (torch.float32, torch.float16,
                                                  torch.bfloat16, torch.float64):
        return NotImplemented
    width = int(x.size[-1])
    out_h, out_w = int(grad.size[-2]), int(grad.size[-1])
    if out_h == 0 or out_w == 0:
        return NotImplemented
    lead = len(x.size) - 2
    acc_dtype = compute_dtype(grad.dtype)

    def body(idx: Sequence[Expr]) -> Ref:
        h, w = idx[lead], idx[lead + 1]
        pos = ops.index_expr(h * width + w, torch.int64)
        zero = ops.constant(0, torch.int64)
        total = ops.constant(0.0, acc_dtype)
        for a in reversed(range(kh)):  # NOTE: increasing output rows
            num_h = h + ph - a * dh
            oh = FloorDiv(Clamp(num_h, 0, (out_h - 1) * sh), sh)
            on_h = ops.eq(ops.index_expr(oh * sh - num_h, torch.int64), zero)
            for b in reversed(range(kw)):
                num_w = w + pw - b * dw
                ow = FloorDiv(Clamp(num_w, 0, (out_w - 1) * sw), sw)
                on_w = ops.eq(ops.index_expr(ow * sw - num_w, torch.int64), zero)
                at = [*idx[:lead], oh, ow]
                take = ops.logical_and(ops.logical_and(on_h, on_w),
                                       ops.eq(indices.load(at), pos))
                g = ops.to_dtype(grad.load(at), acc_dtype)
                total = ops.add(total, ops.where(take, g, ops.constant(0.0, acc_dtype)))
        return ops.to_dtype(total, grad.dtype)

    return Pointwise(sym_sizes(meta.shape), grad.dtype, grad.device, body)


def _inside(i: Ref, size: int) -> Ref:
    return ops.logical_and(ops.ge(i, ops.constant(0, torch.int64)),
                           ops.lt(i, ops.constant(size, torch.int64)))

