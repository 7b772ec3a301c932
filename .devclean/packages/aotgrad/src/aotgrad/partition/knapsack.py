"""0-1 knapsack solvers: choose items maximizing total value with total weight <= capacity.

In the memory-budget partitioner an item is an expensive activation, its weight the bytes of
keeping it saved and its value the recompute runtime that keeping it avoids. Solvers: `dp`
(dynamic programming over discretized weights; weights round up so the answer is always
feasible), `greedy` (by value per weight) and `ilp` (scipy.optimize.milp).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence

Solver = Callable[[Sequence[float], Sequence[float], float], list[int]]

# NOTE: 4_000 buckets bound the discretization loss to 0.025% of the capacity per item and
# keep the pure-Python table small (items x buckets bytes); numpy is not a dependency.
DP_BUCKETS = 4_000


def _free_items(weights: Sequence[float], values: Sequence[float]) -> list[int]:
    return [i for i, w in enumerate(weights) if w <= 0 and values[i] >= 0]


def solve_dp(
    weights: Sequence[float],
    values: Sequence[float],
    capacity: float,
    *,
    buckets: int = DP_BUCKETS,
) -> list[int]:
    """Exact for integer weights when capacity <= buckets, else weights are discretized."""
    if capacity < 0:
        return []
    free = _free_items(weights, values)
    items = [i for i, w in enumerate(weights) if w > 0 and values[i] > 0]
    integral = all(float(weights[i]).is_integer() for i in items) and capacity <= buckets
    scale = 1.0 if integral else max(capacity / buckets, 1e-300)
    cap = math.floor(capacity / scale + 1e-9)
    # NOTE: rounding weights up keeps every DP answer feasible for the real weights.
    scaled = [math.ceil(weights[i] / scale - 1e-9) for i in items]
    best = [0.0] * (cap + 1)
    take = [bytearray(cap + 1) for _ in items]
    for k, (i, w) in enumerate(zip(items, scaled)):
        value = values[i]
        row = take[k]
        for c in range(cap, w - 1, -1):
            candidate = best[c - w] + value
            if candidate > best[c]:
                best[c] = candidate
                row[c] = 1
    chosen: list[int] = []
    c = cap
    for k in range(len(items) - 1, -1, -1):
        if take[k][c]:
            chosen.append(items[k])
            c -= scaled[k]
    return sorted(free + chosen)


def solve_greedy(
    weights: Sequence[float], values: Sequence[float], capacity: float
) -> list[int]:
    """Take items by decreasing value per weight while they fit."""
    free = _free_items(weights, values)
    items = [i for i, w in enumerate(weights) if w > 0 and values[i] > 0]
    items.sort(key=lambda i: (-values[i] / weights[i], weights[i]))
    chosen: list[int] = []
    room = capacity
    for i in items:
        if weights[i] <= room:
            chosen.append(i)
            room -= weights[i]
    return sorted(free + chosen)


def ilp_available() -> bool:
    return importlib.util.find_spec("scipy") is not None


def solve_ilp(weights: Sequence[float], values: Sequence[float], capacity: float) -> list[int]:
    """Exact 0-1 knapsack with scipy.optimize.milp (scipy is an optional dependency)."""
    try:
        from scipy.optimize import (  # type: ignore[import-untyped]  # NOTE: scipy has no stubs
            Bounds,
            LinearConstraint,
            milp,
        )
    except ImportError:
        raise RuntimeError(
            "the 'ilp' knapsack solver needs scipy: pip install 'compiler-aotgrad[ilp]' "
            "(or choose solver='dp' or 'greedy')"
        ) from None
    import numpy as np  # NOTE: scipy depends on numpy

    n = len(weights)
    if n == 0 or capacity < 0:
        return []
    w = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    # NOTE: scale the row so that byte-sized weights do not upset the solver's tolerances.
    norm = max(float(np.max(np.abs(w))), 1.0)
    result = milp(
        c=-v,
        constraints=LinearConstraint(w[None, :] / norm, -np.inf, capacity / norm),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
    )
    if result.x is None:
        raise RuntimeError(f"ilp knapsack solver failed: {result.message}")
    chosen = [i for i in range(n) if result.x[i] > 0.5]
    # NOTE: guard against the solver's feasibility tolerance: drop the worst items if needed.
    chosen.sort(key=lambda i: values[i] / max(weights[i], 1e-300))
    while chosen and sum(weights[i] for i in chosen) > capacity:
        chosen.pop(0)
    return sorted(chosen)


SOLVERS: dict[str, Solver] = {
    "dp": solve_dp,
    "greedy": solve_greedy,
    "ilp": solve_ilp,
}


def get_solver(name: str) -> Solver:
    try:
        return SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown knapsack solver {name!r}; choose one of {sorted(SOLVERS)}")
