"""Common subexpressions of a functional ATen graph, computed once.

A captured program often computes one value twice: transformers' SDPA attention turns the
same boolean mask into a float mask in every layer (`where(mask, 0.0, -inf)`), and the
joint graph repeats views and constants for each use. Eager runs each copy; the compiled
graph need not, and a partitioner would otherwise save both copies (GPT-2 of
tools/bench/memory_budget: 256 KB more than torch.compile, whose aot_autograd runs CSE too).

IR in and out: a functional ATen GraphModule (the joint graph of INTERFACES.md), edited in
place. Merged: deterministic, side-effect-free ops with the same target, the same (merged)
arguments and the same checkpointed region. Never merged: random ops, mutating ops, value
checks, grad-mode-dependent ops, uninitialized allocations, and every node whose storage a
graph output lives in (two outputs must stay two tensors: a parameter's gradient may be
written in place later).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

from aotgrad.checked_ops import VALUE_CHECKS
from aotgrad.gradmode import GRAD_MODE_OPS
from aotgrad.partition.analysis import is_random, nodes_in, storage_root

__all__ = ["eliminate_common_subexpressions"]

aten = torch.ops.aten

# NOTE: their values are whatever memory holds; two of them are two buffers.
_UNINITIALIZED = frozenset({
    aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
    aten.new_empty.default, aten.new_empty_strided.default,
})


class _Unhashable(Exception):
    """An argument that cannot be part of a key (the node is left alone)."""


def _key_of(value: Any, rep: dict[fx.Node, fx.Node]) -> Any:
    """A hashable key for an argument: nodes by their representative, scalars with their
    type (`add(x, 1)` on an int tensor is not `add(x, 1.0)`), floats by their bits
    (0.0 is not -0.0)."""
    if isinstance(value, fx.Node):
        return ("node", rep.get(value, value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key_of(v, rep) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key_of(v, rep)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", value.hex())
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device,
                                           torch.layout, torch.memory_format)):
        return (type(value).__name__, value)
    raise _Unhashable


def _mergeable(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or target in VALUE_CHECKS or target in GRAD_MODE_OPS:
        return False
    if target in _UNINITIALIZED or is_random(node):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def _output_storages(graph: fx.Graph) -> set[fx.Node]:
    """The graph outputs and every node on the view chain from each to its storage."""
    kept: set[fx.Node] = set()
    for node in graph.nodes:
        if node.op != "output":
            continue
        for out in nodes_in(node.args):
            root = storage_root(out)
            current: fx.Node | None = out
            while current is not None and current not in kept:
                kept.add(current)
                if current is root:
                    break
                source = current.args[0] if current.args else None
                current = source if isinstance(source, fx.Node) else None
    return kept


def eliminate_common_subexpressions(gm: fx.GraphModule) -> int:
    """Replace every node that repeats an earlier one (`_mergeable`, same key) by that
    node; returns how many nodes were removed (the graph is recompiled when any was)."""
    graph = gm.graph
    if any(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
           for n in graph.nodes if n.op == "call_function"):
        return 0  # NOTE: not functional: a value read before and after a write differs
    protected = _output_storages(graph)
    rep: dict[fx.Node, fx.Node] = {}
    seen: dict[Any, fx.Node] = {}
    for node in graph.nodes:
        if node in protected or not _mergeable(node):
            continue
        try:
            key = (node.target, _key_of(node.args, rep), _key_of(dict(node.kwargs), rep),
                   node.meta.get("checkpoint"))
            hash(key)
        except (_Unhashable, TypeError):
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
        else:
            rep[node] = first
    if not rep:
        return 0
    for node, first in rep.items():
        node.replace_all_uses_with(first)
    for node in reversed(list(rep)):
        if not node.users:
            graph.erase_node(node)
    gm.recompile()
    return len(rep)
