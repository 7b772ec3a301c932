"""Lowering of max and average pooling (`max_pool2d_with_indices`, `avg_pool2d` and their
backwards) to the loop IR: each output element scans its window as eager's kernels do, so
values and indices are eager's exactly (average pooling: the window's sum in eager's order,
divided by eager's count, `_count`).

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

import functools
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
_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


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
    kh, kw, sh, sw, ph, pw = _window_args(kernel_size, stride, padding)
    dh, dw = _pair(dilation, ())
    if kh * kw > MAX_WINDOW or x.dtype not in _FLOATS:
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
    kh, kw, sh, sw, ph, pw = _window_args(kernel_size, stride, padding)
    dh, dw = _pair(dilation, ())
    if kh * kw > MAX_WINDOW or grad.dtype not in _FLOATS:
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
        total = ops.constant(0.0, acc_dtype)
        for a in reversed(range(kh)):  # NOTE: increasing output rows
            oh, on_h = _covering(h, ph - a * dh, out_h, sh)
            for b in reversed(range(kw)):
                ow, on_w = _covering(w, pw - b * dw, out_w, sw)
                at = [*idx[:lead], oh, ow]
                take = ops.logical_and(ops.logical_and(on_h, on_w),
                                       ops.eq(indices.load(at), pos))
                g = ops.to_dtype(grad.load(at), acc_dtype)
                total = ops.add(total, ops.where(take, g, ops.constant(0.0, acc_dtype)))
        return ops.to_dtype(total, grad.dtype)

    return Pointwise(sym_sizes(meta.shape), grad.dtype, grad.device, body)


def _count(i: Ref, stride: int, pad: int, kernel: int, size: int, include_pad: bool) -> Ref:
    """How many positions output position `i`'s window counts along one dimension, as
    ATen's CPU kernel does: the window clipped to the padded input for `count_include_pad`,
    to the input otherwise."""
    c = functools.partial(ops.constant, dtype=torch.int64)
    start = ops.sub(ops.mul(i, c(stride)), c(pad))
    end = ops.minimum(ops.add(start, c(kernel)), c(size + pad))
    if include_pad:
        return ops.sub(end, start)
    return ops.sub(ops.minimum(end, c(size)), ops.maximum(start, c(0)))


def _covering(pos: Expr, offset: Expr, out: int, stride: int) -> tuple[Expr, Ref]:
    """The output position whose window holds input position `pos` at window offset
    `offset` (`pos + pad - a * dilation`), clamped into the output, and whether it really
    does (on the stride, inside the output): a backward's gather of one window position."""
    num = pos + offset
    o = FloorDiv(Clamp(num, 0, (out - 1) * stride), stride)
    return o, ops.eq(ops.index_expr(o * stride - num, torch.int64), ops.constant(0, torch.int64))


def _window_args(kernel_size: Any, stride: Any, padding: Any
                 ) -> tuple[int, int, int, int, int, int]:
    kh, kw = _pair(kernel_size, ())
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding, ())
    return kh, kw, sh, sw, ph, pw


def _avg_window(x: TensorValue, other_sizes: Sequence[Any], dtype: torch.dtype,
                kernel_size: Any, stride: Any, padding: Any, divisor_override: int | None
                ) -> tuple[int, int, int, int, int, int] | None:
    """Average pooling's window (kh, kw, sh, sw, ph, pw) where its lowerings apply: a 3-D or
    4-D input, these sizes and `other_sizes` static, a float dtype, at most `MAX_WINDOW`
    elements a window, a divisor other than 0 (ATen raises eager's error for it); else None."""
    if len(x.size) not in (3, 4) or not all(is_static(s) for s in (*x.size, *other_sizes)):
        return None
    window = _window_args(kernel_size, stride, padding)
    if window[0] * window[1] > MAX_WINDOW or dtype not in _FLOATS or divisor_override == 0:
        return None
    return window


@lowering(aten.avg_pool2d.default)
def _avg_pool2d(ctx: LoweringContext, x: TensorValue, kernel_size: Any, stride: Any = (),
                padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: int | None = None) -> Any:
    """Each output element: the sum of its window's elements in row-major order (as eager
    adds them, in the compute dtype), divided by the window's count (`_count`) or
    `divisor_override`; positions outside the input add nothing."""
    window = _avg_window(x, (), x.dtype, kernel_size, stride, padding, divisor_override)
    if window is None:
        return NotImplemented
    kh, kw, sh, sw, ph, pw = window
    height, width = int(x.size[-2]), int(x.size[-1])
    if height == 0 or width == 0:
        return NotImplemented
    lead = len(x.size) - 2
    acc = compute_dtype(x.dtype)

    def body(idx: Sequence[Expr]) -> Ref:
        oh, ow = idx[lead], idx[lead + 1]
        total = ops.constant(0.0, acc)
        for a in range(kh):
            for b in range(kw):
                h = oh * sh - ph + a
                w = ow * sw - pw + b
                v = x.load([*idx[:lead], Clamp(h, 0, height - 1), Clamp(w, 0, width - 1)])
                valid = ops.logical_and(
                    _inside(ops.index_expr(h, torch.int64), height),
                    _inside(ops.index_expr(w, torch.int64), width))
                total = ops.where(valid, ops.add(total, ops.to_dtype(v, acc)), total)
        if divisor_override is not None:
            count: Ref = ops.constant(int(divisor_override), torch.int64)
        else:
            count = ops.mul(
                _count(ops.index_expr(oh, torch.int64), sh, ph, kh, height, count_include_pad),
                _count(ops.index_expr(ow, torch.int64), sw, pw, kw, width, count_include_pad))
        mean = ops.truediv(total, ops.to_dtype(count, acc))
        if divisor_override is None and not count_include_pad:
            # NOTE: a window wholly outside the input (none with PyTorch's padding limits;
            # eager writes 0 there)
            empty = ops.le(count, ops.constant(0, torch.int64))
            mean = ops.where(empty, ops.constant(0.0, acc), mean)
        return ops.to_dtype(mean, x.dtype)

    return Pointwise(sym_sizes(out_meta(ctx).shape), x.dtype, x.device, body)


@lowering(aten.avg_pool2d_backward.default)
def _avg_pool2d_backward(ctx: LoweringContext, grad: TensorValue, x: TensorValue,
                         kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                         count_include_pad: bool, divisor_override: int | None) -> Any:
    """Each input element's gradient: the sum, over the output windows that cover it in
    increasing output position (eager's order of accumulation), of their gradient divided
    by their count. Both layouts: unlike max pooling's, no saved index is compared
    (32x64x56x56, 2x2 windows, training step on 2 CPU threads: 4.6 ms NCHW, 4.1 channels-last,
    against eager's 13.9 and 21.7)."""
    meta = out_meta(ctx)
    window = _avg_window(x, grad.size, grad.dtype, kernel_size, stride, padding,
                         divisor_override)
    if window is None:
        return NotImplemented
    kh, kw, sh, sw, ph, pw = window
    height, width = int(x.size[-2]), int(x.size[-1])
    out_h, out_w = int(grad.size[-2]), int(grad.size[-1])
    if out_h == 0 or out_w == 0:
        return NotImplemented
    lead = len(x.size) - 2
    acc = compute_dtype(grad.dtype)

    def body(idx: Sequence[Expr]) -> Ref:
        h, w = idx[lead], idx[lead + 1]
        total = ops.constant(0.0, acc)
        for a in reversed(range(kh)):  # NOTE: increasing output rows
            oh, on_h = _covering(h, ph - a, out_h, sh)
            count_h = None if divisor_override is not None else _count(
                ops.index_expr(oh, torch.int64), sh, ph, kh, height, count_include_pad)
            for b in reversed(range(kw)):
                ow, on_w = _covering(w, pw - b, out_w, sw)
                if count_h is None:
                    count: Ref = ops.constant(int(divisor_override or 0), torch.int64)
                else:
                    count = ops.mul(count_h, _count(ops.index_expr(ow, torch.int64), sw, pw, kw,
                                                    width, count_include_pad))
                g = ops.truediv(ops.to_dtype(grad.load([*idx[:lead], oh, ow]), acc),
                                ops.to_dtype(count, acc))
                take = ops.logical_and(on_h, on_w)
                total = ops.where(take, ops.add(total, g), total)
        return ops.to_dtype(total, grad.dtype)

    return Pointwise(sym_sizes(meta.shape), grad.dtype, grad.device, body)



def _inside(i: Ref, size: int) -> Ref:
    return ops.logical_and(ops.ge(i, ops.constant(0, torch.int64)),
                           ops.lt(i, ops.constant(size, torch.int64)))

