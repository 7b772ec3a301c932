"""Model zoo on CPU: ours (the `inductor` backend) vs eager vs `torch.compile`, side by side.

    python tools/bench/zoo.py [--models mlp,attention,...] [--no-train] [--quick]

For each model and mode (inference, training = forward + backward): accuracy against eager,
speedup over eager for ours and for torch.compile, and cold / warm compile times (cold:
first call with empty on-disk caches; warm: a fresh compile of the same model with the
in-memory and on-disk caches filled, capture's / dynamo's caches reset; `disk s`: ours with
aotgrad's compiled-graph cache and inductor's in-process plan and library caches cleared
too). Ours runs through `compiler.compile` (the user's entry point, with its frame disk
cache) when capture handles the model (and compiles something), else through
`aotgrad.aot_module` (column `path`). Speedups are the median of per-round ratios over 12
rounds that time eager, ours and torch.compile in turn (`ours q1-q3`: their quartiles;
`o/tc`: the median per-round ratio of torch.compile's time to ours).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_CACHE_ROOT = tempfile.mkdtemp(prefix="zoo-cache-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_CACHE_ROOT, "torch"))
os.environ.setdefault("INDUCTOR_CACHE_DIR", os.path.join(_CACHE_ROOT, "ours"))

import torch
import torch.nn.functional as F
from torch import nn

# -- models -------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512),
                                 nn.ReLU(), nn.LayerNorm(512), nn.Linear(512, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Attention(nn.Module):
    """A hand-written pre-norm transformer block (attention + MLP)."""

    def __init__(self, d: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LSTMModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(64, 128, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class InplaceViews(nn.Module):
    """In-place ops on intermediates and views (functionalization territory)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(128, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        y.mul_(2.0)
        y[:, :32].add_(1.0)
        z = y.view(y.shape[0], 4, 32).transpose(1, 2)
        z.relu_()
        w = z.sum(-1, keepdim=True).expand_as(z).contiguous()
        out = torch.tanh(w).reshape(y.shape[0], -1)
        out = out + y.sigmoid()
        out[:, :8] *= 0.5
        return out


def _gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=1000, n_positions=128, n_embd=128, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg)
    return _Logits(model), (torch.randint(0, 1000, (4, 64)),)


def _bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=512, max_position_embeddings=128,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "eager"
    model = BertModel(cfg)
    return _Hidden(model), (torch.randint(0, 1000, (4, 64)),)


class _Logits(nn.Module):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.m(ids).logits  # type: ignore[no-any-return]


class _Hidden(nn.Module):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.m(ids).last_hidden_state  # type: ignore[no-any-return]


def _timm(name: str) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import timm

        return timm.create_model(name, pretrained=False), (torch.randn(2, 3, 224, 224),)

    return make


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "mlp": lambda: (MLP(), (torch.randn(64, 256),)),
    "attention": lambda: (Attention(), (torch.randn(4, 128, 256),)),
    "lstm": lambda: (LSTMModel(), (torch.randn(16, 32, 64),)),
    "inplace_views": lambda: (InplaceViews(), (torch.randn(64, 128),)),
    "gpt2_tiny": _gpt2,
    "bert_tiny": _bert,
    "timm_resnet18": _timm("resnet18"),
    "timm_vit_tiny": _timm("vit_tiny_patch16_224"),
}

# -- measurement --------------------------------------------------------------------------


DEVICE = "cpu"  # `--device cuda`: models, inputs and timings on the GPU
DTYPE = torch.float32  # `--dtype bfloat16`: parameters and floating inputs in that type
BUDGET_S = 4.0  # `--budget`: seconds of paired timing per step (eager and the compiled step)
WARM = True  # `--no-warm`: skip the warm and disk-only recompiles (nan in those columns)
MODE = "default"  # `--mode reduce-overhead`: CUDA graphs (ours: option cudagraphs; torch.compile's mode)


def _sync() -> None:
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def _median_time(fn: Callable[[], Any], budget: float = 1.0, min_iters: int = 5) -> float:
    for _ in range(2):
        fn()
    _sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_iters or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= 200:
            break
    return statistics.median(times)


@dataclass
class Paired:
    """Eager's per-call time and a compiled step's speedup over it, from shared rounds."""

    eager_s: float  # median over rounds of eager's per-round median
    speedup: float  # median over rounds of (eager's round median / the step's round median)
    low: float  # lower quartile of the per-round speedups
    high: float  # upper quartile


def _rounds(eager: Callable[[], Any], others: list[Callable[[], Any]],
            budget: float | None = None, rounds: int = 12,
            ) -> tuple[list[Paired], list[list[float]]]:
    """Time `eager` and every step of `others` in the same rounds (the order rotated every
    round), a median of several calls each. Each step's speedup is the median of its
    per-round ratios to eager; also returned: the per-round times of every step (seconds,
    one list per step of `others`), for direct comparisons between them.

    NOTE: a compiled step and eager do the same ATen work in some rows (matmul-bound ones),
    and eager is host-bound in others, where load on the machine that comes and goes moves
    eager's time by 5-50%. Ratios taken within one round see the same load on every side,
    and the median over rounds drops the rounds a burst hit on one side only. Timing ours
    and torch.compile against the same eager rounds keeps a slow or fast stretch of eager
    from landing on one of them only (it did: T5 inference, eager host-bound at 10 ms in
    ours' rounds and 15 ms in torch.compile's)."""
    steps = [eager, *others]
    times: list[list[float]] = [[] for _ in steps]
    share = (BUDGET_S if budget is None else budget) / (2 * rounds)
    for r in range(rounds):
        order = list(range(len(steps)))
        order = order[r % len(order):] + order[:r % len(order)]
        if r % 2:
            order.reverse()
        for k in order:
            times[k].append(_median_time(steps[k], share, 3))
    paired = []
    for k in range(1, len(steps)):
        ratios = [e / o for e, o in zip(times[0], times[k])]
        q = statistics.quantiles(ratios, n=4)
        paired.append(Paired(statistics.median(times[0]), statistics.median(ratios), q[0], q[2]))
    return paired, times[1:]


def _outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _outputs(o)]
    return []


def _close(a: list[torch.Tensor], b: list[torch.Tensor], tol: float) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = x.detach().float(), y.detach().float()
        scale = max(y.abs().max().item(), 1.0)
        if x.shape != y.shape or (x - y).abs().max().item() > tol * scale:
            return False
    return True


def prepared(name: str, train: bool) -> tuple[nn.Module, tuple[Any, ...],
                                             list[torch.nn.Parameter]]:
    """Model `name` built with seed 0, its inputs, and the parameters a training step updates
    (none for inference: their requires_grad is turned off). For the profiling helpers."""
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    if not train:
        for p in model.parameters():
            p.requires_grad_(False)
    return model, inputs, [p for p in model.parameters() if p.requires_grad]


def _step(model: Callable[..., Any], params: list[torch.nn.Parameter], inputs: tuple[Any, ...],
          train: bool) -> Callable[[], list[torch.Tensor]]:
    def run() -> list[torch.Tensor]:
        if not train:
            with torch.no_grad():
                return _outputs(model(*inputs))
        for p in params:
            p.grad = None
        out = _outputs(model(*inputs))
        sum(o.float().sum() for o in out).backward()  # type: ignore[union-attr]
        return out + [p.grad for p in params if p.grad is not None]

    return run


def _probe_path(model: nn.Module, inputs: tuple[Any, ...]) -> str:
    """"capture" when capture turns the model into graphs that give eager's outputs, else
    "aot_module". Probed with a backend that runs the graphs eagerly (no kernel is built, so
    the cold/warm compile times measured afterwards are not shortened by the probe)."""
    try:
        import capture

        compiled: list[int] = []

        def counting(gm: Any, example_inputs: Any) -> Any:
            compiled.append(1)
            return gm.forward

        wrapped = capture.optimize(copy.deepcopy(model), backend=counting)
        with torch.no_grad():
            got = _outputs(wrapped(*inputs))
            want = _outputs(model(*inputs))
        capture.reset()
        # NOTE: capture runs a function it cannot trace eagerly: that measures eager, not
        # ours, so a model where nothing reached the backend goes through aot_module. The
        # graphs run the same ops as eager, but not always the same kernels (e.g. an
        # attention kernel chosen by a mask's strides): a few units in the last place of
        # the dtype apart is a match
        tol = 1e-3 if DTYPE in (torch.float32, torch.float64) else 4 * torch.finfo(DTYPE).eps
        if compiled and _close(got, want, tol):
            return "capture"
        if compiled:
            print(f"  (capture's graphs, run eagerly, differ from eager by more than {tol:g} "
                  "of the outputs' scale; using aot_module)")
        else:
            print("  (capture compiled nothing on this model; using aot_module)")
    except Exception as e:  # noqa: BLE001 - any capture failure means: use aotgrad directly
        print(f"  (capture failed on this model: {type(e).__name__}; using aot_module)")
    return "aot_module"


def _ours(model: nn.Module, path: str) -> Callable[..., Any]:
    """The model compiled by our inductor backend along `path` (see `_probe_path`)."""
    if path == "capture":
        # NOTE: the user's entry point: importing `compiler` installs the frame disk cache
        # (a warm process installs recorded frames instead of capturing them again)
        import compiler

        return compiler.compile(model, backend="inductor",  # type: ignore[no-any-return]
                                mode="reduce-overhead" if MODE == "reduce-overhead" else None)
    import aotgrad
    from inductor.decompositions import decomposition_table
    from inductor.pipeline import compile_aten

    return aotgrad.aot_module(model, compile_aten, compile_aten, partition_fn="min_cut",
                              decompositions=decomposition_table())


def _clear_ours(memory: bool) -> None:
    """Forget compiled wrappers (capture's cache); with `memory`, also aotgrad's compiled-graph
    cache and inductor's in-process plan and library caches, so only the on-disk cache is
    left."""
    from inductor.runtime.cpp_build import clear_memory_cache

    if memory:
        try:
            from aotgrad import cache as aotgrad_cache
        except ImportError:  # NOTE: an aotgrad from before the cache (A/B runs)
            pass
        else:
            aotgrad_cache.clear()
        clear_memory_cache()
        try:
            from inductor.runtime.triton_launch import clear_launchers
        except ImportError:  # NOTE: an inductor without the Triton target (A/B runs)
            pass
        else:
            clear_launchers()
    try:
        import capture

        capture.reset()
    except ImportError:
        pass


@dataclass
class Row:
    model: str
    mode: str
    path: str
    eager_ms: float
    ours_x: float
    ours_low: float
    ours_high: float
    torch_x: float
    ours_vs_torch: float  # median over rounds of (torch.compile's time / ours)
    ours_ok: bool
    torch_ok: bool
    ours_cold_s: float
    ours_warm_s: float
    ours_disk_s: float
    torch_cold_s: float
    torch_warm_s: float


def _to(t: Any, dtype: torch.dtype) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    return t.to(DEVICE, dtype) if t.is_floating_point() else t.to(DEVICE)


def _error(got: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    """The largest error of `got` against the float64 reference, each tensor's relative to its
    largest reference value (outputs and gradients together)."""
    if len(got) != len(ref):
        return float("inf")
    worst = 0.0
    for x, y in zip(got, ref):
        if x.shape != y.shape:
            return float("inf")
        scale = max(y.abs().max().item(), 1e-6) if y.numel() else 1.0
        if x.numel():
            worst = max(worst, (x.detach().double() - y).abs().max().item() / scale)
    return worst


def _reference(model: nn.Module, inputs: tuple[Any, ...], train: bool) -> list[torch.Tensor] | None:
    """Outputs (and gradients) of a float64 copy of the model, or None if it cannot run so."""
    try:
        ref_model = copy.deepcopy(model).double()
        ref_inputs = tuple(_to(t, torch.float64) for t in inputs)
        params = [p for p in ref_model.parameters() if p.requires_grad] if train else []
        return [t.double() for t in _step(ref_model, params, ref_inputs, train)()]
    except Exception as e:  # noqa: BLE001 - some models do not run in float64
        print(f"  (no float64 reference: {type(e).__name__}; comparing with eager at 2e-3)")
        return None


def _accurate(got: list[torch.Tensor], expected: list[torch.Tensor],
              ref: list[torch.Tensor] | None) -> tuple[bool, float]:
    """Accurate when no further from the float64 reference than eager in this dtype is, with a
    margin (2x, plus 1e-5 for rows where eager is nearly exact); without a reference, within
    2e-3 of eager."""
    if ref is None:
        return _close(got, expected, 2e-3), float("nan")
    err = _error(got, ref)
    return err <= 2.0 * _error(expected, ref) + 1e-5, err


def bench_model(name: str, train: bool, use_torch: bool) -> Row:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    model = model.to(DEVICE, DTYPE)
    inputs = tuple(_to(t, DTYPE) for t in inputs)
    model.train(False)
    params = [p for p in model.parameters() if p.requires_grad] if train else []
    if not train:
        for p in model.parameters():
            p.requires_grad_(False)
    eager = _step(model, params, inputs, train)
    expected = [t.clone() for t in eager()]
    ref = _reference(model, inputs, train)
    if ref is not None:
        print(f"  eager's error vs float64: {_error(expected, ref):.2e}")

    path = _probe_path(model, inputs)
    t0 = time.perf_counter()
    ours_model = _ours(model, path)
    ours_step = _step(ours_model, params, inputs, train)
    got = ours_step()
    _sync()
    ours_cold = time.perf_counter() - t0
    ours_ok, ours_err = _accurate(got, expected, ref)
    print(f"  ours' error vs float64: {ours_err:.2e}")
    tc_step: Callable[[], Any] | None = None
    torch_cold = torch_warm = float("nan")
    torch_ok = False
    if use_torch:
        try:
            tc_step, torch_cold, torch_ok = _torch_cold(model, params, inputs, train,
                                                       expected, ref)
        except Exception as e:  # noqa: BLE001 - torch.compile failing is a result too
            print(f"  (torch.compile failed: {type(e).__name__}: {str(e)[:120]})")
    pairs, times = _rounds(eager, [ours_step] + ([tc_step] if tc_step is not None else []))
    ours_pair = pairs[0]
    torch_t = vs_torch = float("nan")  # torch_t: torch's speedup over eager
    if tc_step is not None:
        torch_t = pairs[1].speedup
        vs_torch = statistics.median(t / o for o, t in zip(times[0], times[1]))
        del tc_step
    ours_warm = ours_disk = float("nan")
    if WARM:
        _clear_ours(memory=False)
        t0 = time.perf_counter()
        ours_model2 = _ours(model, path)
        _step(ours_model2, params, inputs, train)()
        ours_warm = time.perf_counter() - t0
        _clear_ours(memory=True)
        t0 = time.perf_counter()
        ours_model3 = _ours(model, path)
        _step(ours_model3, params, inputs, train)()
        ours_disk = time.perf_counter() - t0
    _clear_ours(memory=True)
    if use_torch:
        torch_warm = _torch_warm(model, params, inputs, train)
    return Row(name, "train" if train else "infer", path, ours_pair.eager_s * 1e3,
               ours_pair.speedup, ours_pair.low, ours_pair.high, torch_t, vs_torch, ours_ok,
               torch_ok, ours_cold, ours_warm, ours_disk, torch_cold, torch_warm)


def _torch_cold(model: nn.Module, params: list[torch.nn.Parameter], inputs: tuple[Any, ...],
                train: bool, expected: list[torch.Tensor], ref: list[torch.Tensor] | None,
                ) -> tuple[Callable[[], Any], float, bool]:
    """torch.compile's step for `model`, its cold compile time (first call) and accuracy."""
    import torch._dynamo as dynamo

    dynamo.reset()
    t0 = time.perf_counter()
    tc = torch.compile(model, backend="inductor", mode=MODE)
    tc_step = _step(tc, params, inputs, train)
    got_t = tc_step()
    _sync()
    cold = time.perf_counter() - t0
    ok, err = _accurate(got_t, expected, ref)
    print(f"  torch.compile's error vs float64: {err:.2e}")
    return tc_step, cold, ok


def _torch_warm(model: nn.Module, params: list[torch.nn.Parameter], inputs: tuple[Any, ...],
                train: bool) -> float:
    """torch.compile's warm compile time (dynamo reset, its caches filled); NaN without
    WARM. Resets dynamo afterwards either way."""
    import torch._dynamo as dynamo

    warm = float("nan")
    if WARM:
        dynamo.reset()
        t0 = time.perf_counter()
        try:
            _step(torch.compile(model, backend="inductor", mode=MODE), params, inputs, train)()
            warm = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - reported with the cold compile already
            print(f"  (torch.compile failed again: {type(e).__name__})")
    dynamo.reset()
    return warm


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--no-infer", action="store_true", help="training rows only")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--suite", default="small", choices=["small", "gpu"],
                    help="small: the CPU zoo below; gpu: realistic sizes (zoo_gpu_models.py)")
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of timing per step")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm recompiles")
    ap.add_argument("--mode", default="default", choices=["default", "reduce-overhead"],
                    help="reduce-overhead: CUDA graphs on both sides (ours: cudagraphs=True)")
    args = ap.parse_args(argv)
    global DEVICE, DTYPE, BUDGET_S, WARM, MODE
    MODE = args.mode
    DEVICE = args.device
    BUDGET_S = args.budget
    WARM = not args.no_warm
    DTYPE = getattr(torch, args.dtype)
    if args.suite == "gpu":
        from zoo_gpu_models import MODELS_GPU

        MODELS.clear()
        MODELS.update(MODELS_GPU)
    names = [n for n in (args.models.split(",") if args.models else MODELS) if n]
    rows: list[Row] = []
    modes = [m for m in (False, True) if not (m and args.no_train or not m and args.no_infer)]
    print(f"device {DEVICE}, dtype {args.dtype}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, caches {_CACHE_ROOT}")
    header = (f"{'model':<15}{'mode':<6}{'path':<11}{'eager ms':>9}{'ours x':>8}"
              f"{'ours q1-q3':>12}{'torch x':>8}{'o/tc':>6}"
              f"{'ok':>6}{'cold s':>8}{'warm s':>8}{'disk s':>8}{'tc cold':>8}{'tc warm':>8}")
    print(header, flush=True)
    for name in names:
        for train in modes:
            try:
                row = bench_model(name, train, not args.no_torch)
            except ImportError as e:
                print(f"{name:<15}skipped ({e})", flush=True)
                break
            except Exception as e:  # noqa: BLE001 - report and continue with other models
                print(f"{name:<15}{'train' if train else 'infer':<6}FAILED: "
                      f"{type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            rows.append(row)
            ok = ("y" if row.ours_ok else "N") + "/" + ("y" if row.torch_ok else "N")
            spread = f"{row.ours_low:.2f}-{row.ours_high:.2f}"
            print(f"{row.model:<15}{row.mode:<6}{row.path:<11}{row.eager_ms:>9.3f}"
                  f"{row.ours_x:>8.2f}{spread:>12}{row.torch_x:>8.2f}{row.ours_vs_torch:>6.2f}{ok:>6}"
                  f"{row.ours_cold_s:>8.2f}"
                  f"{row.ours_warm_s:>8.2f}{row.ours_disk_s:>8.2f}{row.torch_cold_s:>8.2f}"
                  f"{row.torch_warm_s:>8.2f}",
                  flush=True)
    if rows:
        print(f"geomean speedup over eager: ours {_geomean([r.ours_x for r in rows]):.3f}, "
              f"torch.compile {_geomean([r.torch_x for r in rows]):.3f}; ours over torch.compile "
              f"(same rounds) {_geomean([r.ours_vs_torch for r in rows]):.3f}")
        print(f"geomean cold compile: ours {_geomean([r.ours_cold_s for r in rows]):.2f}s, "
              f"torch.compile {_geomean([r.torch_cold_s for r in rows]):.2f}s; warm: ours "
              f"{_geomean([r.ours_warm_s for r in rows]):.2f}s (disk only "
              f"{_geomean([r.ours_disk_s for r in rows]):.2f}s), torch.compile "
              f"{_geomean([r.torch_warm_s for r in rows]):.2f}s")
        print(f"accuracy: ours {sum(r.ours_ok for r in rows)}/{len(rows)}, "
              f"torch.compile {sum(r.torch_ok for r in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
