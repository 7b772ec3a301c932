"""Options of the partitioners: one typed, frozen dataclass.

aotgrad's config.py embeds a `PartitionConfig`; nothing here reads the environment.
"""

from __future__ import annotations

import dataclasses

SOLVERS = ("dp", "greedy", "ilp")
ESTIMATORS = ("flops", "profile", "testing")


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionConfig:
    """How the joint graph is split into forward and backward.

    Attributes:
        activation_memory_budget: for the `memory_budget` partitioner, between 0 and 1:
            1.0 saves what `min_cut` saves, 0.0 what full recomputation saves, values in
            between interpolate the saved activation bytes linearly.
        solver: knapsack solver of `memory_budget`: "dp", "greedy" or "ilp" (needs scipy).
        estimator: recompute runtime estimate: "flops", "profile" or "testing" (unit cost).
        pareto_svg: when set, `memory_budget` writes the Pareto curve (saved bytes against
            estimated recompute time, budgets 0 to 1 in steps of 0.05) to this path.
        fused_recompute: the graphs' compiler fuses pointwise ops recomputed in the backward
            into the kernels that read them (inductor: its compiler's `fuses_pointwise`).
            Without fusion (aot_eager runs the graphs op by op) min_cut also saves the
            values eager saves as an op's own result (`mincut.saved_as_result`: tanh's
            output) instead of running their chain again, as torch.compile's aot_eager
            does; with it they are recomputed in the fused kernel, as torch's inductor does.
    """

    activation_memory_budget: float = 1.0
    solver: str = "dp"
    estimator: str = "flops"
    pareto_svg: str | None = None
    fused_recompute: bool = False

    def __post_init__(self) -> None:
        budget = self.activation_memory_budget
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"activation_memory_budget must be in [0, 1], got {budget!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; choose one of {SOLVERS}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(
                f"unknown estimator {self.estimator!r}; choose one of {ESTIMATORS}"
            )
