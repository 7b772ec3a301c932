"""Alias records for functionalization: which storage a value lives in, which view-op chain
reaches it from the storage's base, and how a write to a view becomes a scatter on its parent.

IR in: nodes of a traced (mutable) ATen graph. IR out: rules used by `mutations.py` to emit
`*_scatter` nodes and to replay view chains in the functional graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

__all__ = ["Alias", "Storage", "ViewStep", "is_view_op", "scatter_into_parent", "view_chain"]

aten = torch.ops.aten


@dataclasses.dataclass(eq=False)
class Storage:
    """One storage of the original program; `current` is its latest value in the new graph."""

    base: fx.Node  # the original node that created the storage
    current: fx.Node
    version: int = 0
    input_index: int | None = None


@dataclasses.dataclass(eq=False)
class Alias:
    """A value of the original graph: its storage and the view node it was taken from."""

    storage: Storage
    parent: fx.Node | None  # the original node this view was taken from; None: the base


def is_view_op(target: object) -> bool:
    """An ATen op whose outputs alias its first argument without writing to it."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if schema.is_mutable:
        return False
    return any(r.alias_info is not None for r in schema.returns)


# --------------------------------------------------------------------------- scatter rules

Emit = Callable[[Any, tuple[Any, ...], dict[str, Any], fx.Node], fx.Node]


def _arg(node: fx.Node, index: int, name: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _example(node: fx.Node) -> Any:
    return node.meta["example_value"]


def _contiguous(value: fx.Node, emit: Emit, origin: fx.Node) -> fx.Node:
    example = _example(value)
    if isinstance(example, torch.Tensor) and example.is_contiguous():
        return value
    return emit(aten.clone.default, (value,), {"memory_format": torch.contiguous_format}, origin)


def _reshape_back(view: fx.Node, parent: fx.Node, new: fx.Node, emit: Emit) -> fx.Node:
    shape = list(_example(parent).shape)
    return emit(aten.view.default, (_contiguous(new, emit, view), shape), {}, view)


def _as_strided_scatter(view: fx.Node, parent_orig: fx.Node, parent_new: fx.Node,
                        new: fx.Node, emit: Emit) -> fx.Node:
    child = _example(view)
    parent = _example(parent_orig)
    offset = child.storage_offset() - parent.storage_offset()
    return emit(aten.as_strided_scatter.default,
                (parent_new, new, list(child.shape), list(child.stride()), offset), {}, view)


def scatter_into_parent(view: fx.Node, parent_orig: fx.Node, parent_new: fx.Node,
                        new: fx.Node, emit: Emit, target: Any = None) -> fx.Node:
    """The parent's new value after writing `new` into the view `view` of `parent_orig`.

    `target` is the view op when it differs from `view.target` (in-place view ops).
    """
    target = target if target is not None else view.target
    if target is aten.select.int:
        dim, index = view.args[1], view.args[2]
        return emit(aten.select_scatter.default, (parent_new, new, dim, index), {}, view)
    args: tuple[Any, ...]
    if target is aten.slice.Tensor:
        args = (parent_new, new, _arg(view, 1, "dim", 0), _arg(view, 2, "start", None),
                _arg(view, 3, "end", None), _arg(view, 4, "step", 1))
        return emit(aten.slice_scatter.default, args, {}, view)
    if target is aten.diagonal.default:
        args = (parent_new, new, _arg(view, 1, "offset", 0), _arg(view, 2, "dim1", 0),
                _arg(view, 3, "dim2", 1))
        return emit(aten.diagonal_scatter.default, args, {}, view)
    if target in (aten.alias.default, aten.detach.default, aten.lift_fresh.default):
        return new
    if target is aten.t.default:
        return emit(aten.t.default, (new,), {}, view)
    if target is aten.transpose.int:
        return emit(aten.transpose.int, (new, view.args[1], view.args[2]), {}, view)
    if target is aten.permute.default:
        given: list[int] = list(view.args[1])  # type: ignore[arg-type]  # permute's dims
        dims = [d % len(given) for d in given]
        inverse = sorted(range(len(dims)), key=lambda i: dims[i])
        return emit(aten.permute.default, (new, inverse), {}, view)
    if target in _RESHAPE_LIKE:
        return _reshape_back(view, parent_orig, new, emit)
    if target is aten.expand.default:
        raise NotImplementedError("writing through an expanded view (aten.expand) is unsupported")
    return _as_strided_scatter(view, parent_orig, parent_new, new, emit)


_RESHAPE_LIKE = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.unsqueeze.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten._reshape_alias.default,
    aten.view.dtype if False else aten.view.default,
}


def scatter_item_into_grandparent(item: fx.Node, producer: fx.Node, grand_orig: fx.Node,
                                  grand_new: fx.Node, new: fx.Node, emit: Emit) -> fx.Node:
    """Element `i` of split/unbind/...(grand) written: the grand parent's new value."""
    index = item.args[1]
    assert isinstance(index, int)
    target = producer.target
    if target is aten.unbind.int:
        dim = _arg(producer, 1, "dim", 0)
        return emit(aten.select_scatter.default, (grand_new, new, dim, index), {}, item)
    if target in (aten.split.Tensor, aten.split_with_sizes.default):
        dim = _arg(producer, 2, "dim", 0)
        pieces = _example(producer)
        start = sum(int(p.shape[dim]) for p in pieces[:index])
        end = start + int(pieces[index].shape[dim])
        args = (grand_new, new, dim, start, end, 1)
        return emit(aten.slice_scatter.default, args, {}, item)
    return _as_strided_scatter(item, grand_orig, grand_new, new, emit)


@dataclasses.dataclass(frozen=True)
class ViewStep:
    """One view op of a chain, replayable on a real tensor: `target(value, *args, **kwargs)`."""

    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def apply(self, value: Any) -> Any:
        return self.target(value, *self.args, **self.kwargs)


def _step(node: fx.Node, targets: dict[fx.Node, Any] | None = None) -> ViewStep | None:
    rest = node.args[1:]
    found: list[fx.Node] = []
    # NOTE: nested too: `view(x, [u0, -1])` with a size read from a tensor in the graph.
    fx.node.map_arg((rest, node.kwargs), found.append)
    if found:
        return None
    target = (targets or {}).get(node, node.target)
    return ViewStep(target, tuple(rest), dict(node.kwargs))


def view_chain(node: fx.Node, aliases: dict[fx.Node, Alias],
               producers: dict[fx.Node, fx.Node],
               targets: dict[fx.Node, Any] | None = None) -> list[ViewStep] | None:
    """The view ops from the storage base to `node` (None if a step takes tensor arguments).

    `producers` maps an item of a multi-output view (split, unbind) to its producer node.
    """
    steps: list[ViewStep] = []
    current = node
    while True:
        alias = aliases[current]
        if alias.parent is None:
            break
        step = _step(current, targets)
        if step is None:
            return None
        steps.append(step)
        producer = producers.get(current)
        if producer is not None:
            producer_step = _step(producer)
            if producer_step is None:
                return None
            steps.append(producer_step)
        current = alias.parent
    steps.reverse()
    return steps
