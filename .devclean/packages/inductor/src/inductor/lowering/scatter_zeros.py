"""Scatters into fresh zeros, in place: `scatter_add(zeros, ...)` and its kin.

The backward of `gather`, `index_select` through `index`, and advanced indexing scatter the
gradient into a tensor of zeros; functionalized, that is `zeros` then the functional op,
which copies the zeros into its output before scattering. When the zeros have no other
user, the extern call here fills its own output with zeros and scatters into it in place,
as eager's backward does (`grad.new_zeros(...).scatter_add_(...)`): one write of the output
less, one read less. Anything else keeps the functional op (the fallback).

NOTE: why: a gather's training step ([2048, 512] gathered by [2048, 64]) ran at 0.6-0.7x
eager's on the CPU, its backward copying 4 MB of zeros before scattering 0.5 MB.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from inductor.lowering.context import LoweringContext
from inductor.lowering.extern import fallback
from inductor.lowering.node_meta import example_value
from inductor.lowering.registry import lowering

aten = torch.ops.aten

#: the functional op -> the method that does it in place
_IN_PLACE = {
    aten.scatter_add.default: "scatter_add_",
    aten.scatter.src: "scatter_",
    aten.scatter.value: "scatter_",
    aten.scatter_reduce.two: "scatter_reduce_",
    aten.index_put.default: "index_put_",
    aten.index_add.default: "index_add_",
}


def scatter_into_zeros(method: str, size: list[int], stride: list[int], dtype: torch.dtype,
                       device: torch.device, *args: Any, **kwargs: Any) -> torch.Tensor:
    """A zero tensor of `size` and `stride`, then `method` (an in-place scatter) on it."""
    out = torch.empty_strided(size, stride, dtype=dtype, device=device).zero_()
    getattr(out, method)(*args, **kwargs)
    return out


def _is_zero(value: object) -> bool:
    return type(value) in (int, float) and value == 0


def _is_fresh_zeros(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """Whether `node` makes a tensor of zeros that only `user` reads, laid out as `user`'s
    result (the functional op's output is a copy of its first argument)."""
    if len(node.users) != 1:
        return False
    while node.target in (aten.detach.default, aten.alias.default):
        # NOTE: the joint graph's zeros come through a detach (`full_default` -> detach)
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or len(source.users) != 1:
            return False
        node = source
    target, args = node.target, node.args
    if target in (aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default):
        zeros = True
    elif target is aten.full.default:
        zeros = len(args) > 1 and _is_zero(args[1])
    elif target in (aten.full_like.default, aten.new_full.default):
        zeros = len(args) > 1 and _is_zero(args[-1])
    else:
        zeros = False
    if not zeros:
        return False
    made, out = example_value(node), example_value(user)
    return (isinstance(made, torch.Tensor) and isinstance(out, torch.Tensor)
            and made.dtype == out.dtype and made.device == out.device
            and made.shape == out.shape and made.stride() == out.stride()
            and all(isinstance(s, int) for s in (*made.shape, *made.stride())))


@lowering(*_IN_PLACE)
def _scatter(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    node = ctx.node
    assert node is not None
    first = node.args[0]
    if not isinstance(first, torch.fx.Node) or not _is_fresh_zeros(first, node):
        return NotImplemented
    out = example_value(node)
    method = _IN_PLACE.get(node.target)  # type: ignore[call-overload]  # NOTE: an fx target
    if method is None:
        return NotImplemented
    op = functools.partial(scatter_into_zeros, method)
    return fallback(ctx, op, (list(out.shape), list(out.stride()), out.dtype, out.device,
                              *args[1:]), kwargs)
