"""Memory-budget partitioner on GPT-2 training (2 layers, random weights, no downloads).

For every solver (dp, greedy, ilp) and budget (1.0, 0.5, 0.2, 0.0): the saved activation
bytes and estimated recompute time the partitioner plans on GPT-2's joint graph (built by
`aotgrad.joint.build_joint`), then a real training step: through `capture.optimize` with an
aotgrad backend when capture compiles GPT-2, else `aotgrad.aot_function` over
`torch.func.functional_call` (or `aot_module`, by option). A step's saved bytes are counted
by saved-tensor hooks (distinct storages, parameters and inputs excluded) and by the runtime
wrapper's counter (which includes saved parameters), side by side with eager PyTorch and
with torch.compile's own memory-budget partitioner (backend aot_eager_decomp_partition) at
the same budgets. Checks (PASS/FAIL): planned bytes fall monotonically with the budget, never
exceed the budget's target, and at 0.5 are at most half of budget 1.0's; the real steps
save what was planned and compute eager's loss and gradients. Pareto SVGs (one per solver)
go to --svg-dir (default out/).

Usage: python tools/bench/memory_budget.py [--layers N] [--embd N] [--seq N] [--batch N]
           [--attn eager|sdpa] [--estimator flops|profile|testing] [--dropout P]
           [--path auto|capture|aot_function|aot_module] [--svg-dir DIR] [--no-steps]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import pathlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = (1.0, 0.5, 0.2, 0.0)
SOLVERS = ("dp", "greedy", "ilp")


# NOTE: NamedTuple rather than dataclass: tools/bench/run.py loads this file without
# registering it in sys.modules, which dataclasses need for string annotations.
class Planned(NamedTuple):
    solver: str
    budget: float
    target: float
    saved: int
    recompute: float
    seconds: float


class Step(NamedTuple):
    solver: str
    budget: float
    hooked_bytes: int
    wrapper_bytes: int
    loss_ok: bool
    grads_ok: bool
    seconds: float


class LossOnly(torch.nn.Module):
    """GPT-2 LM returning its loss only (a tensor, so every path can trace it)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids, labels=ids, use_cache=False).loss  # type: ignore[no-any-return]


def build_model(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=args.layers,
        n_embd=args.embd,
        n_head=args.heads,
        n_positions=args.seq,
        vocab_size=args.vocab,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=args.dropout,
        embd_pdrop=args.dropout,
        attn_pdrop=args.dropout,
    )
    config._attn_implementation = args.attn
    model = LossOnly(GPT2LMHeadModel(config))
    model.train()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    return model, ids


def joint_graph(model: torch.nn.Module, ids: torch.Tensor) -> Any:
    """GPT-2's joint graph through aotgrad's own tracer (parameters become primals)."""
    from aotgrad.joint import build_joint

    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().requires_grad_() for p in model.parameters()]

    def functional(*flat: torch.Tensor) -> tuple[torch.Tensor]:
        state = dict(zip(names, flat[: len(names)]))
        return (torch.func.functional_call(model, state, (flat[len(names)],)),)

    return build_joint(functional, [*params, ids])


def plan(joint: Any, estimator: str, svg_dir: pathlib.Path | None) -> list[Planned]:
    from aotgrad.partition.analysis import analyze
    from aotgrad.partition.budget import BudgetPlanner
    from aotgrad.partition.estimate import get_estimator
    from aotgrad.partition.knapsack import ilp_available
    from aotgrad.partition.pareto import write_pareto_svg

    info = analyze(joint.gm, joint.num_fwd_outputs)
    planner = BudgetPlanner(info, get_estimator(estimator))
    rows: list[Planned] = []
    for solver in SOLVERS:
        if solver == "ilp" and not ilp_available():
            print("ilp: scipy is not installed, skipped")
            continue
        for budget in BUDGETS:
            start = time.perf_counter()
            _, point = planner.point(budget, solver)
            rows.append(Planned(solver, budget, point.target_bytes, point.saved_bytes,
                                point.recompute_time, time.perf_counter() - start))
        if svg_dir is not None:
            path = write_pareto_svg(svg_dir / f"memory_budget_pareto_{solver}.svg",
                                    planner.pareto(solver), title=f"GPT-2, solver {solver}")
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return rows


@contextlib.contextmanager
def count_saved(exclude: Sequence[torch.Tensor]) -> Iterator[list[int]]:
    """Bytes of the distinct storages saved for backward, except those of `exclude`."""
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}
    total = [0]

    from torch._subclasses.fake_tensor import FakeTensor

    def pack(t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, FakeTensor):  # NOTE: tracing at the first call; nothing is saved
            return t
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded and ptr not in seen:
            seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield total
    total[0] = sum(seen.values())


def train_step(fn: Callable[[torch.Tensor], torch.Tensor], model: torch.nn.Module,
               ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], int]:
    """One step: (loss, grads, bytes of the activations saved for backward)."""
    params = list(model.parameters())
    for p in params:
        p.grad = None
    # NOTE: the same seed for every step, so that dropout draws the same masks in eager and
    # compiled steps (both draw with bernoulli_ in the same order).
    torch.manual_seed(1234)
    with count_saved([*params, ids]) as saved:
        loss = fn(ids)
    loss.backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    return loss.detach(), grads, saved[0]


class _CaptureCounters:
    """The saved-bytes counters of every graph an aotgrad backend compiled under capture."""

    def __init__(self) -> None:
        self.callables: list[Any] = []

    @property
    def graphs(self) -> int:
        return len(self.callables)

    @property
    def last(self) -> int:
        return sum(c.saved_bytes.last for c in self.callables)


def compiled_module(model: torch.nn.Module, path: str) -> tuple[Callable[..., Any], str, Any]:
    """aotgrad's training path: `capture.optimize` with an aotgrad backend, or aot_module."""
    import aotgrad
    from aotgrad.backend import run_graph_as_is

    if path == "capture":
        import capture

        inner = aotgrad.make_backend(run_graph_as_is, run_graph_as_is,
                                     partition_fn="memory_budget")
        counters = _CaptureCounters()

        def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            compiled = inner(gm, example_inputs)
            counters.callables.append(compiled)
            return compiled

        return capture.optimize(model, backend=backend), "capture.optimize", counters
    if path == "aot_module":
        wrapped = aotgrad.aot_module(model, run_graph_as_is, partition_fn="memory_budget")
        return wrapped, "aotgrad.aot_module", wrapped.saved_bytes
    # NOTE: aot_function over functional_call: parameters are explicit inputs, and
    # functional_call keeps GPT-2's tied embedding / lm_head weights tied.
    names = [n for n, _ in model.named_parameters()]
    params = list(model.parameters())

    def functional(*flat: torch.Tensor) -> torch.Tensor:
        state = dict(zip(names, flat[: len(names)]))
        return torch.func.functional_call(model, state, (flat[len(names)],))  # type: ignore[no-any-return]

    compiled = aotgrad.aot_function(functional, run_graph_as_is, partition_fn="memory_budget")

    def call(ids: torch.Tensor) -> torch.Tensor:
        return compiled(*params, ids)  # type: ignore[no-any-return]

    return call, "aotgrad.aot_function over functional_call", compiled.saved_bytes


def choose_path(model: torch.nn.Module, ids: torch.Tensor, requested: str) -> str:
    """`auto`: capture when it compiles GPT-2 into aotgrad graphs, else aot_module."""
    if requested != "auto":
        return requested
    try:
        import capture

        capture.reset()  # type: ignore[attr-defined]
        fn, _, counters = compiled_module(model, "capture")
        train_step(fn, model, ids)
        if counters.graphs and counters.last > 0:
            return "capture"
        reason = "no graph reached the backend"
    except Exception as exc:  # noqa: BLE001  # NOTE: any capture failure means fallback
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    print(f"capture path unavailable ({reason}); using aotgrad.aot_function")
    return "aot_function"


def real_steps(model: torch.nn.Module, ids: torch.Tensor, solvers: Sequence[str],
               estimator: str, requested_path: str) -> tuple[list[Step], int, str]:
    import aotgrad

    ref_loss, ref_grads, eager_bytes = train_step(model, model, ids)
    with aotgrad.config.patch(partitioner="memory_budget"):
        chosen = choose_path(model, ids, requested_path)
    rows: list[Step] = []
    path = ""
    for solver in solvers:
        for budget in BUDGETS:
            if chosen == "capture":
                import capture

                capture.reset()  # type: ignore[attr-defined]
            with aotgrad.config.patch(partitioner="memory_budget", solver=solver,
                                      estimator=estimator, activation_memory_budget=budget):
                fn, path, counter = compiled_module(model, chosen)
                start = time.perf_counter()
                train_step(fn, model, ids)  # compiles
                seconds = time.perf_counter() - start
                loss, grads, hooked = train_step(fn, model, ids)
            rows.append(Step(
                solver=solver, budget=budget, hooked_bytes=hooked,
                wrapper_bytes=counter.last,
                loss_ok=bool(torch.allclose(loss, ref_loss, rtol=1e-4, atol=1e-5)),
                grads_ok=all(torch.allclose(g, r, rtol=1e-3, atol=1e-5)
                             for g, r in zip(grads, ref_grads)),
                seconds=seconds,
            ))
    return rows, eager_bytes, path


def torch_compile_steps(model: torch.nn.Module, ids: torch.Tensor) -> dict[float, int]:
    """The yardstick: torch.compile's own memory-budget partitioner on the same step.

    `aot_eager_decomp_partition` runs torch's min-cut partitioner (which reads
    `activation_memory_budget`) with ATen graphs run as they are, like our steps. Only the
    benchmark touches torch.compile; the packages never do.
    """
    import torch._dynamo
    import torch._functorch.config as functorch_config

    saved: dict[float, int] = {}
    for budget in BUDGETS:
        torch._dynamo.reset()
        with functorch_config.patch(activation_memory_budget=budget):
            compiled = torch.compile(model, backend="aot_eager_decomp_partition")
            train_step(compiled, model, ids)  # compiles
            saved[budget] = train_step(compiled, model, ids)[2]
    torch._dynamo.reset()
    return saved


def _mib(n: float) -> str:
    return f"{n / 2**20:8.3f}"


def checks(planned: list[Planned]) -> list[tuple[str, bool]]:
    results: list[tuple[str, bool]] = []
    for solver in dict.fromkeys(p.solver for p in planned):
        rows = {p.budget: p for p in planned if p.solver == solver}
        ordered = [rows[b].saved for b in BUDGETS]
        results.append((f"{solver}: saved bytes fall monotonically 1.0 -> 0.5 -> 0.2 -> 0.0",
                        all(a >= b for a, b in itertools.pairwise(ordered))))
        results.append((f"{solver}: saved bytes never exceed the budget's target",
                        all(rows[b].saved <= rows[b].target for b in BUDGETS)))
        results.append((f"{solver}: saved(0.5) <= 0.5 x saved(1.0)",
                        rows[0.5].saved <= 0.5 * rows[1.0].saved))
    return results


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memory_budget", description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1024)
    # NOTE: "eager" by default: with "sdpa", aotgrad's joint graph currently computes wrong
    # gradients through aten._scaled_dot_product_flash_attention_for_cpu_backward.
    parser.add_argument("--attn", default="eager", choices=("sdpa", "eager"),
                        help="transformers attention implementation")
    # NOTE: dropout off by default. With dropout, full recomputation still saves the random
    # values (random ops never run twice), so budget 0.0 saves more than nothing and
    # interpolated budgets sit above budget * saved(1.0).
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--estimator", default="flops", choices=("flops", "profile", "testing"))
    parser.add_argument("--svg-dir", default=str(ROOT / "out"))
    parser.add_argument("--path", default="auto",
                        choices=("auto", "capture", "aot_function", "aot_module"),
                        help="how the real steps compile GPT-2 (auto: capture if it works)")
    parser.add_argument("--no-steps", action="store_true", help="plan only, no training steps")
    return parser.parse_args(argv)


@contextlib.contextmanager
def _without_bench_dir_on_path() -> Iterator[None]:
    """NOTE: tools/bench holds benchmarks named like our packages (guards.py, ...); with this
    folder on sys.path (as a script's folder, or from run.py) `import guards` inside capture
    would find the benchmark instead of the package."""
    here = pathlib.Path(__file__).resolve().parent
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != here]
    try:
        yield
    finally:
        sys.path[:] = saved


def main(argv: list[str]) -> int:
    with _without_bench_dir_on_path():
        return _main(argv)


def _main(argv: list[str]) -> int:
    args = parse(argv)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, ids = build_model(args)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2: {args.layers} layers, n_embd {args.embd}, {args.heads} heads, batch "
          f"{args.batch} x seq {args.seq}, vocab {args.vocab}, {n_params / 1e6:.2f}M params, "
          f"dropout {args.dropout}, estimator {args.estimator}")
    start = time.perf_counter()
    joint = joint_graph(model, ids)
    print(f"joint graph: {len(joint.gm.graph.nodes)} nodes in {time.perf_counter() - start:.1f} s")
    svg_dir = pathlib.Path(args.svg_dir) if args.svg_dir else None
    planned = plan(joint, args.estimator, svg_dir)

    floor = next((p.saved for p in planned if p.budget == 0.0), 0)
    print("\nplanned by the partitioner (saved activation bytes exclude saved primals; budget "
          f"0.0 = full recomputation saves {_mib(floor).strip()} MiB: values of random ops)")
    print(f"{'solver':7} {'budget':>6} {'target MiB':>10} {'saved MiB':>10} {'x b=1.0':>8} "
          f"{'recompute (est)':>16} {'solve s':>8}")
    full = {p.solver: p.saved for p in planned if p.budget == 1.0}
    for p in planned:
        ratio = p.saved / full[p.solver] if full[p.solver] else 0.0
        print(f"{p.solver:7} {p.budget:6.2f} {_mib(p.target):>10} {_mib(p.saved):>10} "
              f"{ratio:8.3f} {p.recompute * 1e3:13.4f} ms {p.seconds:8.2f}")

    results = checks(planned)
    if not args.no_steps:
        solvers = list(dict.fromkeys(p.solver for p in planned))
        steps, eager_bytes, path = real_steps(model, ids, solvers, args.estimator, args.path)
        print(f"\nreal training steps through {path} (second call; eager saves "
              f"{_mib(eager_bytes).strip()} MiB of activations)")
        try:
            torch_saved = torch_compile_steps(model, ids)
        except Exception as exc:  # noqa: BLE001  # NOTE: the yardstick is optional
            print(f"torch.compile yardstick failed: {type(exc).__name__}: {exc}")
            torch_saved = {}
        print(f"{'solver':7} {'budget':>6} {'hooked MiB':>10} {'x eager':>8} {'planned MiB':>11} "
              f"{'wrapper MiB':>11} {'torch.compile MiB':>17} {'x torch':>7} {'loss':>5} "
              f"{'grads':>5} {'compile s':>9}")
        by_key = {(p.solver, p.budget): p for p in planned}
        for s in steps:
            p = by_key[(s.solver, s.budget)]
            wrapper = _mib(s.wrapper_bytes)
            theirs = torch_saved.get(s.budget)
            theirs_mib = _mib(theirs) if theirs is not None else "n/a"
            ratio = f"{s.hooked_bytes / theirs:7.3f}" if theirs else "    n/a"
            print(f"{s.solver:7} {s.budget:6.2f} {_mib(s.hooked_bytes):>10} "
                  f"{s.hooked_bytes / max(eager_bytes, 1):8.3f} {_mib(p.saved):>11} "
                  f"{wrapper:>11} {theirs_mib:>17} {ratio} {'ok' if s.loss_ok else 'BAD':>5} "
                  f"{'ok' if s.grads_ok else 'BAD':>5} {s.seconds:9.2f}")
        for s in steps:
            planned_bytes = by_key[(s.solver, s.budget)].saved
            results.append((f"{s.solver} budget {s.budget}: step matches eager (loss, grads)",
                            s.loss_ok and s.grads_ok))
            results.append((f"{s.solver} budget {s.budget}: step saves the planned bytes",
                            s.hooked_bytes <= planned_bytes))
    print()
    for label, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    failed = sum(1 for _, ok in results if not ok)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
