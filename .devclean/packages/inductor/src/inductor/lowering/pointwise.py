"""Lowering rules for elementwise ATen ops, constructors and dtype conversions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from inductor.ir.nodes import BufferView, Pointwise, TensorValue
from inductor.ir.ops import Ref, ops
from inductor.lowering.common import (
    filled,
    is_tensor,
    loader,
    make_pointwise,
    out_meta,
    promote,
)
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.sizevars import Expr
from inductor.symbols import sym_expr, sym_sizes

aten = torch.ops.aten
prims = torch.ops.prims

_UNARY = {
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
    "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
    "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    "sigmoid": "sigmoid", "erf": "erf", "erfc": "erfc", "lgamma": "lgamma",
    "reciprocal": "reciprocal", "neg": "neg", "abs": "abs", "relu": "relu", "sign": "sign",
    "frac": "frac",
}


def _register_unary(aten_name: str, op_name: str) -> None:
    targets = [getattr(aten, aten_name).default]
    if hasattr(prims, aten_name):
        targets.append(getattr(prims, aten_name).default)

    def lower(ctx: LoweringContext, x: TensorValue) -> Pointwise:
        return make_pointwise(ctx, getattr(ops, op_name), x)

    lowering(*targets)(lower)


for _a, _o in _UNARY.items():
    _register_unary(_a, _o)


@lowering(aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default)
def _rounding(ctx: LoweringContext, x: TensorValue) -> Any:
    assert ctx.node is not None
    name = str(ctx.node.target).split(".")[1]
    if not x.dtype.is_floating_point:
        return make_pointwise(ctx, lambda a: a, x)
    return make_pointwise(ctx, getattr(ops, name), x)


@lowering(aten.add.Tensor, aten.add.Scalar)
def _add(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Pointwise:
    if alpha != 1:
        return make_pointwise(ctx, lambda x, y, s: ops.add(x, ops.mul(y, s)), a, b, alpha)
    return make_pointwise(ctx, ops.add, a, b)


@lowering(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Pointwise:
    if alpha != 1:
        return make_pointwise(ctx, lambda x, y, s: ops.sub(x, ops.mul(y, s)), a, b, alpha)
    return make_pointwise(ctx, ops.sub, a, b)


@lowering(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(ctx: LoweringContext, a: Any, b: Any, alpha: Any = 1) -> Pointwise:
    return _sub(ctx, b, a, alpha)


@lowering(aten.mul.Tensor, aten.mul.Scalar)
def _mul(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    if out_meta(ctx).dtype == torch.bool:
        return make_pointwise(ctx, ops.logical_and, a, b)
    return make_pointwise(ctx, ops.mul, a, b)


@lowering(aten.div.Tensor, aten.div.Scalar, prims.div.default)
def _div(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    dtype = out_meta(ctx).dtype
    if not dtype.is_floating_point:
        return make_pointwise(ctx, lambda x, y: ops.trunc_div(x, y), a, b)
    if not is_tensor(b) and isinstance(b, (int, float)) and b != 0:
        inv = 1.0 / b
        if math.frexp(b)[0] == 0.5:  # NOTE: exact reciprocal only for powers of two
            return make_pointwise(ctx, ops.mul, a, inv)
    return make_pointwise(ctx, ops.truediv, a, b)


@lowering(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(ctx: LoweringContext, a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return _div(ctx, a, b)
    dtype = out_meta(ctx).dtype
    if rounding_mode == "floor":
        if dtype.is_floating_point:
            return make_pointwise(ctx, lambda x, y: ops.floor(ops.truediv(x, y)), a, b)
        return make_pointwise(ctx, ops.floordiv, a, b)
    if dtype.is_floating_point:
        return make_pointwise(ctx, lambda x, y: ops.trunc(ops.truediv(x, y)), a, b)
    # NOTE: lowered for integers too: ATen's kernel traps (SIGFPE) on MIN / -1, ours wraps
    return make_pointwise(ctx, ops.trunc_div, a, b)


@lowering(aten.floor_divide.default, aten.floor_divide.Scalar)
def _floor_divide(ctx: LoweringContext, a: Any, b: Any) -> Any:
    return _div_mode(ctx, a, b, rounding_mode="floor")


@lowering(aten.remainder.Tensor, aten.remainder.Scalar)
def _remainder(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    return make_pointwise(ctx, ops.remainder, a, b)


@lowering(aten.fmod.Tensor, aten.fmod.Scalar)
def _fmod(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    return make_pointwise(ctx, ops.fmod, a, b)


@lowering(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow(ctx: LoweringContext, a: Any, b: Any) -> Any:
    integral = not out_meta(ctx).dtype.is_floating_point and not out_meta(ctx).dtype.is_complex
    if integral and is_tensor(a) and not is_tensor(b) and isinstance(b, int) and b < 0:
        # NOTE: ATen raises ("Integers to negative integer powers are not allowed."): the
        # extern op raises it on every call.
        return NotImplemented
    if not is_tensor(b) and isinstance(b, (int, float)):
        if b == 2:
            return make_pointwise(ctx, lambda x: ops.mul(x, x), a)
        if b == 1:
            return make_pointwise(ctx, lambda x: x, a)
        if b == 0.5 and out_meta(ctx).dtype.is_floating_point:
            return make_pointwise(ctx, ops.sqrt, a)
        if b == 3:
            return make_pointwise(ctx, lambda x: ops.mul(ops.mul(x, x), x), a)
        # NOTE: ATen's float kernels take these exponents apart too, rounding as these
        # forms do (bit for bit on the CPU; its half-precision kernels call pow: -0.0 ** -0.5
        # is +inf there, -inf here); a libm pow is a scalar call per element in C++
        if out_meta(ctx).dtype in (torch.float32, torch.float64):
            if b == -0.5:
                return make_pointwise(ctx, ops.rsqrt, a)
            if b == -1:
                return make_pointwise(ctx, ops.reciprocal, a)
            if b == -2:
                return make_pointwise(ctx, lambda x: ops.reciprocal(ops.mul(x, x)), a)
    return make_pointwise(ctx, ops.pow, a, b)


@lowering(aten.atan2.default)
def _atan2(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    return make_pointwise(ctx, ops.atan2, a, b)


@lowering(aten.maximum.default, aten.minimum.default, aten.fmax.default, aten.fmin.default)
def _maxmin(ctx: LoweringContext, a: Any, b: Any) -> Any:
    assert ctx.node is not None
    name = ctx.node.target.__name__.split(".")[0]  # type: ignore[union-attr]
    if name in ("fmax", "fmin"):
        return NotImplemented
    return make_pointwise(ctx, getattr(ops, name), a, b)


@lowering(aten.clamp.default, aten.clamp.Tensor)
def _clamp(ctx: LoweringContext, x: Any, min: Any = None, max: Any = None) -> Pointwise:
    args: list[Any] = [x]
    if min is not None:
        args.append(min)
    if max is not None:
        args.append(max)

    def fn(*vals: Ref) -> Ref:
        v = vals[0]
        i = 1
        if min is not None:
            v = ops.maximum(v, vals[i])
            i += 1
        if max is not None:
            v = ops.minimum(v, vals[i])
        return v

    return make_pointwise(ctx, fn, *args)


@lowering(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(ctx: LoweringContext, x: Any, m: Any) -> Pointwise:
    return _clamp(ctx, x, m, None)


@lowering(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(ctx: LoweringContext, x: Any, m: Any) -> Pointwise:
    return _clamp(ctx, x, None, m)


@lowering(aten.hardtanh.default)
def _hardtanh(ctx: LoweringContext, x: Any, lo: float = -1.0, hi: float = 1.0) -> Pointwise:
    return _clamp(ctx, x, lo, hi)


def _compare(name: str) -> None:
    targets = [getattr(aten, name).Tensor, getattr(aten, name).Scalar]

    def lower(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
        return make_pointwise(ctx, getattr(ops, name), a, b, compute=promote(a, b))

    lowering(*targets)(lower)


for _c in ("eq", "ne", "lt", "le", "gt", "ge"):
    _compare(_c)


@lowering(aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default)
def _logical_binary(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    assert ctx.node is not None
    name = ctx.node.target.__name__.split(".")[0]  # type: ignore[union-attr]
    return make_pointwise(ctx, getattr(ops, name), a, b, compute=torch.bool)


@lowering(aten.logical_not.default)
def _logical_not(ctx: LoweringContext, a: Any) -> Pointwise:
    return make_pointwise(ctx, ops.logical_not, a, compute=torch.bool)


@lowering(aten.bitwise_not.default)
def _bitwise_not(ctx: LoweringContext, a: Any) -> Pointwise:
    if a.dtype == torch.bool:
        return make_pointwise(ctx, ops.logical_not, a)
    return make_pointwise(ctx, ops.bitwise_not, a)


@lowering(aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor,
          aten.bitwise_and.Scalar, aten.bitwise_or.Scalar, aten.bitwise_xor.Scalar)
def _bitwise(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    assert ctx.node is not None
    name = ctx.node.target.__name__.split(".")[0]  # type: ignore[union-attr]
    if out_meta(ctx).dtype == torch.bool:
        name = name.replace("bitwise", "logical")
    return make_pointwise(ctx, getattr(ops, name), a, b)


@lowering(aten.isnan.default, aten.isinf.default, aten.isfinite.default,
          aten.signbit.default)
def _float_predicate(ctx: LoweringContext, a: Any) -> Pointwise:
    assert ctx.node is not None
    name = ctx.node.target.__name__.split(".")[0]  # type: ignore[union-attr]
    if not a.dtype.is_floating_point:
        value = name in ("isfinite",)
        return make_pointwise(ctx, lambda x: ops.constant(value, torch.bool), a)
    return make_pointwise(ctx, getattr(ops, name), a, compute=a.dtype)


@lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar,
          prims.where.default)
def _where(ctx: LoweringContext, cond: Any, a: Any, b: Any) -> Pointwise:
    dtype = out_meta(ctx).dtype
    size = sym_sizes(out_meta(ctx).shape)
    lc = loader(cond, size, torch.bool)
    la = loader(a, size, dtype)
    lb = loader(b, size, dtype)

    def inner(idx: Sequence[Expr]) -> Ref:
        return ops.where(lc(idx), la(idx), lb(idx))

    return Pointwise(size, dtype, out_meta(ctx).device, inner)


@lowering(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx: LoweringContext, x: Any, mask: Any, value: Any) -> Pointwise:
    return _where(ctx, mask, value, x)


@lowering(aten.gelu.default)
def _gelu(ctx: LoweringContext, x: Any, approximate: str = "none") -> Pointwise:
    def erf_gelu(v: Ref) -> Ref:
        half = ops.constant(0.5, v.dtype)
        inner = ops.erf(ops.mul(v, ops.constant(0.7071067811865476, v.dtype)))
        return ops.mul(ops.mul(half, v), ops.add(ops.constant(1.0, v.dtype), inner))

    def tanh_gelu(v: Ref) -> Ref:
        c = ops.constant(0.7978845608028654, v.dtype)
        k = ops.constant(0.044715, v.dtype)
        cube = ops.mul(ops.mul(v, v), v)
        inner = ops.tanh(ops.mul(c, ops.add(v, ops.mul(k, cube))))
        half = ops.constant(0.5, v.dtype)
        return ops.mul(ops.mul(half, v), ops.add(ops.constant(1.0, v.dtype), inner))

    return make_pointwise(ctx, tanh_gelu if approximate == "tanh" else erf_gelu, x)


@lowering(aten.silu.default)
def _silu(ctx: LoweringContext, x: Any) -> Pointwise:
    return make_pointwise(ctx, lambda v: ops.mul(v, ops.sigmoid(v)), x)


# -- copies and conversions ----------------------------------------------------------------


def _identity(ctx: LoweringContext, x: Any) -> Pointwise:
    result = make_pointwise(ctx, lambda v: v, x, compute=x.dtype)
    if isinstance(x, BufferView) and x.dtype == result.dtype and x.size == result.size:
        result.source = x
    elif isinstance(x, Pointwise) and x.dtype == result.dtype and x.size == result.size:
        result.source = x.realized or x.source
    return result


@lowering(aten.clone.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _clone(ctx: LoweringContext, x: Any, **kwargs: Any) -> Pointwise:
    return _identity(ctx, x)


@lowering(aten._to_copy.default)
def _to_copy(ctx: LoweringContext, x: Any, **kwargs: Any) -> Any:
    meta = out_meta(ctx)
    if meta.device != x.device or meta.layout != torch.strided:
        return NotImplemented
    return _identity(ctx, x)


@lowering(aten.to.dtype)
def _to_dtype(ctx: LoweringContext, x: Any, dtype: Any = None, non_blocking: bool = False,
              copy: bool = False, memory_format: Any = None) -> Any:
    if (dtype == x.dtype and not copy
            and memory_format in (None, torch.preserve_format)):
        # NOTE: eager returns `x` itself: the same value, not a copy (cross-entropy's
        # log-softmax reached nll_loss through one, and the forward wrote the [N, C] values
        # twice: for the loss, and for the backward, which saved the value before it)
        return x
    return _identity(ctx, x)


@lowering(prims.convert_element_type.default)
def _convert(ctx: LoweringContext, x: Any, dtype: torch.dtype) -> Pointwise:
    return _identity(ctx, x)


@lowering(aten.copy.default)
def _copy(ctx: LoweringContext, dst: Any, src: Any, non_blocking: bool = False) -> Pointwise:
    return make_pointwise(ctx, lambda v: v, src, compute=src.dtype)


@lowering(aten.alias.default, aten.detach.default)
def _alias(ctx: LoweringContext, x: Any) -> Any:
    return x


@lowering(aten.conj_physical.default, aten.resolve_conj.default, aten.resolve_neg.default)
def _conj_of_real(ctx: LoweringContext, x: Any) -> Any:
    """The identity on real tensors (autograd's formulas wrap gradients in them); ATen's
    own kernel returns its input unchanged there, so the value is an alias, not a copy."""
    if out_meta(ctx).dtype.is_complex:
        return NotImplemented
    return x


# -- constructors --------------------------------------------------------------------------


@lowering(aten.full.default)
def _full(ctx: LoweringContext, size: Any, value: Any, **kwargs: Any) -> Any:
    if is_tensor(value):
        return NotImplemented
    return filled(ctx, value)


@lowering(aten.full_like.default)
def _full_like(ctx: LoweringContext, x: Any, value: Any, **kwargs: Any) -> Any:
    return filled(ctx, value)


@lowering(aten.zeros.default, aten.zeros_like.default, aten.empty.memory_format,
          aten.empty_like.default, aten.new_zeros.default, aten.new_empty.default,
          aten.empty_strided.default, aten.new_empty_strided.default)
def _zeros(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Pointwise:
    return filled(ctx, 0)


@lowering(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _ones(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Pointwise:
    return filled(ctx, 1)


@lowering(aten.new_full.default)
def _new_full(ctx: LoweringContext, x: Any, size: Any, value: Any, **kwargs: Any) -> Pointwise:
    return filled(ctx, value)


@lowering(aten.scalar_tensor.default)
def _scalar_tensor(ctx: LoweringContext, value: Any, **kwargs: Any) -> Pointwise:
    return filled(ctx, value)


@lowering(aten.fill.Scalar)
def _fill(ctx: LoweringContext, x: Any, value: Any) -> Pointwise:
    return filled(ctx, value)


@lowering(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    meta = out_meta(ctx)
    assert ctx.node is not None
    numbers: list[Any] = [a for a in args if isinstance(a, (int, float))]
    if ctx.node.target is aten.arange.default:
        start, step = 0, 1
    elif ctx.node.target is aten.arange.start:
        start, step = numbers[0], 1
    else:
        start, step = numbers[0], numbers[2] if len(numbers) > 2 else 1
    if not all(isinstance(v, int) for v in (start, step)):
        return NotImplemented
    dtype = meta.dtype

    def inner(idx: Sequence[Expr]) -> Ref:
        return ops.to_dtype(ops.index_expr(idx[0] * step + start, torch.int64), dtype)

    return Pointwise((sym_expr(meta.shape[0]),), dtype, meta.device, inner)


@lowering(prims.iota.default)
def _iota(ctx: LoweringContext, length: int, *, start: int, step: int, **kwargs: Any) -> Any:
    meta = out_meta(ctx)

    def inner(idx: Sequence[Expr]) -> Ref:
        return ops.to_dtype(ops.index_expr(idx[0] * step + start, torch.int64), meta.dtype)

    return Pointwise((int(length),), meta.dtype, meta.device, inner)
