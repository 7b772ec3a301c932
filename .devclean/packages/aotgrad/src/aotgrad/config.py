"""aotgrad's options, declared with `aotgrad.optionset` (the same pattern as every package's
`config.py`): name, type, default, environment variable and help each.

Environment variables are read here only, once at import. `options` holds the values in
effect (`aotgrad.config.options.<name>`); `patch(...)` overrides options within a block;
`list_options()` names every option with its help.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from aotgrad.optionset import OptionSet, option
from aotgrad.partition.options import PartitionConfig

__all__ = ["AotgradConfig", "declared", "list_options", "load", "options", "patch", "replace",
           "values"]

PARTITIONERS = ("default", "min_cut", "memory_budget")


@dataclass(frozen=True, slots=True)
class AotgradConfig:
    """Every aotgrad option (see `list_options()` for help texts)."""

    partitioner: str = option(
        "memory_budget", env="AOTGRAD_PARTITIONER",
        help="joint-graph partitioner of training graphs (aot_eager and inductor alike): "
             "memory_budget (min_cut under activation_memory_budget), min_cut or default "
             "(save everything the backward reads)")
    decompositions: str = option(
        "core", env="AOTGRAD_DECOMPOSITIONS",
        help="decomposition table applied while tracing to ATen: core (torch._decomp core "
             "ATen) or none")
    activation_memory_budget: float = option(
        1.0, env="AOTGRAD_ACTIVATION_MEMORY_BUDGET",
        help="fraction in [0, 1] of the activation bytes a training graph saves: 1.0 saves "
             "what min_cut saves (recomputing only cheap ops), 0.0 recomputes everything "
             "deterministic from inputs and parameters (memory_budget partitioner)")
    solver: str = option("dp", env="AOTGRAD_SOLVER",
                         help="memory_budget knapsack solver: dp, greedy or ilp")
    estimator: str = option("flops", env="AOTGRAD_ESTIMATOR",
                            help="memory_budget recompute runtime estimate: flops, profile or "
                                 "testing")
    pareto_svg: str | None = option(
        None, env="AOTGRAD_PARETO_SVG",
        help="memory_budget: write the Pareto curve of saved bytes against estimated "
             "recompute time, the chosen budget marked, to this SVG path (each training "
             "graph compiled writes it; the last one stays)")
    graph_cache: bool = option(
        True, env="AOTGRAD_GRAPH_CACHE",
        help="reuse the compiled graphs of an identical captured graph and call signature "
             "(in-process; aotgrad.cache)")
    disk_cache: bool = option(
        True, env="AOTGRAD_DISK_CACHE",
        help="with graph_cache, also keep compiled graphs on disk where a package installs a "
             "store (inductor: cache_dir/graphs), so a new process skips tracing")

    def __post_init__(self) -> None:
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {self.partitioner!r}; one of {PARTITIONERS}")
        self.partition_config()  # validates the partition options

    def partition_config(self) -> PartitionConfig:
        """The partitioners' options."""
        return PartitionConfig(
            activation_memory_budget=self.activation_memory_budget,
            solver=self.solver,
            estimator=self.estimator,
            pareto_svg=self.pareto_svg,
        )


_set = OptionSet("aotgrad", AotgradConfig, os.environ, globals())
#: The values in effect (`patch` rebinds this name).
options: AotgradConfig = _set.current

patch = _set.patch
list_options = _set.list_options
values = _set.values
declared = _set.declared
load = _set.load
replace = _set.replace
