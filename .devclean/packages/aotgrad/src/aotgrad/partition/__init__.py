"""Partitioners: split aotgrad's joint forward+backward graph into a forward and a backward.

`get_partitioner(name)` returns `partition(joint, *, num_fwd_outputs, config) -> (fw, bw)`
following the joint-graph convention of INTERFACES.md: fw returns the forward outputs then
the saved values; bw takes the saved values (same order and names) then the tangents and
returns one gradient per primal.

- `default`: save every forward value the backward reads; recompute nothing.
- `min_cut`: a minimum cut (networkx) over value bytes picks the saved values; cheap ops
  (pointwise, views, copies) are recomputed in the backward, expensive ones (matmul,
  convolution, reductions, anything else) and random ops never are; nor are cheap values
  that a matmul or convolution reads in the forward (they are in memory anyway).
- `memory_budget`: `PartitionConfig.activation_memory_budget` in [0, 1] between what
  min_cut saves (1.0) and what full recomputation saves (0.0), by a 0-1 knapsack over the
  expensive activations. Below 1.0 it may recompute expensive ops (cheapest per byte first);
  random ops are never recomputed.

Only values the forward outputs need are pinned to the forward: a value only the backward
reads (a scatter of the targets, a matmul of two inputs) is computed there once, not saved.

`saved_bytes(fw, num_fwd_outputs)` is the activation memory a forward graph saves, counted
as saved-tensor hooks count it: each storage once (views of one value share it), primals and
views of them excluded (they are alive anyway). Pipeline: analysis -> (default | mincut |
budget with knapsack and estimate) -> split; pareto draws the budget curve (point.py: one
solved budget). Whatever the partitioner, `split` saves the inputs of a checkpointed region
(`torch.utils.checkpoint`, nodes tagged `meta["checkpoint"]`) instead of its values, which the
backward recomputes (checkpointed.py).
"""

from __future__ import annotations

from typing import Protocol

from torch import fx

from aotgrad.partition.budget import memory_budget_partition
from aotgrad.partition.default import default_partition
from aotgrad.partition.mincut import min_cut_partition
from aotgrad.partition.options import PartitionConfig
from aotgrad.partition.split import PartitionError, saved_bytes


class PartitionFn(Protocol):
    def __call__(
        self, joint: fx.GraphModule, *, num_fwd_outputs: int, config: PartitionConfig
    ) -> tuple[fx.GraphModule, fx.GraphModule]: ...


def _registry() -> dict[str, PartitionFn]:
    table: dict[str, PartitionFn] = {
        "default": default_partition,
        "min_cut": min_cut_partition,
        "memory_budget": memory_budget_partition,
    }
    return table


def list_partitioners() -> list[str]:
    return sorted(_registry())


def get_partitioner(name: str) -> PartitionFn:
    """The partition function registered under `name` ("default", "min_cut", "memory_budget")."""
    table = _registry()
    try:
        fn = table[name]
    except KeyError:
        raise ValueError(
            f"unknown partitioner {name!r}; available: {', '.join(sorted(table))}"
        ) from None
    return fn


__all__ = [
    "PartitionConfig",
    "PartitionError",
    "PartitionFn",
    "get_partitioner",
    "list_partitioners",
    "saved_bytes",
]
