"""Eager ATen ops of one zoo model's step by self CPU time (helper, not a benchmark): what
the compiled kernels replace.

    python tools/bench/_profile_eager.py MODEL infer|train [ROWS]
"""

from __future__ import annotations

import sys

import zoo
from torch.profiler import ProfilerActivity, profile


def main(name: str, train: bool, rows: int) -> None:
    m, inp, params = zoo.prepared(name, train)
    step = zoo._step(m, params, inp, train)
    for _ in range(10):
        step()
    n = 30
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            step()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
    print(f"{n} steps")
    print(table)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "train", int(sys.argv[3]) if len(sys.argv) > 3 else 25)
