"""GPU profile of one zoo model: eager and ours, per-iteration wall time, GPU busy time, and
the top kernels by CUDA time. Usage (device box, after `source tools/device/install.sh`):

    python3 tools/device/gpuprof.py resnet50 [infer|train] [--dtype bfloat16] [--torch]
        [--mode reduce-overhead] [--rows 18]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch
import zoo
from torch.profiler import ProfilerActivity, profile
from zoo_gpu_models import MODELS_GPU


def model_parser(mode: str = "infer") -> argparse.ArgumentParser:
    """The device scripts' arguments: a GPU zoo model, `infer` or `train`, `--dtype`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("mode", nargs="?", default=mode)
    ap.add_argument("--dtype", default="float32")
    return ap


def time_steps(step: object, iters: int, warm: int = 3) -> float:
    """Seconds per call of `step` (after `warm` calls), synchronized with the GPU."""
    for _ in range(warm):
        step()  # type: ignore[operator]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()  # type: ignore[operator]
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def _profile(name: str, step: object, iters: int = 10, rows: int = 18) -> None:
    wall = time_steps(step, iters)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()  # type: ignore[operator]
        torch.cuda.synchronize()
    events = prof.key_averages()
    gpu = sum(e.self_device_time_total for e in events) / iters / 1e3
    launches = sum(e.count for e in events if e.self_device_time_total > 0) / iters
    print(f"== {name}: wall {wall * 1e3:.3f} ms/iter, GPU busy {gpu:.3f} ms/iter, "
          f"~{launches:.0f} kernels/iter")
    print(events.table(sort_by="self_device_time_total", row_limit=rows, max_name_column_width=70))


def gpu_model(name: str, mode: str, dtype: str) -> tuple[Any, list[Any], tuple[Any, ...], bool]:
    """The GPU zoo's model `name` on CUDA in `dtype`, with its inputs: (model, the parameters
    a training step reads the gradients of, inputs, whether `mode` trains)."""
    zoo.DEVICE = "cuda"
    zoo.DTYPE = getattr(torch, dtype)
    zoo.MODELS.update(MODELS_GPU)
    train = mode == "train"
    torch.manual_seed(0)
    model, inputs = zoo.MODELS[name]()
    model = model.to("cuda", zoo.DTYPE).train(False)
    inputs = tuple(zoo._to(t, zoo.DTYPE) for t in inputs)
    params = [p for p in model.parameters()] if train else []
    if not train:
        for p in model.parameters():
            p.requires_grad_(False)
    return model, params, inputs, train


def main(argv: list[str]) -> int:
    ap = model_parser()
    ap.add_argument("--torch", action="store_true", help="also profile torch.compile")
    ap.add_argument("--mode", dest="cmode", default="default",
                    help="default or reduce-overhead (ours and torch.compile)")
    ap.add_argument("--rows", type=int, default=18, help="kernels listed per table")
    args = ap.parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    zoo.MODE = args.cmode
    _profile("eager", zoo._step(model, params, inputs, train), rows=args.rows)
    _profile("ours", zoo._step(zoo._ours(model, "capture"), params, inputs, train),
             rows=args.rows)
    if args.torch:
        compiled = torch.compile(model, mode=args.cmode)
        _profile("torch.compile", zoo._step(compiled, params, inputs, train), rows=args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
