"""aotgrad's options: one typed, frozen dataclass; the only module that reads the environment.

`config()` is the active configuration (defaults overridden by `AOTGRAD_*` environment
variables, read once), `patch(**changes)` overrides it in a `with` block, `list_options()`
names every option with its help text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from aotgrad.partition.options import PartitionConfig

__all__ = ["AotgradConfig", "config", "list_options", "patch"]

PARTITIONERS = ("default", "min_cut", "memory_budget")


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    env: str
    help: str


OPTIONS: dict[str, Option] = {
    "partitioner": Option(
        "AOTGRAD_PARTITIONER",
        "joint-graph partitioner used when none is given: default, min_cut or memory_budget"),
    "decompositions": Option(
        "AOTGRAD_DECOMPOSITIONS",
        "decomposition table applied while tracing to ATen: core (torch._decomp core ATen) "
        "or none"),
    "activation_memory_budget": Option(
        "AOTGRAD_ACTIVATION_MEMORY_BUDGET",
        "memory_budget partitioner: 1.0 saves what min_cut saves, 0.0 what full "
        "recomputation saves"),
    "solver": Option("AOTGRAD_SOLVER", "memory_budget knapsack solver: dp, greedy or ilp"),
    "estimator": Option("AOTGRAD_ESTIMATOR",
                        "memory_budget recompute runtime estimate: flops, profile or testing"),
    "graph_cache": Option(
        "AOTGRAD_GRAPH_CACHE",
        "reuse the compiled graphs of an identical captured graph and call signature "
        "(in-process; aotgrad.cache): 1 or 0"),
    "pareto_svg": Option("AOTGRAD_PARETO_SVG",
                         "memory_budget: write the Pareto curve of saved bytes against "
                         "estimated recompute time to this SVG path"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class AotgradConfig:
    """Every aotgrad option (see `list_options()` for help texts)."""

    partitioner: str = "min_cut"
    decompositions: str = "core"
    activation_memory_budget: float = 1.0
    solver: str = "dp"
    estimator: str = "flops"
    pareto_svg: str | None = None
    graph_cache: bool = True

    def __post_init__(self) -> None:
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {self.partitioner!r}; one of {PARTITIONERS}")
        self.partition_config()  # validates the partition options

    def partition_config(self) -> PartitionConfig:
        return PartitionConfig(
            activation_memory_budget=self.activation_memory_budget,
            solver=self.solver,
            estimator=self.estimator,
            pareto_svg=self.pareto_svg,
        )


def _from_env() -> AotgradConfig:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(AotgradConfig):
        raw = os.environ.get(OPTIONS[field.name].env)
        if raw is None:
            continue
        if field.name == "activation_memory_budget":
            values[field.name] = float(raw)
        elif field.name == "graph_cache":
            values[field.name] = raw.strip().lower() in ("1", "true", "yes", "on")
        else:
            values[field.name] = raw
    return AotgradConfig(**values)


_active: list[AotgradConfig] = []


def config() -> AotgradConfig:
    """The active configuration."""
    if not _active:
        _active.append(_from_env())
    return _active[-1]


@contextlib.contextmanager
def patch(**changes: Any) -> Iterator[AotgradConfig]:
    """Override options inside a `with` block: `with aotgrad.config.patch(partitioner=...)`."""
    patched = dataclasses.replace(config(), **changes)
    _active.append(patched)
    try:
        yield patched
    finally:
        _active.remove(patched)


def list_options() -> dict[str, str]:
    """Option name -> one-line help (with its environment variable)."""
    return {name: f"{opt.help} (env {opt.env})" for name, opt in OPTIONS.items()}
