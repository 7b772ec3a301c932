"""Random ops with the generated counter-based RNG: one seed per graph call is drawn from
torch's default generator by an extern call; every element's draw is a hash of (seed,
op number, element index), so results differ between calls, do not depend on threading,
and have the right distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor import config
from inductor.ir.layout import Layout, contiguous_strides
from inductor.ir.nodes import BufferView, ExternKernel, ExternOutput, Pointwise, TensorValue
from inductor.ir.ops import Ref, ops
from inductor.lowering.common import out_meta
from inductor.lowering.context import LoweringContext
from inductor.lowering.registry import lowering
from inductor.sizevars import Expr
from inductor.symbols import sym_sizes

aten = torch.ops.aten
_STREAM_SHIFT = 40


def _seed(ctx: LoweringContext) -> BufferView:
    if ctx.seed is not None:
        return ctx.seed
    name = ctx.new_name("seed")
    example = torch.empty((), dtype=torch.int64)
    kernel = ExternKernel(name, aten.randint.low, (0, 2**62, []), {"dtype": torch.int64},
                          example, origin="seed")
    lay = Layout((), (), 0, torch.int64, torch.device("cpu"))
    out = ExternOutput(name, lay, kernel, ())
    kernel.outputs.append(out)
    ctx.register(out)
    ctx.kernels.append(kernel)
    ctx.seed = BufferView(out, lay)
    return ctx.seed


def _random(ctx: LoweringContext, size: Sequence[int], dtype: torch.dtype, normal: bool,
            device: torch.device) -> Pointwise:
    seed = _seed(ctx)
    stream = ctx.random_streams
    ctx.random_streams += 1
    strides = contiguous_strides(size)

    def inner(idx: Sequence[Expr]) -> Ref:
        flat: Expr = sympy.Integer(stream << _STREAM_SHIFT)
        for i, st in zip(idx, strides):
            flat = flat + i * st
        s = seed.load([])
        return ops.to_dtype(ops.rand(s, flat, normal), dtype)

    return Pointwise(tuple(size), dtype, device, inner)


def _meta_random(ctx: LoweringContext, normal: bool) -> Any:
    if config.options.fallback_random:
        return NotImplemented
    meta = out_meta(ctx)
    if not meta.dtype.is_floating_point:
        return NotImplemented
    return _random(ctx, sym_sizes(meta.shape), meta.dtype, normal, meta.device)


@lowering(aten.rand.default, aten.rand_like.default)
def _rand(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("generator") is not None:
        return NotImplemented
    return _meta_random(ctx, False)


@lowering(aten.randn.default, aten.randn_like.default)
def _randn(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("generator") is not None:
        return NotImplemented
    return _meta_random(ctx, True)


@lowering(aten.bernoulli.p, aten.bernoulli.default)
def _bernoulli(ctx: LoweringContext, x: TensorValue, p: Any = None, **kwargs: Any) -> Any:
    if kwargs.get("generator") is not None or config.options.fallback_random:
        return NotImplemented
    meta = out_meta(ctx)
    if not meta.dtype.is_floating_point:
        return NotImplemented
    size = sym_sizes(meta.shape)
    u = _random(ctx, size, torch.float32, False, meta.device)
    prob: Any = x if p is None else p

    def inner(idx: Sequence[Expr]) -> Ref:
        from inductor.lowering.common import loader

        pv = loader(prob, size, torch.float32)(idx)
        hit = ops.lt(u.load(idx), pv)
        return ops.to_dtype(hit, meta.dtype)

    return Pointwise(size, meta.dtype, meta.device, inner)
