"""Arguments a backward op receives but never reads, dropped from the joint graph.

`native_batch_norm_backward` takes the running statistics, but in training mode (`train`
True) it normalizes with the batch statistics the forward saved and never reads them. After
functionalization those arguments are the forward's *new* running statistics (fresh
tensors, written into the buffers by the runtime wrapper), so a partitioner would save two
extra tensors per batch norm that eager autograd does not keep (eager hands the buffers
themselves, which cost nothing), and a backward that recomputes the batch norm would need
the old buffers, saved as copies because the wrapper overwrites them. Passing None (the
schema's `Tensor?`) removes that dependency; the op computes the same gradients.

IR in and out: the functional joint graph of INTERFACES.md, edited in place.
"""

from __future__ import annotations

import torch
from torch import fx

aten = torch.ops.aten

# NOTE: positions of (running_mean, running_var) and of `train` in the schema
_BATCH_NORM_BACKWARD = aten.native_batch_norm_backward.default
_RUNNING_STATS = (3, 4)
_TRAIN = 7


def drop_unread_arguments(gm: fx.GraphModule) -> int:
    """Replace the arguments that backward ops ignore with None; returns how many
    nodes changed (the graph is recompiled when any did)."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _BATCH_NORM_BACKWARD:
            continue
        args = list(node.args)
        if len(args) <= _TRAIN or args[_TRAIN] is not True:
            continue  # NOTE: eval mode normalizes with the running statistics: keep them
        if all(args[i] is None for i in _RUNNING_STATS):
            continue
        for i in _RUNNING_STATS:
            args[i] = None
        node.args = tuple(args)
        changed += 1
    if changed:
        gm.recompile()
    return changed
