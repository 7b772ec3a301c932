"""Matmul templates (`max_autotune`, `codegen/triton_mm.py`) on a GPU: Linear + epilogue
graphs compiled by inductor with `mm_template` auto (timed against ATen), always (the
template) and never (ATen's call + the epilogue kernel), side by side with eager and
`torch.compile(mode="max-autotune-no-cudagraphs")`, in one process. Each row checks the
result against eager first. Medians of CUDA-event timed calls.

    python tools/bench/mm_templates.py --device cuda [--dtype bfloat16] [--only gelu_2048]

On the CPU (`--device cpu`) it runs Triton's interpreter: a smoke test of the script, not a
measurement.
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
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "inductor"))
from aten_trace import trace_aten
from inductor import compile_aten, config

Case = tuple[Callable[..., Any], tuple[torch.Tensor, ...]]


def _cases(device: str, dtype: torch.dtype, scale: int) -> dict[str, Case]:
    def t(*size: int) -> torch.Tensor:
        return torch.randn(*size, device=device).to(dtype)

    n = 2048 // scale
    return {
        f"gelu_{n}": (lambda x, w, b: F.gelu(F.linear(x, w, b)), (t(n, n), t(n, n), t(n))),
        f"relu_res_{n}": (lambda x, w, b, r: torch.relu(F.linear(x, w, b)) + r,
                          (t(n, n), t(n, n), t(n), t(n, n))),
        f"mlp_up_{n}": (lambda x, w: F.silu(x @ w), (t(n, n), t(n, 4 * n))),
        f"bmm_{n // 4}": (lambda a, b: torch.bmm(a, b) * 0.125,
                          (t(16, n // 4, 64), t(16, 64, n // 4))),
    }


def _time_ms(fn: Callable[[], Any], device: str, reps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(float(start.elapsed_time(end)))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _call(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> Callable[[], Any]:
    return lambda: fn(*inputs)


def _row(name: str, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...],
         device: str, reps: int, base: dict[str, Any]) -> str:
    """One case: eager ms, then the speedup of each variant ('!' after a wrong result)."""
    with torch.no_grad():
        want = fn(*inputs)
        eager = _time_ms(_call(fn, inputs), device, reps)
        row = [f"{name:14} {eager:9.4f}"]
        gm = trace_aten(fn, list(inputs))
        for setting in ("auto", "always", "never"):
            with config.patch({**base, "max_autotune": True, "mm_template": setting}):
                compiled = compile_aten(gm, list(inputs))
            got = compiled(*inputs)[0]
            tol = 1e-2 if want.dtype == torch.float32 else 5e-2
            ok = torch.allclose(got.float(), want.float(), atol=tol, rtol=tol)
            ms = _time_ms(_call(compiled, inputs), device, reps)
            row.append(f"{eager / ms:7.2f}{'' if ok else '!'}")
        if device == "cuda":
            tc = torch.compile(fn, mode="max-autotune-no-cudagraphs")
            tc(*inputs)
            row.append(f"{eager / _time_ms(_call(tc, inputs), device, reps):8.2f}")
    return " ".join(row)


def main() -> None:
    """Print one row per case: eager ms, then the speedup of each compiled variant."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    scale = 1 if args.device == "cuda" else 32
    base = {"cpu_backend": "triton"} if args.device == "cpu" else {}
    print(f"{'case':14} {'eager ms':>9} {'auto x':>7} {'always x':>8} {'never x':>8} "
          f"{'torch x':>8}")
    for name, (fn, inputs) in _cases(args.device, dtype, scale).items():
        if args.only and name not in args.only.split(","):
            continue
        print(_row(name, fn, inputs, args.device, args.reps, base), flush=True)


if __name__ == "__main__":
    main()
