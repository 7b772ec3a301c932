"""Kernel times of single graphs compiled by inductor (no capture, no aotgrad): long sums
(cascade summation), column sums, var, softmax/layer norm rows, and the kernels that check
at run time (gathers with bounds checks, integer division). Medians of many calls against
eager, in one process; run it once per variant of the inductor package to compare, e.g.

    PYTHONPATH=packages/aotgrad/src:packages/inductor/src python tools/bench/kernel_micro.py
    PYTHONPATH=packages/aotgrad/src:/tmp/base/inductor/src python tools/bench/kernel_micro.py

(`--threads N` sets the kernels' OpenMP threads; `--only a,b` picks cases.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "inductor"))
from aten_trace import trace_aten
from inductor import compile_aten, config

Case = tuple[Callable[..., Any], tuple[torch.Tensor, ...]]


def _cases() -> dict[str, Case]:
    g = torch.Generator().manual_seed(0)
    big = torch.rand(6_000_000, generator=g)
    rows = torch.rand(4, 1_000_000, generator=g)
    cols = torch.rand(300_000, 32, generator=g)
    mid = torch.rand(512, 8192, generator=g)
    small = torch.randn(256, 1024, generator=g)
    w = torch.randn(1000, 64, generator=g)
    idx = torch.randint(0, 1000, (4096,), generator=g)
    flat = torch.randn(1_000_000, generator=g)
    fidx = torch.randint(0, 1_000_000, (1_000_000,), generator=g)
    a = torch.randint(-1000, 1000, (1_000_000,), generator=g)
    b = torch.randint(1, 50, (1_000_000,), generator=g)
    return {
        "sum_6M": (lambda x: x.sum(), (big,)),
        "row_sum_4x1M": (lambda x: x.sum(1), (rows,)),
        "col_sum_300Kx32": (lambda x: x.sum(0), (cols,)),
        "row_sum_512x8192": (lambda x: x.sum(1), (mid,)),
        "var_4x1M": (lambda x: x.var(1), (rows,)),
        "softmax_256x1024": (lambda x: x.softmax(-1), (small,)),
        "layer_norm_256x1024": (
            lambda x: torch.nn.functional.layer_norm(x, (1024,)), (small,)),
        "embedding_4096x64": (lambda w, i: w[i] * 2, (w, idx)),
        "gather_1M": (lambda x, i: x[i] + 1, (flat, fidx)),
        "int_floordiv_mod_1M": (lambda a, b: a // b + a % b, (a, b)),
    }


def _median_us(fn: Callable[[], Any], seconds: float) -> float:
    for _ in range(5):
        fn()
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 20:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", default="")
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    cases = _cases()
    only = [c for c in args.only.split(",") if c]
    threads = args.threads or config.options.threads
    print(f"# inductor from {os.path.dirname(compile_aten.__code__.co_filename)}; "
          f"threads {threads}; torch threads {torch.get_num_threads()}")
    print(f"{'case':24s} {'eager us':>10s} {'ours us':>10s} {'ours/eager':>10s}")
    for name, (fn, inputs) in cases.items():
        if only and name not in only:
            continue
        gm = trace_aten(fn, inputs)
        with config.patch(threads=threads):
            compiled = compile_aten(gm, list(inputs))
        with torch.no_grad():
            # NOTE: each lambda is timed before the loop moves on, so late binding is harmless.
            eager = _median_us(lambda: fn(*inputs), args.seconds)  # noqa: B023
            ours = _median_us(lambda: compiled(*inputs), args.seconds)  # noqa: B023
        print(f"{name:24s} {eager:10.1f} {ours:10.1f} {ours / eager:10.3f}")


if __name__ == "__main__":
    main()
