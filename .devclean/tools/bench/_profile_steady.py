"""Steady-state time of one zoo model through capture + inductor (helper, not a benchmark):
forward and forward+backward medians for eager and ours (alternating rounds, best round),
then a cProfile of ours' calls sorted by own time.

    python tools/bench/_profile_steady.py MODEL [train|infer] [PROFILE_ROWS]
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import zoo


def _median(fn: Callable[[], Any], n: int = 200) -> float:
    times: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(name: str, train: bool, rows: int) -> None:
    import capture

    model, inputs, params = zoo.prepared(name, train)
    model.train(False)
    ours = capture.optimize(model, backend="inductor")

    def forward(m: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            for p in params:
                p.grad = None
            if not train:
                with torch.no_grad():
                    return m(*inputs)
            return m(*inputs)

        return run

    steps = {"eager": (forward(model), zoo._step(model, params, inputs, train)),
             "ours": (forward(ours), zoo._step(ours, params, inputs, train))}
    for fwd, step in steps.values():
        for _ in range(20):
            fwd()
            step()
    best: dict[str, list[float]] = {k: [1e9, 1e9] for k in steps}
    for _ in range(5):
        for label, (fwd, step) in steps.items():
            best[label][0] = min(best[label][0], _median(fwd))
            best[label][1] = min(best[label][1], _median(step))
    for label, (f, s) in best.items():
        print(f"{name} {'train' if train else 'infer'} {label}: forward {f * 1e6:.0f} us, "
              f"step {s * 1e6:.0f} us" + (f" (backward {(s - f) * 1e6:.0f} us)" if train
                                          else ""))
    if rows:
        step = steps["ours"][1]
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(200):
            step()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(rows)


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) < 3 or sys.argv[2] == "train",
         int(sys.argv[3]) if len(sys.argv) > 3 else 0)
