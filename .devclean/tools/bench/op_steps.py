"""Training steps of single layers and losses, eager against ours (and torch.compile with
`--torch`), interleaved in one process: finds ops whose compiled step is slower than eager's
(a decomposition worse than ATen's kernel, a kernel g++ left scalar). Usage:

    python tools/bench/op_steps.py [--device cuda] [--torch] [NAME ...]

Each row: the median of 11 pairs of two steps each (forward, then backward of the sum; on
a GPU synchronized after each pair); `SLOW` marks ours below 0.8x eager. Every compiled
step's output and gradients are first compared with eager's (`WRONG` marks a mismatch).
On the CPU, run with the kernel cache warm and nothing else busy:
with a fresh `COMPILER_CACHE_DIR` the guards' native module builds in the background for
20-30 s and every OpenMP op of this process slows down many times over meanwhile.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import compiler
import torch
import torch.nn.functional as F

B = 32
Case = tuple[Callable[..., torch.Tensor], Callable[[], tuple[torch.Tensor, ...]]]


DEVICE = "cpu"


def _r(*size: int) -> torch.Tensor:
    return torch.randn(*size, device=DEVICE)


def _i(high: int, *size: int) -> torch.Tensor:
    return torch.randint(0, high, size, device=DEVICE)


CASES: dict[str, Case] = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (512,), w, b),
                   lambda: (_r(B * 64, 512), _r(512), _r(512))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 8, w, b),
                   lambda: (_r(B, 64, 28, 28), _r(64), _r(64))),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   lambda: (_r(B, 64, 28, 28), _r(64), _r(64))),
    "softmax": (lambda x: F.softmax(x, -1), lambda: (_r(B * 64, 1000),)),
    "gelu": (lambda x: F.gelu(x), lambda: (_r(B * 64, 1024),)),
    "silu_mul": (lambda x, y: F.silu(x) * y, lambda: (_r(B * 64, 1024), _r(B * 64, 1024))),
    "linear_relu": (lambda x, w, b: F.linear(x, w, b).relu(),
                    lambda: (_r(B * 64, 256), _r(512, 256), _r(512))),
    "conv_bn_relu": (lambda x, w: F.relu(F.batch_norm(F.conv2d(x, w, padding=1), None, None,
                                                      training=True)),
                     lambda: (_r(8, 32, 28, 28), _r(32, 32, 3, 3))),
    "max_pool": (lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (_r(B, 64, 56, 56),)),
    "avg_pool": (lambda x: F.avg_pool2d(x, 2), lambda: (_r(B, 64, 56, 56),)),
    "bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
                 lambda: (_r(8, 32, 32, 32),)),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t),
                      lambda: (_r(1024, 8000), _i(8000, 1024))),
    "ce_smooth": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
                  lambda: (_r(B * 16, 1000), _i(1000, B * 16))),
    "mse": (lambda x, y: F.mse_loss(x, y), lambda: (_r(B * 64, 512), _r(B * 64, 512))),
    "kl_div": (lambda x, y: F.kl_div(x.log_softmax(-1), y.softmax(-1), reduction="batchmean"),
               lambda: (_r(B * 16, 1000), _r(B * 16, 1000))),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             lambda: (_r(8, 8, 128, 64), _r(8, 8, 128, 64), _r(8, 8, 128, 64))),
    "gather": (lambda x, i: x.gather(1, i),
               lambda: (_r(B * 64, 512), _i(512, B * 64, 64))),
    "index_select": (lambda x, i: x.index_select(0, i),
                     lambda: (_r(5000, 256), _i(5000, 4096))),
    "embedding": (lambda w, i: F.embedding(i, w).mean(1),
                  lambda: (_r(5000, 128), _i(5000, B, 64))),
    "cumsum": (lambda x: x.cumsum(-1), lambda: (_r(B * 64, 512),)),
    "topk": (lambda x: x.topk(10, -1).values, lambda: (_r(B * 64, 512),)),
    "masked_fill": (lambda x, m: x.masked_fill(m, 0.0).sum(-1),
                    lambda: (_r(B * 64, 512), _r(B * 64, 512) > 0.0)),
    "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                lambda: (_r(B * 64, 512), _r(512))),
    "dropout": (lambda x: F.dropout(x, 0.1, training=True), lambda: (_r(B * 64, 1024),)),
    "softplus": (lambda x: F.softplus(x), lambda: (_r(B * 64, 1024),)),
    "bce_logits": (lambda x, t: F.binary_cross_entropy_with_logits(x, t),
                   lambda: (_r(B * 64, 1024), torch.rand(B * 64, 1024, device=DEVICE))),
    "elu": (lambda x: F.elu(x), lambda: (_r(B * 64, 1024),)),
}


RANDOM = {"dropout"}


def _step(fn: Callable[..., torch.Tensor], args: list[Any]) -> Callable[[], None]:
    def run() -> None:
        for a in args:
            a.grad = None
        fn(*args).float().sum().backward()

    return run


def _result(fn: Callable[..., torch.Tensor], args: list[Any]) -> list[torch.Tensor]:
    for a in args:
        a.grad = None
    out = fn(*args)
    out.float().sum().backward()
    return [out.detach()] + [a.grad for a in args if a.grad is not None]


def _agrees(fn: Callable[..., torch.Tensor], compiled: Callable[..., torch.Tensor],
            args: list[Any]) -> bool:
    torch.manual_seed(1)
    want = _result(fn, args)
    torch.manual_seed(1)
    got = _result(compiled, args)
    return len(got) == len(want) and all(
        torch.allclose(g.float(), w.float(), rtol=1e-3, atol=1e-3) for g, w in zip(got, want))


def _pair_ms(step: Callable[[], None], times: list[float]) -> None:
    t0 = time.perf_counter()
    step()
    step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) / 2 * 1e3)


def main(argv: list[str]) -> int:
    global DEVICE
    if "--device" in argv:
        DEVICE = argv.pop(argv.index("--device") + 1)
        argv.remove("--device")
    with_torch = "--torch" in argv
    names = [a for a in argv if a != "--torch"]
    torch.manual_seed(0)
    for name, (fn, make) in CASES.items():
        if names and name not in names:
            continue
        args = [a.requires_grad_() if a.is_floating_point() else a for a in make()]
        compiler.reset()
        ours_fn = compiler.compile(fn)
        steps = {"eager": _step(fn, args), "ours": _step(ours_fn, args)}
        # A random op's stream is ours, not ATen's: its values cannot match eager's.
        wrong = ("" if name in RANDOM or _agrees(fn, ours_fn, args) else "  WRONG")
        if with_torch:
            import torch._dynamo as dynamo

            dynamo.reset()
            steps["torch"] = _step(torch.compile(fn), args)
        for _ in range(3):
            for step in steps.values():
                step()
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(11):
            for k, step in steps.items():
                _pair_ms(step, times[k])
        med = {k: statistics.median(v) for k, v in times.items()}
        me, mo = med["eager"], med["ours"]
        flag = "  SLOW" if me / mo < 0.8 else ""
        tc = f"  torch {me / med['torch']:5.2f}" if with_torch else ""
        print(f"{name:14s} eager {me:8.3f} ms  ours {mo:8.3f} ms  ratio {me / mo:5.2f}"
              f"{tc}{flag}{wrong}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
