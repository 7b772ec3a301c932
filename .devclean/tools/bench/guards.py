"""Guard check cost: the compiled guard and the interpreted walk against one eager torch.add.

Run: `hatch run bench guards` (or `python tools/bench/guards.py [--quick]`).
Cases: (a) one tensor argument, (b) eight tensor arguments and four Python constants,
(c) a module whose parameters are reached as `self.layers[i].weight`, for 25..200 layers.
Each guard tree also holds the global-state and backend checks a real entry has.
Timings: `time.perf_counter_ns` over many short batches of calls (about 50 us each), the
fastest batch reported: on a loaded machine (other jobs on the same cores) a long batch is
almost always preempted, a short one often is not, and preemption only ever adds time. The
eager add is measured the same way in the same run (at the start and between the cases,
the best time kept), so the ratios are like for like; the load average is printed. Every
case is timed in ROUNDS interleaved rounds, its best round kept. Targets (PASS/FAIL
printed, exit status 0 either way): (a) compiled <= 0.25x eager add, (b) <= 1.0x,
(c) linear in the number of accessors, and the interpreted walk >= 5x slower than the
compiled check in every case.
Each case is compiled twice: with the native checker (tensor, global-state and backend
checks in one C++ call; see guards/native) and without it (the pure-Python fallback used
where it cannot be built, or with GUARDS_NATIVE=0); the targets are judged for both, the
native path being the default. Rows "positional" time `fn_args`
(`compile_guard(tree, arg_names)`), which takes the locals as arguments instead of a
dict. `--floor` also prints the cost of each Python-level primitive the pure-Python check
is made of, and the sum of the unavoidable ones per case (what a perfect generated
function would still cost in pure Python).
"""

from __future__ import annotations

import itertools
import os
import pathlib
import sys
import time
import timeit
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
from guards.codegen import CompiledGuard
from guards.native import load_native, native_status


def eager_backend(gm: Any, example_inputs: Any) -> Any:
    """Stands in for a backend (its identity is what BackendMatch checks)."""
    return gm


def _batch_size(fn: Callable[..., object], args: tuple[Any, ...], budget_ns: int) -> int:
    """Calls per batch so that one batch takes about `budget_ns`."""
    start = time.perf_counter_ns()
    for _ in range(20):
        fn(*args)
    per_call = max((time.perf_counter_ns() - start) / 20, 1.0)
    return max(int(budget_ns / per_call), 3)


def measure(fn: Callable[..., object], args: tuple[Any, ...], batches: int = 400,
            budget_ns: int = 50_000) -> float:
    """The fastest of `batches` short batches of calls, in ns per call (see module doc)."""
    number = _batch_size(fn, args, budget_ns)
    best = float("inf")
    loop = range(number)
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in loop:
            fn(*args)
        best = min(best, (time.perf_counter_ns() - start) / number)
    return best


def measure_fresh(fn: Callable[[dict[str, object], dict[str, object]], object],
                  make_locals: Callable[[], dict[str, object]], batches: int = 400,
                  number: int = 20) -> float:
    """Like `measure`, but every call gets new tensor objects (made outside the timing)."""
    best = float("inf")
    for _ in range(batches):
        calls = [make_locals() for _ in range(number)]
        start = time.perf_counter_ns()
        for L in calls:
            fn(L, {})
        best = min(best, (time.perf_counter_ns() - start) / number)
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


def primitive(stmt: str, env: dict[str, Any], batches: int = 300, number: int = 200) -> float:
    """ns of one `stmt` (fastest short batch, minus the empty timeit loop)."""
    timer = timeit.Timer(stmt, globals=env)
    empty = timeit.Timer("pass", globals=env)
    best = min(timer.timeit(number) for _ in range(batches)) / number
    loop = min(empty.timeit(number) for _ in range(batches)) / number
    return max(best - loop, 0.0) * 1e9


def floor_table(add_ns: float) -> None:
    """The cost of each primitive a generated check is made of, and per case the sum of the
    ones no pure-Python check can skip (see module doc)."""
    from guards.state import current_backend

    x = torch.randn(4, 8)
    one = torch.randn(1)
    keys = torch._C._dispatch_keys(x)

    def call(L: object, G: object) -> bool:
        return True

    env: dict[str, Any] = {
        "torch": torch, "x": x, "one": one, "L": {"x": x, "n": 3}, "G": {}, "n": 3, "call": call,
        "T": torch.Tensor, "f32": torch.float32, "sh": torch.Size([4, 8]),
        "sh1": torch.Size([1]), "st": (8, 1), "strided": torch.strided,
        "grad": torch._C.is_grad_enabled, "default_dtype": torch.get_default_dtype,
        "determ": torch._C._get_deterministic_algorithms,
        "any_autocast": torch._C._is_any_autocast_enabled,
        "autocast_on": torch.is_autocast_enabled, "backend": current_backend,
        "keys_of": torch._C._dispatch_keys, "keys_eq": keys.__eq__, "raw": keys.raw_repr(),
        "m": torch.nn.Linear(2, 2), "ml": torch.nn.ModuleList([torch.nn.Linear(2, 2)]),
    }
    rows: list[tuple[str, str, str]] = [
        # (group, label, statement)
        ("call", "call fn(L, G) (empty body)", "call(L, G)"),
        ("global", "torch._C.is_grad_enabled() is True", "grad() is True"),
        ("global", "torch.get_default_dtype() is f32", "default_dtype() is f32"),
        ("global", "torch._C._get_deterministic_algorithms() is False", "determ() is False"),
        ("global", "torch._C._is_any_autocast_enabled() is False", "any_autocast() is False"),
        ("global", "current_backend() is b (ContextVar.get)", "backend() is None"),
        ("", "  alt: torch.is_autocast_enabled('cpu')", "autocast_on('cpu')"),
        ("", "  alt: torch._C._dispatch_tls_local_include_set()",
         "torch._C._dispatch_tls_local_include_set()"),
        ("local", "L['x'] (dict read; 0 with fn_args)", "L['x']"),
        ("tensor", "type(x) is T", "type(x) is T"),
        ("tensor", "x.dtype is f32", "x.dtype is f32"),
        ("tensor", "x.is_cpu", "x.is_cpu"),
        ("tensor", "x.requires_grad is False", "x.requires_grad is False"),
        ("tensor", "x.shape == sh", "x.shape == sh"),
        ("contig", "x.is_contiguous() (stride check, sizes > 1)", "x.is_contiguous()"),
        ("layout", "x.layout is strided (only when keys unchecked)", "x.layout is strided"),
        ("keys", "keys_eq(torch._C._dispatch_keys(x))", "keys_eq(keys_of(x))"),
        ("", "  alt: x.device == dev", "x.device == x.device"),
        ("", "  alt: x.size() == sh", "x.size() == sh"),
        ("", "  alt: x.stride() == st", "x.stride() == st"),
        ("", "  alt: _dispatch_keys(x).raw_repr() == raw", "keys_of(x).raw_repr() == raw"),
        ("", "  alt: x.is_neg() (one key bit)", "x.is_neg()"),
        ("", "  alt: x._version (not sound alone)", "x._version"),
        ("const", "type(n) is int and n == 3", "type(n) is int and n == 3"),
        ("module", "m._modules['0'] / m._parameters['weight']", "ml._modules['0']"),
    ]
    cost: dict[str, float] = {}
    print()
    print("-- primitive costs (fastest short batch, loop overhead removed)")
    print(f"{'primitive':<52}{'ns':>8}{'x add':>8}")
    for group, label, stmt in rows:
        ns = primitive(stmt, env)
        if group:
            cost[group] = cost.get(group, 0.0) + ns
        print(f"{label:<52}{ns:>8.1f}{ns / add_ns:>8.3f}")
    tensor_1 = cost["local"] + cost["tensor"]  # NOTE: plus "layout" or "keys", by mode
    tensor_48 = tensor_1 + cost["contig"]
    const = cost["local"] + cost["const"]
    base = cost["call"] + cost["global"]
    cases = {
        "(a) one tensor, global state + backend": base + tensor_1 + cost["layout"],
        "(a) ... dispatch keys checked": base + tensor_1 + cost["keys"],
        "(a) ... positional (fn_args)": base + tensor_1 + cost["layout"] - cost["local"],
        "(a) ... the tensor check alone": cost["call"] + tensor_1 + cost["layout"],
        "(b) 8 tensors + 4 constants": base + 8 * (tensor_48 + cost["layout"]) + 4 * const,
        "(b) ... dispatch keys checked": base + 8 * (tensor_48 + cost["keys"]) + 4 * const,
        "(b) ... positional (fn_args)": (base + 8 * (tensor_48 + cost["layout"] - cost["local"])
                                         + 4 * (const - cost["local"])),
        "(c) per layer: 2 reads + Parameter check": (2 * cost["module"] + tensor_48
                                                     + cost["layout"]),
    }
    print()
    print("-- pure-Python floor: the sum of the unavoidable primitives above")
    print(f"{'case':<52}{'ns':>8}{'x add':>8}")
    for label, ns in cases.items():
        print(f"{label:<52}{ns:>8.0f}{ns / add_ns:>8.2f}")


#: Rounds over all cases, each case's time being its best round: a stretch of load from
#: other jobs then hits one round of one case, not the whole measurement of that case.
ROUNDS = 3


def _compiled(name: str, tree: GuardTree, L: dict[str, object], native: bool) -> CompiledGuard:
    """The guard compiled with or without the native checker (checked to pass on L)."""
    guard = compile_guard(tree, list(L), native=native)
    if guard.native != native:
        raise SystemExit(f"{name}: native={native} requested, got {guard.native} "
                         f"({native_status()})")
    assert guard.fn(L, {}) is True, name
    assert guard.fn_args is not None and guard.fn_args(*L.values(), {}) is True, name
    return guard


def _timings(cases: list[tuple[str, GuardTree, dict[str, object]]],
             modes: list[tuple[str, bool]], batches: int, add_args: tuple[Any, Any]
             ) -> dict[tuple[str, str], tuple[float, float]]:
    """(case, mode label, or "interp") -> (ns of `fn(L, G)`, ns of `fn_args(*values, G)`),
    the best of ROUNDS interleaved rounds (see ROUNDS); ("add", "eager") -> the eager add,
    timed between the cases the same way."""
    guards = {(name, label): _compiled(name, tree, L, native)
              for name, tree, L in cases for label, native in modes}
    best: dict[tuple[str, str], tuple[float, float]] = {}
    for _ in range(ROUNDS):
        for name, tree, L in cases:
            n = max((batches // 2 if name.startswith("(c)") else batches) // ROUNDS, 10)
            for label, _native in modes:
                guard = guards[(name, label)]
                assert guard.fn_args is not None
                now = (measure(guard.fn, (L, {}), n), measure(guard.fn_args, (*L.values(), {}), n))
                old = best.get((name, label), now)
                best[(name, label)] = (min(old[0], now[0]), min(old[1], now[1]))
            add_ns = measure(torch.add, add_args, max(batches // ROUNDS, 10))
            best[("add", "eager")] = (min(best.get(("add", "eager"), (add_ns, 0.0))[0], add_ns),
                                      0.0)
            interp_ns = measure(interpret, (tree, L, {}), max(batches // 8 // ROUNDS, 5))
            old_interp = best.get((name, "interp"), (interp_ns, 0.0))
            best[(name, "interp")] = (min(old_interp[0], interp_ns), 0.0)
    return best


def _cases(dispatch_keys: bool) -> list[tuple[str, GuardTree, dict[str, object]]]:
    cases: list[tuple[str, GuardTree, dict[str, object]]] = []
    tree, L = case_one_tensor(dispatch_keys)
    cases.append(("(a) one tensor", tree, L))
    tree, L = case_eight_tensors(dispatch_keys)
    cases.append(("(b) 8 tensors + 4 constants", tree, L))
    for n in (25, 50, 100, 200):
        tree, L = case_module(n, dispatch_keys)
        cases.append((f"(c) self.layers[i].weight, n={n}", tree, L))
    return cases


def _linearity(rows: list[tuple[int, float]]) -> tuple[bool, float, str]:
    """(linear?, spread of the marginal slopes, a printable line) for (accessors, ns) rows."""
    slopes = [(t2 - t1) / (n2 - n1) for (n1, t1), (n2, t2) in itertools.pairwise(rows)]
    spread = max(slopes) / min(slopes)
    text = (f"ns per accessor: {', '.join(f'{t / n:.0f}' for n, t in rows)}; marginal ns per "
            f"accessor between sizes: {', '.join(f'{s:.0f}' for s in slopes)}")
    return spread <= 1.5, spread, text


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    batches = 60 if quick else 400
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    have_native = load_native(wait=True) is not None
    print(f"native checker: {native_status()}")
    a = torch.ones(1)
    c = torch.ones(1)
    add_ns = measure(torch.add, (a, c), batches)
    print(f"eager torch.add of two 1-element tensors: {add_ns:.0f} ns "
          f"(torch {torch.__version__}, Python {sys.version.split()[0]})")
    modes = [("native", True), ("pure Python", False)] if have_native else [
        ("pure Python", False)]
    header = (f"{'case':<34}{'accessors':>10}"
              + "".join(f"{label + ' ns':>16}{'x add':>7}" for label, _ in modes)
              + f"{'interp ns':>12}" + "".join(f"{'interp/' + label[:6]:>14}"
                                               for label, _ in modes))
    verdicts: list[str] = []
    for dispatch_keys in (True, False):
        keys_label = "dispatch keys " + ("checked" if dispatch_keys else "unchecked")
        print()
        print(f"-- TensorMatch with {keys_label}; rows '...positional' time fn_args")
        ratios: dict[tuple[str, str], float] = {}
        interp_ok = {label: True for label, _ in modes}
        module_rows: dict[str, list[tuple[int, float]]] = {label: [] for label, _ in modes}
        with backend_scope(eager_backend):
            cases = _cases(dispatch_keys)
            for name, tree, L in cases:
                assert interpret(tree, L, {}) is None, name
            timings = _timings(cases, modes, batches, (a, c))
            # NOTE: the add is the best of its time at the start and between the cases.
            add_ns = min(add_ns, timings[("add", "eager")][0])
            print(f"eager add for the ratios below: {add_ns:.0f} ns")
            print(header)
            for name, tree, L in cases:
                many = name.startswith("(c)")
                interp_ns = timings[(name, "interp")][0]
                accessors = tree.count_nodes()
                row = f"{name:<34}{accessors:>10}"
                args_row = f"{name[:3] + ' ... positional':<34}{accessors:>10}"
                for label, _ in modes:
                    fn_ns, args_ns = timings[(name, label)]
                    ratios[(label, name)] = fn_ns / add_ns
                    interp_ok[label] &= interp_ns / fn_ns >= 5.0
                    row += f"{fn_ns:>16.0f}{fn_ns / add_ns:>7.2f}"
                    args_row += f"{args_ns:>16.0f}{args_ns / add_ns:>7.2f}"
                    if many:
                        module_rows[label].append((accessors, fn_ns))
                row += f"{interp_ns:>12.0f}" + "".join(
                    f"{interp_ns / timings[(name, label)][0]:>14.1f}" for label, _ in modes)
                print(row)
                if not many:
                    print(args_row)
                if name.startswith("(a)"):
                    fresh = f"{'(a) ... a new tensor every call':<34}{accessors:>10}"
                    for label, native in modes:
                        fn = compile_guard(tree, native=native).fn
                        fresh_ns = measure_fresh(fn, lambda: {"x": torch.randn(1)}, batches)
                        fresh += f"{fresh_ns:>16.0f}{fresh_ns / add_ns:>7.2f}"
                    print(fresh)
        for label, _ in modes:
            linear, spread, text = _linearity(module_rows[label])
            print(f"(c) {label}: {text}")
            tag = f"[{label}, {keys_label}]"
            one = ratios[(label, "(a) one tensor")]
            eight = ratios[(label, "(b) 8 tensors + 4 constants")]
            verdicts.append(f"{_verdict(one <= 0.25)} (a) compiled <= 0.25x eager add {tag}: "
                            f"{one:.2f}x")
            verdicts.append(f"{_verdict(eight <= 1.0)} (b) compiled <= 1.0x eager add {tag}: "
                            f"{eight:.2f}x")
            verdicts.append(f"{_verdict(linear)} (c) linear in accessors {tag}: marginal "
                            f"slopes within {spread:.2f}x of each other (<= 1.5x)")
            verdicts.append(f"{_verdict(interp_ok[label])} interpreted walk >= 5x slower than "
                            f"compiled in every case {tag}")
    if "--floor" in argv:
        floor_table(add_ns)
    add_again = measure(torch.add, (a, c), batches)
    print()
    print(f"eager torch.add again at the end: {add_again:.0f} ns; load average after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if not have_native:
        print("NOTE: the native checker is unavailable, so the targets are judged on the "
              "pure-Python fallback")
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
