"""Checkpointed regions (`torch.utils.checkpoint`): recomputed in the backward, not saved.

Capture tags the torch-level nodes of a checkpointed call with `meta["checkpoint"]` (the
region's number) and the ATen tracer copies the tag onto every op those nodes produce (the
ops autograd runs for them in the backward included). Whatever saved set a partitioner
chooses, `recompute_checkpointed` swaps each saved value computed inside a region for the
values the region reads from outside it (its inputs: primals, activations of untagged code or
of another region), so that the backward recomputes the region from its inputs as eager's
checkpoint does. Values of random ops are still saved (recomputing them would draw other
numbers), and so is a value whose region inputs cannot be saved (not a tensor).
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import fx

from aotgrad.partition.analysis import JointInfo, is_rerunnable, is_saveable

__all__ = ["checkpoint_region", "recompute_checkpointed"]


def checkpoint_region(info: JointInfo, node: fx.Node) -> object | None:
    """The region `node` is recomputed with, or None: an untagged node, a placeholder, a
    random, mutating or grad-mode op (`is_rerunnable`), or one that depends on a tangent (a
    backward value) is never recomputed."""
    region: object | None = node.meta.get("checkpoint")
    if region is None or not is_rerunnable(node):
        return None
    if not info.is_forward_computable(node):
        return None
    return region


def _region_inputs(info: JointInfo, node: fx.Node, region: object) -> set[fx.Node] | None:
    """The values outside `region` that `node` is computed from through region nodes only;
    None when one of them cannot be saved."""
    inputs: set[fx.Node] = set()
    seen: set[fx.Node] = set()
    stack = list(node.all_input_nodes)
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if checkpoint_region(info, current) == region:
            stack.extend(current.all_input_nodes)
            continue
        if not is_saveable(current):
            return None
        inputs.add(current)
    return inputs


def recompute_checkpointed(info: JointInfo, saved: Iterable[fx.Node]) -> set[fx.Node]:
    """`saved` with each value of a checkpointed region replaced by the region's inputs."""
    result: set[fx.Node] = set()
    for node in saved:
        region = checkpoint_region(info, node)
        inputs = None if region is None else _region_inputs(info, node, region)
        if inputs is None:
            result.add(node)
        else:
            result.update(inputs)
    return result
