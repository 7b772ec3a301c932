"""Throwaway probe: cost of the dispatch-key memo's miss path."""
import time

import torch

from guards.dispatch_keys import learn, memo_for, raw_keys

K = raw_keys(torch.ones(1))
for label, fn in [("raw_keys", lambda t: raw_keys(t)),
                  ("learn (memoize)", lambda t: learn(memo_for(K), t, K)),
                  ("weakref only", lambda t: __import__("weakref").ref(t, print))]:
    best = 1e18
    for _ in range(5):
        ts = [torch.ones(1) for _ in range(5000)]
        t0 = time.perf_counter_ns()
        for t in ts:
            fn(t)
        best = min(best, (time.perf_counter_ns() - t0) / 5000)
        del ts
    print(f"{label:18s} {best:7.0f} ns")
