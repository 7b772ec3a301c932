"""Helpers shared by lowering rules: output metadata, broadcasting, type promotion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.nodes import BufferView, Pointwise
from inductor.ir.ops import Ref, compute_dtype, ops
from inductor.lowering.node_meta import example_value
from inductor.sizevars import Expr
from inductor.symbols import sym_sizes

if TYPE_CHECKING:
    from inductor.lowering.context import LoweringContext

Scalar = bool | int | float


def is_tensor(x: object) -> bool:
    return isinstance(x, (BufferView, Pointwise))


def out_meta(ctx: LoweringContext, item: int | None = None) -> torch.Tensor:
    assert ctx.node is not None
    ev = example_value(ctx.node)
    if item is not None:
        ev = ev[item]
    assert isinstance(ev, torch.Tensor), f"{ctx.node.format_node()} has no tensor meta"
    return ev


def out_size(ctx: LoweringContext) -> tuple[int, ...]:
    return sym_sizes(out_meta(ctx).shape)


def filled(ctx: LoweringContext, value: Any) -> Pointwise:
    """The current node's output (size, dtype, device from its meta) filled with `value`."""
    meta = out_meta(ctx)
    dtype = meta.dtype
    size = sym_sizes(meta.shape)

    def inner(idx: Sequence[Expr]) -> Ref:
        return ops.constant(value, dtype)

    return Pointwise(size, dtype, meta.device, inner)


def broadcast_index(
    in_size: Sequence[int], out_size: Sequence[int], idx: Sequence[Expr]
) -> list[Expr]:
    """Index into an input of `in_size` broadcast to `out_size`."""
    lead = len(out_size) - len(in_size)
    result: list[Expr] = []
    for d, s in enumerate(in_size):
        if s == 1 and out_size[lead + d] != 1:
            result.append(sympy.Integer(0))
        else:
            result.append(idx[lead + d])
    return result


def _dummy(x: object) -> Any:
    if is_tensor(x):
        assert isinstance(x, (BufferView, Pointwise))
        return torch.empty((1,) * min(len(x.size), 1), dtype=x.dtype)
    if isinstance(x, sympy.Expr):
        return 1  # NOTE: a size expression: an int
    return x


def promote(*args: object) -> torch.dtype:
    """torch's result type of the given tensors and scalars."""
    dummies = [_dummy(a) for a in args if a is not None]
    if len(dummies) == 1:
        d = dummies[0]
        if isinstance(d, torch.Tensor):
            return d.dtype
        return torch.tensor(d).dtype
    dtype: torch.dtype = torch.result_type(dummies[0], dummies[1])
    for d in dummies[2:]:
        dtype = torch.result_type(torch.empty((1,), dtype=dtype), d)
    return dtype


def loader(
    x: object, out_size: Sequence[int], dtype: torch.dtype
) -> Callable[[Sequence[Expr]], Ref]:
    """A loader producing `x` (tensor or scalar) broadcast to `out_size`, cast to `dtype`."""
    cdtype = compute_dtype(dtype)
    if isinstance(x, (BufferView, Pointwise)):
        t = x

        def load(idx: Sequence[Expr]) -> Ref:
            return ops.to_dtype(t.load(broadcast_index(t.size, out_size, idx)), cdtype)

        return load
    if isinstance(x, sympy.Expr) and not x.is_Integer:
        size = x  # NOTE: an int argument or a size: evaluated in the kernel (size symbols)

        def symbolic(idx: Sequence[Expr]) -> Ref:
            return ops.index_expr(size, cdtype)

        return symbolic
    if isinstance(x, sympy.Expr):
        x = int(x)
    assert isinstance(x, (bool, int, float)), f"unexpected pointwise operand {x!r}"
    value = x

    def const(idx: Sequence[Expr]) -> Ref:
        return ops.constant(value, cdtype)

    return const


def make_pointwise(
    ctx: LoweringContext,
    fn: Callable[..., Ref],
    *inputs: Any,
    compute: torch.dtype | None = None,
    size: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
) -> Pointwise:
    """Elementwise `fn` over broadcast inputs. Inputs are cast to `compute` (default: the
    output dtype); the result is cast to the output dtype."""
    if size is None or dtype is None:
        meta = out_meta(ctx)
        size = sym_sizes(meta.shape) if size is None else size
        dtype = meta.dtype if dtype is None else dtype
        device = meta.device
    else:
        device = _device_of(inputs)
    if compute is None:
        compute = dtype
    loaders = [loader(x, size, compute) for x in inputs]
    out_cdtype = compute_dtype(dtype)

    def inner(idx: Sequence[Expr]) -> Ref:
        return ops.to_dtype(fn(*(ld(idx) for ld in loaders)), out_cdtype)

    return Pointwise(tuple(size), dtype, device, inner)


def _device_of(inputs: Sequence[object]) -> torch.device:
    for x in inputs:
        if isinstance(x, (BufferView, Pointwise)):
            return x.device
    return torch.device("cpu")


def normalize_dim(dim: int, ndim: int) -> int:
    if ndim == 0:
        return 0
    return dim + ndim if dim < 0 else dim


def normalize_dims(dims: Sequence[int] | int | None, ndim: int) -> list[int]:
    if dims is None or ndim == 0:  # NOTE: a 0-dim tensor's dim 0 or -1 names no dim
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(ndim))
    return sorted({normalize_dim(d, ndim) for d in dims})
