"""Per-call overhead of aotgrad's runtime wrapper (not a test: run it as a script).

    .venv/bin/python tests/aotgrad/bench_overhead.py

Min-of-N microseconds per call. For `aot_function(lambda x, w: (x @ w).relu())` and
`aot_module(mlp)` (forward compiler: the graph's own `forward`): the compiled forward graph
alone, a bare `autograd.Function` around it (the floor of any such wrapper: what the training
forward cannot avoid), and the wrapped call; inference under `torch.no_grad()`, training with
parameters requiring grad (forward only). Then `compiler.compile(mlp, backend="aot_eager")`
against eager, when the `compiler` package is installed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import aotgrad
import torch

REPEATS = 2000
ROUNDS = 20


def per_call_us(fn: Callable[[], Any]) -> float:
    """The fastest mean time of one call (microseconds) over ROUNDS rounds of REPEATS calls."""
    for _ in range(300):
        fn()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(REPEATS):
            fn()
        best = min(best, (time.perf_counter() - start) / REPEATS)
    return best * 1e6


def bare_function(fw: Callable[..., Any], num_outputs: int) -> Callable[..., Any]:
    """A minimal autograd.Function around `fw` that saves the outputs after `num_outputs`."""

    class Bare(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            outs = fw(*args)
            ctx.save_for_backward(*outs[num_outputs:])
            return tuple(outs[:num_outputs])

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise NotImplementedError

    return Bare.apply


def measure(name: str, compiled: Callable[..., Any], args: list[Any],
            graphs: list[Any], num_outputs: int, rows: list[tuple[str, float]]) -> None:
    with torch.no_grad():
        compiled(*args)
        graph = graphs[-1].forward
        graph_args = [*getattr(compiled, "_lifted_state", list)(), *args]
        rows.append((f"{name} inference: fw graph alone", per_call_us(lambda: graph(*graph_args))))
        rows.append((f"{name} inference: wrapped call", per_call_us(lambda: compiled(*args))))
    compiled(*args)
    fw = graphs[-1].forward
    bare = bare_function(fw, num_outputs)
    with torch.no_grad():
        rows.append((f"{name} training: fw graph alone (no grad)",
                     per_call_us(lambda: fw(*graph_args))))
    rows.append((f"{name} training: bare autograd.Function", per_call_us(lambda: bare(*graph_args))))
    rows.append((f"{name} training: wrapped call", per_call_us(lambda: compiled(*args))))


def main() -> None:
    torch.manual_seed(0)
    rows: list[tuple[str, float]] = []
    graphs: list[Any] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return gm.forward

    x = torch.randn(4, 8)
    w = torch.randn(8, 8, requires_grad=True)
    f = aotgrad.aot_function(lambda a, b: (a @ b).relu(), fw_compiler=keep)
    measure("aot_function", f, [x, w], graphs, 1, rows)

    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    module = aotgrad.aot_module(mlp, fw_compiler=keep)
    params = list(mlp.parameters())
    module._lifted_state = lambda: params  # type: ignore[attr-defined]
    measure("aot_module(mlp)", module, [x], graphs, 1, rows)
    try:
        import compiler  # type: ignore[import-not-found]
    except ImportError:
        compiler = None
    if compiler is not None:
        cm = compiler.compile(mlp, backend="aot_eager")
        with torch.no_grad():
            cm(x)
            rows.append(("compile(mlp, aot_eager) inference: eager", per_call_us(lambda: mlp(x))))
            rows.append(("compile(mlp, aot_eager) inference: compiled", per_call_us(lambda: cm(x))))
        cm(x)
        rows.append(("compile(mlp, aot_eager) training fwd: eager", per_call_us(lambda: mlp(x))))
        rows.append(("compile(mlp, aot_eager) training fwd: compiled", per_call_us(lambda: cm(x))))
    for name, us in rows:
        print(f"{name:52s} {us:8.2f} us")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
