"""Guard check cost: the compiled guard and the interpreted walk against one eager torch.add.

Run: `hatch run bench guards` (or `python tools/bench/guards.py [--quick]`).
Cases: (a) one tensor argument, (b) eight tensor arguments and four Python constants,
(c) a module whose parameters are reached as `self.layers[i].weight`, for 25..200 layers.
Each guard tree also holds the global-state and backend checks a real entry has.
Timings: `time.perf_counter_ns` over batches of calls; each round takes the median batch,
and the best round is reported. Targets (PASS/FAIL printed, exit status 0 either way):
(a) compiled <= 0.25x eager add, (b) <= 1.0x, (c) linear in the number of accessors,
and the interpreted walk >= 5x slower than the compiled check in every case.
"""

from __future__ import annotations

import itertools
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# NOTE: this file is named like the package it measures. Drop its folder from sys.path so
# that `import guards` finds the package (run.py puts the folder first), and if this file was
# itself imported as `guards` (by any code running with the folder on sys.path), hand the
# real package over: the import system returns whatever sys.modules["guards"] holds.
_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]
if __name__ == "guards":
    import importlib

    del sys.modules["guards"]
    sys.modules["guards"] = importlib.import_module("guards")

import torch
from guards import (
    BackendMatch,
    EqualsMatch,
    GlobalStateMatch,
    GuardBuilder,
    GuardTree,
    LengthMatch,
    LocalSource,
    ParamSource,
    SubmoduleSource,
    TensorMatch,
    TypeMatch,
    backend_scope,
    compile_guard,
    interpret,
)


def eager_backend(gm: Any, example_inputs: Any) -> Any:
    """Stands in for a backend (its identity is what BackendMatch checks)."""
    return gm


def measure(fn: Callable[..., object], args: tuple[Any, ...], number: int,
            rounds: int = 7, batches: int = 5) -> float:
    """Best over rounds of the median batch, in ns per call."""
    best = float("inf")
    for _ in range(rounds):
        samples = []
        for _ in range(batches):
            start = time.perf_counter_ns()
            for _ in range(number):
                fn(*args)
            samples.append((time.perf_counter_ns() - start) / number)
        best = min(best, statistics.median(samples))
    return best


def measure_fresh(fn: Callable[[dict[str, object], dict[str, object]], object],
                  make_locals: Callable[[], dict[str, object]], number: int,
                  rounds: int = 7, batches: int = 5) -> float:
    """Like `measure`, but every call gets new tensor objects (made outside the timing)."""
    best = float("inf")
    for _ in range(rounds):
        samples = []
        for _ in range(batches):
            calls = [make_locals() for _ in range(number)]
            start = time.perf_counter_ns()
            for L in calls:
                fn(L, {})
            samples.append((time.perf_counter_ns() - start) / number)
        best = min(best, statistics.median(samples))
    return best


def _base(dispatch_keys: bool) -> GuardBuilder:
    b = GuardBuilder()
    b.add_global(GlobalStateMatch.current())
    b.add_global(BackendMatch.of(eager_backend))
    return b


def case_one_tensor(dispatch_keys: bool) -> tuple[GuardTree, dict[str, object]]:
    x = torch.randn(1)
    b = _base(dispatch_keys)
    b.add(LocalSource("x"), TensorMatch.from_tensor(x, dispatch_keys=dispatch_keys))
    return b.build(), {"x": x}


def case_eight_tensors(dispatch_keys: bool) -> tuple[GuardTree, dict[str, object]]:
    L: dict[str, object] = {}
    b = _base(dispatch_keys)
    for i in range(8):
        t = torch.randn(4, 8)
        L[f"x{i}"] = t
        b.add(LocalSource(f"x{i}"), TensorMatch.from_tensor(t, dispatch_keys=dispatch_keys))
    for name, value in [("n", 3), ("eps", 1e-5), ("mode", "train"), ("flag", True)]:
        L[name] = value
        b.add(LocalSource(name), EqualsMatch(value))
    return b.build(), L


class Stack(torch.nn.Module):
    """`layers` of bias-free Linear layers: one parameter each."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4, bias=False) for _ in range(n))


def case_module(n: int, dispatch_keys: bool) -> tuple[GuardTree, dict[str, object]]:
    model = Stack(n)
    me = LocalSource("self")
    b = _base(dispatch_keys)
    b.add(me, TypeMatch(Stack))
    layers = SubmoduleSource(me, "layers")
    b.add(layers, LengthMatch(n))
    for i, layer in enumerate(model.layers):
        weight = ParamSource(SubmoduleSource(layers, str(i)), "weight")
        b.add(weight, TensorMatch.from_tensor(layer.weight, dispatch_keys=dispatch_keys))
    return b.build(), {"self": model}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    number = 200 if quick else 2000
    rounds = 3 if quick else 7
    a = torch.ones(1)
    c = torch.ones(1)
    add_ns = measure(torch.add, (a, c), number * 2, rounds)
    print(f"eager torch.add of two 1-element tensors: {add_ns:.0f} ns "
          f"(torch {torch.__version__}, Python {sys.version.split()[0]})")
    header = (f"{'case':<34}{'accessors':>10}{'compiled ns':>13}{'x add':>8}"
              f"{'interp ns':>12}{'interp/comp':>13}")
    verdicts: list[str] = []
    for dispatch_keys in (True, False):
        print()
        print(f"-- TensorMatch with dispatch keys {'checked' if dispatch_keys else 'unchecked'}")
        print(header)
        cases: list[tuple[str, GuardTree, dict[str, object], int]] = []
        tree, L = case_one_tensor(dispatch_keys)
        cases.append(("(a) one tensor", tree, L, number))
        tree, L = case_eight_tensors(dispatch_keys)
        cases.append(("(b) 8 tensors + 4 constants", tree, L, number))
        module_rows: list[tuple[int, int, float]] = []
        for n in (25, 50, 100, 200):
            tree, L = case_module(n, dispatch_keys)
            cases.append((f"(c) self.layers[i].weight, n={n}", tree, L, max(number // n, 20)))
        ratios: dict[str, float] = {}
        interp_ok = True
        with backend_scope(eager_backend):
            for name, tree, L, reps in cases:
                guard = compile_guard(tree)
                assert guard.fn(L, {}) is True, name
                assert interpret(tree, L, {}) is None, name
                compiled_ns = measure(guard.fn, (L, {}), reps, rounds)
                interp_ns = measure(interpret, (tree, L, {}), max(reps // 10, 5), rounds)
                accessors = tree.count_nodes()
                ratios[name] = compiled_ns / add_ns
                interp_ok &= interp_ns / compiled_ns >= 5.0
                print(f"{name:<34}{accessors:>10}{compiled_ns:>13.0f}{compiled_ns / add_ns:>8.2f}"
                      f"{interp_ns:>12.0f}{interp_ns / compiled_ns:>13.1f}")
                if name.startswith("(c)"):
                    module_rows.append((accessors, 0, compiled_ns))
                if name.startswith("(a)"):
                    bare = GuardBuilder().add(LocalSource("x"), tree.children[0].checks[0])
                    bare_ns = measure(compile_guard(bare.build()).fn, (L, {}), reps, rounds)
                    print(f"{'(a) ... the tensor check alone':<34}{accessors:>10}{bare_ns:>13.0f}"
                          f"{bare_ns / add_ns:>8.2f}")
                    fresh_ns = measure_fresh(guard.fn, lambda: {"x": torch.randn(1)}, reps, rounds)
                    print(f"{'(a) ... a new tensor every call':<34}{accessors:>10}{fresh_ns:>13.0f}"
                          f"{fresh_ns / add_ns:>8.2f}")
        slopes = [(t2 - t1) / (n2 - n1) for (n1, _, t1), (n2, _, t2)
                  in itertools.pairwise(module_rows)]
        per_accessor = [t / n for n, _, t in module_rows]
        linear = max(slopes) / min(slopes) <= 1.5
        print(f"(c) ns per accessor: {', '.join(f'{v:.0f}' for v in per_accessor)}; "
              f"marginal ns per accessor between sizes: {', '.join(f'{s:.0f}' for s in slopes)}")
        label = "dispatch keys checked" if dispatch_keys else "dispatch keys unchecked"
        one = ratios["(a) one tensor"]
        eight = ratios["(b) 8 tensors + 4 constants"]
        spread = max(slopes) / min(slopes)
        verdicts.append(f"{_verdict(one <= 0.25)} (a) compiled <= 0.25x eager add [{label}]: "
                        f"{one:.2f}x")
        verdicts.append(f"{_verdict(eight <= 1.0)} (b) compiled <= 1.0x eager add [{label}]: "
                        f"{eight:.2f}x")
        verdicts.append(f"{_verdict(linear)} (c) linear in accessors [{label}]: marginal "
                        f"slopes within {spread:.2f}x of each other (<= 1.5x)")
        verdicts.append(f"{_verdict(interp_ok)} interpreted walk >= 5x slower than compiled "
                        f"in every case [{label}]")
    print()
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
