"""Time of the fast-path guard of one GPU-zoo transformers model, compiled on the CPU.

Compiles `MODEL` from `zoo_gpu_models.py` (gpt2, bert, t5) with the eager backend at 2x16
tokens under no_grad, calls it three times, and times its compiled entry's guard `check`
(the snapshot fast path once armed) over 2000 calls; prints the lines of the generated
fast path and how often the snapshot was re-armed.

Usage: python tools/bench/guard_fast_path.py [gpt2|bert|t5 ...]
"""

from __future__ import annotations

import os
import sys
import time

# NOTE: tools/bench/guards.py would shadow the `guards` package (see overhead.py).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import compiler
import torch
from capture import frame
from guards import snapshot

sys.path.append(_HERE)
from zoo_gpu_models import MODELS_GPU


def measure(name: str) -> str:
    """One line: the model, its fast-path lines, re-arms, and microseconds per check."""
    refreshes = 0
    original = snapshot.SnapshotSet.refresh

    def counting(self: snapshot.SnapshotSet, L: dict[str, object],
                 G: dict[str, object]) -> bool:
        nonlocal refreshes
        refreshes += 1
        return original(self, L, G)

    snapshot.SnapshotSet.refresh = counting  # type: ignore[method-assign]
    try:
        compiler.reset()
        torch.manual_seed(0)
        model, inputs = MODELS_GPU[name]()
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        inputs = tuple(t[:2, :16] for t in inputs)
        compiled = compiler.compile(model, backend="eager")
        with torch.no_grad():
            for _ in range(3):
                compiled(*inputs)
            wrapper = next(w for w in frame._all_wrappers if w.cache.entries)
            entry = wrapper.cache.entries[0]
            L, G = wrapper._binder(model, *inputs), wrapper.f_globals
            assert entry.check(L, G)
            best = float("inf")
            for _ in range(20):
                start = time.perf_counter()
                for _ in range(100):
                    entry.check(L, G)
                best = min(best, (time.perf_counter() - start) / 100)
    finally:
        snapshot.SnapshotSet.refresh = original  # type: ignore[method-assign]
    source = entry.guard.source
    fast = source.split("def guard(L, G)")[-1]
    return (f"{name:6s} fast path {len(fast.splitlines()):5d} lines, re-armed {refreshes}x, "
            f"{best * 1e6:7.1f} us per check (best of 20 x 100)")


def main(argv: list[str]) -> int:
    """Print one line per model."""
    for name in argv or ["gpt2", "bert", "t5"]:
        print(measure(name), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
