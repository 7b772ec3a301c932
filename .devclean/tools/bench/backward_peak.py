"""Backward peak memory and backward time of a training step, ours against torch.compile.

For the models of `memory_budget.py` (`--models`, mlp and cnn by default), one backend
(`--backend`, inductor by default) and the budgets given: the step compiled with
`compiler.compile(loss_fn, backend=..., options={"activation_memory_budget": b})` and with
`torch.compile(loss_fn, backend=...)` under torch's `activation_memory_budget = b`.

Peak memory (CPU): the allocator's own events (the profiler's `[memory]` records, each
allocation and free with its bytes), summed in order from the step's start (gradients set
to None first, so the step allocates them): `fw held` is what is live when the forward
returns (the saved activations, the loss), `bw peak` the most live at any moment of the
backward; parameters and inputs, allocated before the step, are not counted. Backward time:
`--repeat` round-robin rounds after two untimed steps, each round a forward (untimed) and a
timed `loss.backward()` of ours and of torch's, in a rotating order; medians over rounds and
the median of the per-round ratios. Gradients are checked against eager.

Usage: python tools/bench/backward_peak.py [--models mlp,cnn] [--backend inductor]
           [--budgets 1.0,0.5] [--repeat 15] [--threads 1] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

HERE = pathlib.Path(__file__).resolve().parent
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _memory_budget() -> Any:
    """`memory_budget.py` (its models), loaded as `run.py` loads benchmarks."""
    spec = importlib.util.spec_from_file_location("bench_memory_budget", HERE / "memory_budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _zero_grads(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.grad = None


def peak_of_step(fn: Callable[..., torch.Tensor], work: Any) -> tuple[int, int]:
    """(bytes live when the forward returns, most bytes live during the backward), both
    counted from the step's start by the CPU allocator's events."""
    from torch.profiler import ProfilerActivity, profile

    _zero_grads(work.model)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = fn(*work.inputs)
        mark = time.time_ns()
        loss.backward()
        del loss
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    # NOTE: the profiler's clock is the wall clock in ns (time.time_ns): the mark splits it
    held = sum(e.nbytes() for e in events if e.start_ns() < mark)
    live = peak = held
    for e in events:
        if e.start_ns() >= mark:
            live += e.nbytes()
            peak = max(peak, live)
    return held, peak


def backward_times(fns: dict[str, Callable[..., torch.Tensor]], work: Any, rounds: int,
                   clock: Callable[[], float]) -> dict[str, list[float]]:
    """Seconds of `loss.backward()` per function and round (forwards untimed)."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}

    def one(name: str) -> float:
        _zero_grads(work.model)
        loss = fns[name](*work.inputs)
        start = clock()
        loss.backward()
        return clock() - start

    for name in names:
        one(name)
        one(name)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(one(name))
    return times


def _grads(fn: Callable[..., torch.Tensor], work: Any) -> list[torch.Tensor]:
    _zero_grads(work.model)
    fn(*work.inputs).backward()
    return [p.grad.clone() for p in work.model.parameters() if p.grad is not None]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.allclose(x, y, rtol=1e-3, atol=1e-4)
                                    for x, y in zip(a, b))


def _mb(n: int) -> str:
    return f"{n / 1e6:8.1f}"


def main(argv: list[str]) -> int:
    """Print one row per model and budget; 1 if a gradient differs from eager's."""
    parser = argparse.ArgumentParser("backward_peak", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--budgets", default="1.0,0.5")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args(argv)
    bench = _memory_budget()
    with bench._without_bench_dir_on_path():
        return _main(args, bench)


def _main(args: argparse.Namespace, bench: Any) -> int:
    import compiler
    import torch._dynamo
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    torch.set_num_threads(args.threads)
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, backend "
          f"{args.backend}; MB from the step's start; backward ms ({args.clock} clock): "
          f"median of {args.repeat} rounds\n")
    print(f"{'model':6} {'budget':>6} | {'fw held':>8} {'bw peak':>8} | {'torch fw':>8} "
          f"{'torch bw':>8} | {'bw ms':>7} {'torch ms':>8} {'t/torch':>7} | grads")
    failed = 0
    for name in args.models.split(","):
        work = bench.build(name)
        with bench.frozen_buffers(work.model):
            want = _grads(work.loss, work)
        for budget in [float(b) for b in args.budgets.split(",")]:
            ours = compiler.compile(work.loss, backend=args.backend,
                                    options={"activation_memory_budget": budget})
            torch._dynamo.reset()
            with functorch_config.patch(activation_memory_budget=budget):
                theirs = torch.compile(work.loss, backend=args.backend)
                with bench.frozen_buffers(work.model):
                    theirs_ok = _same(_grads(theirs, work), want)
                    ok = _same(_grads(ours, work), want)
                    fns = {"ours": ours, "torch": theirs}
                    held, peak = peak_of_step(ours, work)
                    t_held, t_peak = peak_of_step(theirs, work)
                    times = backward_times(fns, work, args.repeat, CLOCKS[args.clock])
            ms = statistics.median(times["ours"]) * 1e3
            t_ms = statistics.median(times["torch"]) * 1e3
            ratio = statistics.median(a / b for a, b in zip(times["ours"], times["torch"]))
            failed += not ok
            print(f"{name:6} {budget:6.2f} | {_mb(held)} {_mb(peak)} | {_mb(t_held)} "
                  f"{_mb(t_peak)} | {ms:7.1f} {t_ms:8.1f} {ratio:7.3f} | "
                  f"{'ok' if ok else 'DIFFER'}{'' if theirs_ok else ' (torch differs)'}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
