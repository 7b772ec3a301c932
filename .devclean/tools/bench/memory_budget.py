"""Activation memory budget through `compiler.compile`, against eager and torch.compile.

For every model (GPT-2 with SDPA and with eager attention, ViT, an MLP, a small CNN; random
weights from configs, no downloads, dropout off), backend (aot_eager, inductor) and budget
(1.0, 0.75, 0.5, 0.25, 0.0): one training step compiled with
`compiler.compile(loss_fn, backend=..., options={"activation_memory_budget": b,
"pareto_svg": ...})` and with `torch.compile(loss_fn, backend=...)` under torch's
`activation_memory_budget = b`, side by side with eager autograd.

Saved activation bytes are measured, not estimated: `torch.autograd.graph.saved_tensors_hooks`
around one step, each storage counted once, parameters and inputs left out. Step time
(forward + backward): --repeat rounds (7 by default) after one untimed round, each round one
step of ours, torch's and eager's in a rotating order (round-robin), so the load of a shared
machine drifts over all three alike; ms columns are medians over rounds, t/torch and t/eager
the medians of the per-round ratios. --threads (1 by default): intra-op threads, fewer than
the cores so that other processes on a shared machine do not stall a parallel region. Each row checks the loss and every gradient against eager, and the
Pareto SVG our compile wrote (the chosen point's saved bytes) against the measured bytes.

Checks (PASS/FAIL per model and backend): our step compiled (capture ran no frame eagerly:
such a row would measure eager); budget 1.0 saves at most eager's bytes and at most
torch's x 1.02; every budget b saves at most b x budget 1.0's bytes and at most torch's at b
(x 1.02); budget 0.0 saves nothing; gradients equal eager's; plotted = measured bytes.
Step time at most torch's is reported (t/torch column; rows above 1.1x are listed at the
end), not failed on: this machine's timings are noisy.

Usage: python tools/bench/memory_budget.py [--models gpt2-sdpa,gpt2-eager,vit,mlp,cnn]
           [--backends aot_eager,inductor] [--budgets 1.0,0.75,0.5,0.25,0.0] [--repeat N]
           [--svg-dir DIR] [--svg-budgets 0.5,0.25] [--no-torch] [--threads N]
           [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pathlib
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUDGETS = (1.0, 0.75, 0.5, 0.25, 0.0)
MODELS = ("gpt2-sdpa", "gpt2-eager", "vit", "mlp", "cnn")
BACKENDS = ("aot_eager", "inductor")
SLACK = 1.02  # "within 2%" of torch's bytes
SLOW = 1.1  # step time ratio to torch.compile's listed at the end


# NOTE: NamedTuple rather than dataclass: tools/bench/run.py loads this file without
# registering it in sys.modules, which dataclasses need for string annotations.
class Workload(NamedTuple):
    name: str
    model: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    loss: Callable[..., torch.Tensor]


class Step(NamedTuple):
    loss: torch.Tensor
    grads: list[torch.Tensor]
    saved: int


class Row(NamedTuple):
    model: str
    backend: str
    budget: float
    ours: int
    torch_bytes: int | None
    eager: int
    plotted: int | None
    ours_ms: float
    torch_ms: float | None
    eager_ms: float
    time_ratio: float | None  # median over rounds of ours / torch
    eager_ratio: float  # median over rounds of ours / eager
    grads_ok: bool
    torch_grads_ok: bool | None
    fell_back: bool = False


# ------------------------------------------------------------------------------ models


def _gpt2(attn: str) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=128, vocab_size=1024,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0)
    config._attn_implementation = attn
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 1024, (4, 128), generator=torch.Generator().manual_seed(1))

    def loss(ids: torch.Tensor) -> torch.Tensor:
        return model(ids, labels=ids, use_cache=False).loss  # type: ignore[no-any-return]

    return Workload(f"gpt2-{attn}", model, (ids,), loss)


def _vit() -> Workload:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(hidden_size=192, num_hidden_layers=2, num_attention_heads=3,
                       intermediate_size=768, image_size=64, patch_size=8, num_labels=10,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ViTForImageClassification(config).train()
    gen = torch.Generator().manual_seed(1)
    pixels = torch.randn(8, 3, 64, 64, generator=gen)
    labels = torch.randint(0, 10, (8,), generator=gen)

    def loss(pixels: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return model(pixel_values=pixels, labels=labels).loss  # type: ignore[no-any-return]

    return Workload("vit", model, (pixels, labels), loss)


def _mlp() -> Workload:
    nn = torch.nn
    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.Tanh(),
                          nn.Linear(2048, 2048), nn.SiLU(), nn.Linear(2048, 512)).train()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(256, 512, generator=gen)
    y = torch.randn(256, 512, generator=gen)

    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(model(x), y)

    return Workload("mlp", model, (x, y), loss)


def _cnn() -> Workload:
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).train()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 3, 64, 64, generator=gen)
    labels = torch.randint(0, 10, (16,), generator=gen)

    def loss(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(x), labels)

    return Workload("cnn", model, (x, labels), loss)


def build(name: str) -> Workload:
    torch.manual_seed(0)
    if name.startswith("gpt2-"):
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        return _gpt2(name.removeprefix("gpt2-"))
    if name == "vit":
        return _vit()
    if name == "mlp":
        return _mlp()
    if name == "cnn":
        return _cnn()
    raise ValueError(f"unknown model {name!r}; one of {MODELS}")


# ------------------------------------------------------------------------ measuring


@contextlib.contextmanager
def count_saved(exclude: Sequence[torch.Tensor]) -> Iterator[list[int]]:
    """Bytes of the distinct storages saved for backward, except those of `exclude`."""
    from torch._subclasses.fake_tensor import FakeTensor

    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}
    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, FakeTensor):  # NOTE: tracing at a first call; nothing is saved
            return t
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded and ptr not in seen:
            seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield total
    total[0] = sum(seen.values())


def _state(model: torch.nn.Module) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers()]


def train_step(fn: Callable[..., torch.Tensor], work: Workload, *, count: bool = True) -> Step:
    """One step: (loss, gradients, bytes of the activations saved for backward)."""
    params = list(work.model.parameters())
    for p in params:
        p.grad = None
    if count:
        with count_saved([*_state(work.model), *work.inputs]) as saved:
            loss = fn(*work.inputs)
    else:
        saved, loss = [0], fn(*work.inputs)
    loss.backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    return Step(loss.detach(), grads, saved[0])


# NOTE: --clock cpu: this process's CPU time (time.process_time) instead of wall time; with
# one intra-op thread it is the step's own work, which a loaded shared machine does not
# stretch (wall-clock steps there ran 2-5x longer than their CPU time).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = [time.perf_counter]


def timed_step(fn: Callable[..., torch.Tensor], work: Workload) -> float:
    """Seconds of one training step on the chosen clock (--clock)."""
    clock = _clock[0]
    start = clock()
    train_step(fn, work, count=False)
    return clock() - start


def round_robin(fns: dict[str, Callable[..., torch.Tensor]], work: Workload,
                rounds: int) -> dict[str, list[float]]:
    """Step seconds of each function over `rounds` rounds (after one untimed round), one
    step of each per round, the order rotating from round to round."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in ("ours", "torch", "eager")}
    for name in names:
        timed_step(fns[name], work)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timed_step(fns[name], work))
    return times


def _median_ratio(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The median over rounds of a[i] / b[i] (None without b)."""
    if not a or not b:
        return None
    return statistics.median(x / y for x, y in zip(a, b))


def same(a: Step, b: Step) -> bool:
    if not torch.allclose(a.loss, b.loss, rtol=1e-4, atol=1e-5):
        return False
    return all(torch.allclose(x, y, rtol=1e-3, atol=1e-4) for x, y in zip(a.grads, b.grads))


@contextlib.contextmanager
def frozen_buffers(model: torch.nn.Module) -> Iterator[None]:
    """Every step starts from the same buffers (BatchNorm's running statistics)."""
    saved = [b.detach().clone() for b in model.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, s in zip(model.buffers(), saved):
                b.copy_(s)


def plotted_bytes(path: pathlib.Path) -> int | None:
    """The saved bytes of the point our compile chose, as its Pareto SVG marks it."""
    if not path.exists():
        return None
    ns = "{http://www.w3.org/2000/svg}"
    chosen = ET.parse(path).getroot().find(f"{ns}circle[@id='chosen']")
    return None if chosen is None else int(chosen.get("data-saved-bytes", "-1"))


class _Fallbacks(logging.Handler):
    """Capture's warnings that a frame runs eagerly: such a row would measure eager."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "eagerly" in message:
            self.messages.append(message)


@contextlib.contextmanager
def eager_fallbacks() -> Iterator[list[str]]:
    """The messages of every frame capture ran eagerly inside the block."""
    handler = _Fallbacks()
    logger = logging.getLogger("capture")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def ours(work: Workload, backend: str, budget: float, svg: pathlib.Path | None) -> Any:
    import compiler

    options: dict[str, object] = {"activation_memory_budget": budget}
    if svg is not None:
        options["pareto_svg"] = str(svg)
    return compiler.compile(work.loss, backend=backend, options=options)


def theirs(work: Workload, backend: str, budget: float) -> tuple[Any, Step]:
    """torch.compile at this budget, compiled (and its saved bytes measured) here."""
    import torch._dynamo
    import torch._functorch.config as functorch_config

    torch._dynamo.reset()
    with functorch_config.patch(activation_memory_budget=budget):
        compiled = torch.compile(work.loss, backend=backend)
        train_step(compiled, work)  # compiles forward and backward
        step = train_step(compiled, work)
    return compiled, step


def measure(work: Workload, backend: str, budgets: Sequence[float], eager: Step,
            repeat: int, svg_dir: pathlib.Path | None, svg_budgets: Sequence[float],
            with_torch: bool) -> list[Row]:
    import compiler

    rows: list[Row] = []
    for budget in budgets:
        compiler.reset()
        svg = None
        if svg_dir is not None and budget in svg_budgets:
            svg = svg_dir / f"memory_budget_{work.name}_{backend}_{budget:.2f}.svg"
            svg.unlink(missing_ok=True)
        with frozen_buffers(work.model):
            with eager_fallbacks() as fallbacks:
                mine = ours(work, backend, budget, svg)
                train_step(mine, work)  # compiles
                step = train_step(mine, work)
            for message in fallbacks:
                print(f"  EAGER FALLBACK ({work.name}, {backend}, {budget}): {message}")
            torch_fn, torch_step = theirs(work, backend, budget) if with_torch else (None, None)
            fns = {"ours": mine, "eager": work.loss}
            if torch_fn is not None:
                fns["torch"] = torch_fn
            times = round_robin(fns, work, repeat)
        ms = {k: statistics.median(v) * 1e3 if v else None for k, v in times.items()}
        rows.append(Row(
            model=work.name, backend=backend, budget=budget, ours=step.saved,
            torch_bytes=torch_step.saved if torch_step else None, eager=eager.saved,
            plotted=plotted_bytes(svg) if svg is not None else None,
            ours_ms=ms["ours"] or 0.0, torch_ms=ms["torch"], eager_ms=ms["eager"] or 0.0,
            time_ratio=_median_ratio(times["ours"], times["torch"]),
            eager_ratio=_median_ratio(times["ours"], times["eager"]) or 0.0,
            grads_ok=same(step, eager),
            torch_grads_ok=same(torch_step, eager) if torch_step else None,
            fell_back=bool(fallbacks),
        ))
        print(_format(rows[-1], rows[0].ours if rows[0].budget == 1.0 else None), flush=True)
    return rows


# -------------------------------------------------------------------------- report


def _mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 1e6:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.3f}"


HEADER = (f"{'model':10} {'backend':9} {'budget':>6} {'ours MB':>8} {'torch MB':>8} "
          f"{'eager MB':>8} {'x torch':>7} {'x b=1':>6} {'plot MB':>8} {'ours ms':>8} "
          f"{'torch ms':>8} {'eager ms':>8} {'t/torch':>7} {'t/eager':>7} {'grads':>5}")


def _format(r: Row, full: int | None = None) -> str:
    plotted = "n/a" if r.plotted is None else ("=" if r.plotted == r.ours else _mb(r.plotted))
    torch_ms = "n/a" if r.torch_ms is None else f"{r.torch_ms:.1f}"
    return (f"{r.model:10} {r.backend:9} {r.budget:6.2f} {_mb(r.ours):>8} "
            f"{_mb(r.torch_bytes):>8} {_mb(r.eager):>8} {_ratio(r.ours, r.torch_bytes):>7} "
            f"{_ratio(r.ours, full) if full is not None else '':>6} {plotted:>8} {r.ours_ms:8.1f} {torch_ms:>8} {r.eager_ms:8.1f} "
            f"{_ratio(r.time_ratio, 1.0):>7} {_ratio(r.eager_ratio, 1.0):>7} "
            f"{'ok' if r.grads_ok else 'BAD':>5}"
            f"{'  EAGER' if r.fell_back else ''}")


def checks(rows: Sequence[Row]) -> list[tuple[str, bool]]:
    results: list[tuple[str, bool]] = []
    groups: dict[tuple[str, str], dict[float, Row]] = {}
    for r in rows:
        groups.setdefault((r.model, r.backend), {})[r.budget] = r
    for (model, backend), by_budget in groups.items():
        tag = f"{model} {backend}"
        full = by_budget.get(1.0)
        if full is not None:
            results.append((f"{tag}: budget 1.0 saves <= eager", full.ours <= full.eager))
        for b, r in sorted(by_budget.items(), reverse=True):
            if r.torch_bytes is not None:
                results.append((f"{tag} {b}: saves <= torch x {SLACK}",
                                r.ours <= r.torch_bytes * SLACK))
            if full is not None and b < 1.0:
                results.append((f"{tag} {b}: saves <= {b} x budget 1.0",
                                r.ours <= b * full.ours + 1e-9))
            results.append((f"{tag} {b}: gradients equal eager", r.grads_ok))
            results.append((f"{tag} {b}: compiled (no frame ran eagerly)", not r.fell_back))
            if r.plotted is not None:
                # NOTE: within 0.5%: inductor may copy a saved view of an input (a few KB
                # the plan counts as free).
                results.append((f"{tag} {b}: Pareto point = measured bytes (0.5%)",
                                abs(r.plotted - r.ours) <= 0.005 * max(r.ours, 1)))
    return results


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memory_budget", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    parser.add_argument("--repeat", type=int, default=7,
                        help="timed rounds (one step of ours, torch's, eager's each)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="step time as wall time or this process's CPU time")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (0: one per core)")
    parser.add_argument("--svg-dir", default=str(ROOT / "out"),
                        help="where our compiles write their Pareto SVGs ('' for none)")
    # NOTE: a Pareto plot solves 21 budgets (a min cut or more each): tens of seconds for
    # GPT-2 on a busy CPU, so by default only two budgets' compiles draw one.
    parser.add_argument("--svg-budgets", default="0.5,0.25",
                        help="the budgets whose compiles write a Pareto SVG")
    parser.add_argument("--no-torch", action="store_true", help="skip torch.compile")
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
    torch.set_num_threads(args.threads if args.threads > 0 else max(1, os.cpu_count() or 1))
    _clock[0] = CLOCKS[args.clock]
    # NOTE: torch's caches would hand one budget's compiled graphs to another budget.
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    budgets = [float(b) for b in args.budgets.split(",")]
    svg_dir = pathlib.Path(args.svg_dir) if args.svg_dir else None
    if svg_dir is not None:
        svg_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; saved bytes by "
          "saved-tensor hooks (distinct storages, parameters/buffers/inputs excluded); "
          f"step ms ({args.clock} clock): median of {args.repeat} round-robin rounds, t/torch and t/eager: median "
          "of the per-round ratios; 'plot MB' '=': the Pareto SVG's chosen point equals the "
          "measured bytes\n")
    print(HEADER, flush=True)
    rows: list[Row] = []
    for name in args.models.split(","):
        work = build(name)
        with frozen_buffers(work.model):
            eager = train_step(work.loss, work)
        for backend in args.backends.split(","):
            rows += measure(work, backend, budgets, eager, args.repeat, svg_dir,
                            [float(b) for b in args.svg_budgets.split(",") if b],
                            not args.no_torch)
    print()
    results = checks(rows)
    for label, ok in results:
        if not ok:
            print(f"FAIL  {label}")
    slow = [r for r in rows if r.time_ratio is not None and r.time_ratio > SLOW]
    for r in slow:
        print(f"SLOW  {r.model} {r.backend} {r.budget}: step {r.time_ratio:.2f}x torch.compile's "
              "(reported, not a check)")
    failed = sum(1 for _, ok in results if not ok)
    print(f"\n{len(results) - failed} checks passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
