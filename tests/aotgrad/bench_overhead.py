"""Per-call overhead of aotgrad's runtime wrapper (not a test: run it as a script).

    .venv/bin/python tests/aotgrad/bench_overhead.py

Prints min-of-N microseconds per call for: the compiled forward graph alone, an
`aot_function` call (inference and training forward), and `compiler.compile(mlp,
backend="aot_eager")` against eager (inference and training forward).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import aotgrad
import torch

REPEATS = 2000
ROUNDS = 15


def per_call_us(fn: Callable[[], Any]) -> float:
    """The fastest mean time of one call (microseconds) over ROUNDS rounds of REPEATS calls."""
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(REPEATS):
            fn()
        best = min(best, (time.perf_counter() - start) / REPEATS)
    return best * 1e6


def main() -> None:
    torch.manual_seed(0)
    graphs: list[Any] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return gm.forward

    x = torch.randn(4, 8)
    w = torch.randn(8, 8)
    wg = w.clone().requires_grad_()
    f = aotgrad.aot_function(lambda a, b: (a @ b).relu(), fw_compiler=keep)
    with torch.no_grad():
        f(x, w)
    inf_graph = graphs[-1].forward
    f(x, wg)
    fw_graph = graphs[-1].forward
    rows: list[tuple[str, float]] = []
    with torch.no_grad():
        rows.append(("aot_function inference: fw graph alone", per_call_us(lambda: inf_graph(x, w))))
        rows.append(("aot_function inference: wrapped call", per_call_us(lambda: f(x, w))))
    rows.append(("aot_function training: fw graph alone", per_call_us(lambda: fw_graph(x, wg))))
    rows.append(("aot_function training: wrapped call", per_call_us(lambda: f(x, wg))))

    try:
        import compiler
    except ImportError:
        compiler = None
    if compiler is not None:
        mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        cm = compiler.compile(mlp, backend="aot_eager")
        xm = torch.randn(4, 8)
        with torch.no_grad():
            cm(xm)
            rows.append(("mlp inference: eager", per_call_us(lambda: mlp(xm))))
            rows.append(("mlp inference: aot_eager", per_call_us(lambda: cm(xm))))
        cm(xm)
        rows.append(("mlp training fwd: eager", per_call_us(lambda: mlp(xm))))
        rows.append(("mlp training fwd: aot_eager", per_call_us(lambda: cm(xm))))
    for name, us in rows:
        print(f"{name:45s} {us:8.2f} us")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
