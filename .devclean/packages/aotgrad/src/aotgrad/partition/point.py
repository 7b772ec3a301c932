"""One solved memory budget, as the planner (`budget`) and the Pareto plot (`pareto`) see it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetPoint:
    """One solved budget: the saved activation bytes (distinct storages, as saved-tensor
    hooks count them) and the estimated recompute seconds."""

    budget: float
    target_bytes: float
    saved_bytes: int
    recompute_time: float
