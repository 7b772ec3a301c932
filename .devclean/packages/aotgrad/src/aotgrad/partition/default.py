"""The `default` partitioner: the forward computes what its outputs need, the backward reads
every forward value it uses as a saved value, and nothing is computed twice.
"""

from __future__ import annotations

import operator

from torch import fx

from aotgrad.partition.analysis import JointInfo, analyze, is_saveable
from aotgrad.partition.options import PartitionConfig
from aotgrad.partition.split import Partition, split


def default_saved_values(info: JointInfo) -> set[fx.Node]:
    forward = set(info.required_fw) | set(info.primals)
    # NOTE: a tuple-valued op cannot be saved; pull its getitems into the forward so that
    # the backward receives the elements it reads instead.
    for node in list(forward):
        if not is_saveable(node):
            forward.update(u for u in node.users if u.target is operator.getitem)
    saved: set[fx.Node] = set()
    for node in forward:
        if any(u in info.required_bw and u not in forward for u in node.users):
            saved.add(node)
    return saved


def partition_default(info: JointInfo) -> Partition:
    return split(info, default_saved_values(info))


def default_partition(
    joint: fx.GraphModule, *, num_fwd_outputs: int, config: PartitionConfig | None = None
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Save what the backward needs, recompute nothing."""
    del config  # the default partitioner has no options
    result = partition_default(analyze(joint, num_fwd_outputs))
    return result.fw, result.bw
