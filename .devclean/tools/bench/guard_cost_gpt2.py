"""Guard cost of a tiny GPT-2 (transformers), the compiled frame's guard checked alone.

Compiles `GPT2LMHeadModel` (2 layers, d=32) with the eager backend under no_grad, takes the
guard tree of its entry, and reports: the number of checks, the lines of the generated guard,
the bytecode instructions one check executes (counted with `f_trace_opcodes`: independent of
machine load) and the time of one check (best batch), each for the guard generated with and
without inlining leaf accessors into the conditions (`guards.codegen._inlinable`).

Usage: python tools/bench/guard_cost_gpt2.py
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

# NOTE: tools/bench/guards.py would shadow the `guards` package (see overhead.py).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import compiler
import torch
import transformers
from capture import frame
from guards import codegen


def _guard(tree: Any, inline: bool) -> Callable[..., bool]:
    original = codegen._inlinable
    if not inline:
        codegen._inlinable = lambda node: False  # type: ignore[assignment]
    try:
        return codegen.compile_guard(tree)  # type: ignore[return-value]
    finally:
        codegen._inlinable = original


def _opcodes(fn: Callable[..., bool], L: Any, G: Any) -> int:
    count = 0

    def tracer(frame_: Any, event: str, arg: Any) -> Any:
        nonlocal count
        frame_.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        assert fn(L, G)
    finally:
        sys.settrace(None)
    return count


def _best_us(fn: Callable[..., bool], L: Any, G: Any, batch: int = 200,
             repeats: int = 150) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn(L, G)
        best = min(best, (time.perf_counter_ns() - start) / batch)
    return best / 1000


def main(argv: list[str] | None = None) -> int:
    """Print the guard cost of the tiny GPT-2 with and without inlined accessors."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=96,
                                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(1, 96, (2, 8), generator=torch.Generator().manual_seed(1))
    compiled = compiler.compile(model, backend="eager")
    torch.set_grad_enabled(False)
    compiled(input_ids=ids, use_cache=False)
    wrapper = next(w for w in frame._all_wrappers if w.cache.entries)
    tree = wrapper.cache.entries[0].tree
    L = wrapper._binder(model, input_ids=ids, use_cache=False)
    G = wrapper.f_globals
    print(f"tiny GPT-2: {tree.count_checks()} checks; load average {os.getloadavg()[0]:.1f}")
    for inline in (False, True):
        guard = _guard(tree, inline)
        fn = guard.fn  # type: ignore[attr-defined]
        print(f"  inline={inline!s:<5} {len(guard.source.splitlines()):5d} lines  "  # type: ignore[attr-defined]
              f"{_opcodes(fn, L, G):5d} instructions/check  {_best_us(fn, L, G):6.1f} us/check")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
