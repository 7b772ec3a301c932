"""What recomputing a forward op in the backward reads, where that is less than the op's
own inputs.

A training-mode batch norm that aot_eager keeps whole
(`_native_batch_norm_legit_functional`) reads the running statistics only to write their
new values (outputs 3 and 4, forward-only mutations); its normalized output, mean and
inverse standard deviation (outputs 0-2, all the backward uses) depend on the input,
weight and bias alone. Recomputed in the backward as `_native_batch_norm_legit.no_stats`
(the same CPU/CUDA kernel without the statistics: bitwise the same outputs 0-2), it needs
no running-stat buffer, which the runtime would otherwise save as a copy (the forward
overwrites it): budget 0.0 saved them where full recomputation saves nothing.

`recompute_inputs` is the flow graph's (`mincut`) and the backward builder's (`split`)
view of a node's inputs when the backward computes it; `copy_for_recompute` emits it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch import fx

from aotgrad.partition.analysis import JointInfo, example_value

aten = torch.ops.aten

_BN_FUNCTIONAL = aten._native_batch_norm_legit_functional.default
_BN_NO_STATS = aten._native_batch_norm_legit.no_stats
# NOTE: the positions of the functional op's arguments (all positional in a traced graph)
_BN_STATS = (3, 4)
_BN_TRAINING = 5


def _positional(node: fx.Node) -> tuple[object, ...] | None:
    """The node's arguments, all positional (None if some were passed by keyword)."""
    if node.kwargs:
        return None
    return tuple(node.args)


def _batch_norm_without_stats(info: JointInfo, node: fx.Node) -> bool:
    """A training-mode functional batch norm whose running-stat outputs the gradients do not
    read: the backward can recompute it without the running statistics."""
    if node.target is not _BN_FUNCTIONAL:
        return False
    args = _positional(node)
    if args is None or len(args) != 8 or args[_BN_TRAINING] is not True:
        return False
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem:
            return False
        if user.args[1] not in (0, 1, 2) and user in info.required_bw:
            return False
    return True


def recompute_inputs(info: JointInfo, node: fx.Node) -> list[fx.Node]:
    """The nodes the backward reads to compute `node` again (`copy_for_recompute`)."""
    if not _batch_norm_without_stats(info, node):
        return node.all_input_nodes
    args = node.args
    skipped = {args[i] for i in _BN_STATS}
    kept = [a for i, a in enumerate(args) if i not in _BN_STATS]
    # NOTE: a running-stat buffer passed also as weight or bias is still read
    return [n for n in node.all_input_nodes if n not in skipped or n in kept]


def copy_for_recompute(
    info: JointInfo, graph: fx.Graph, node: fx.Node, env: Callable[[fx.Node], fx.Node]
) -> fx.Node:
    """`node` copied into the backward's `graph`, reading only its `recompute_inputs`."""
    if not _batch_norm_without_stats(info, node):
        return graph.node_copy(node, env)
    args = [a for i, a in enumerate(node.args) if i not in _BN_STATS]
    new_args = tuple(fx.node.map_arg(a, env) for a in args)
    copy = graph.call_function(_BN_NO_STATS, new_args)
    copy.meta = dict(node.meta)
    value = example_value(node)
    if isinstance(value, (tuple, list)):
        copy.meta["example_value"] = tuple(value[:3])
    return copy
