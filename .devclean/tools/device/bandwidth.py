"""Achieved memory bandwidth of our largest Triton kernels in one zoo model's step, against the
device's copy bandwidth measured in the same run (issue 12: "for the three largest
memory-bound kernels of GPT-2 training, achieved bytes per second at least 0.7 of the device's
copy bandwidth").

Usage (device box, after `source tools/device/install.sh`):

    python3 tools/device/bandwidth.py gpt2 train [--dtype bfloat16] [--top 10]

How it counts:
- copy bandwidth: `dst.copy_(src)` of 1 GiB, 2 x bytes per copy (read + write), the median
  of 20 copies timed with CUDA events;
- a kernel's bytes: every tensor it is launched with, each storage once, at its footprint
  (the elements its sizes and non-zero strides reach, so a broadcast operand counts once);
  recorded from our launcher on the profiled steps. This is what the kernel must move at the
  least; a kernel that re-reads an operand moves more and shows a lower figure;
- a kernel's time: its mean CUDA time per launch in torch.profiler over `--iters` steps.
Kernels are ranked by total CUDA time per step; matmuls, convolutions and ATen kernels are
not ours and not listed (they are not memory-bound, or not our code).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from typing import Any

import torch
import zoo
from gpuprof import gpu_model, model_parser
from inductor.runtime import triton_launch
from torch.profiler import ProfilerActivity, profile


def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Bytes per second of a device-to-device copy (read plus write)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * nbytes / statistics.median(times)


def footprint(t: torch.Tensor) -> tuple[int, int]:
    """(data pointer, bytes its sizes and non-zero strides reach)."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return t.data_ptr(), n * t.element_size()


class Recorder:
    """Bytes per launch of each kernel name, recorded by wrapping `Launcher.__call__`."""

    def __init__(self) -> None:
        self.bytes: dict[str, list[int]] = defaultdict(list)
        self.on = False
        self._orig = triton_launch.Launcher.__call__
        recorder = self

        def call(launcher: Any, *args: Any) -> None:
            if recorder.on:
                reach: dict[int, int] = {}
                for a in args:
                    if isinstance(a, torch.Tensor):
                        ptr, n = footprint(a)
                        reach[ptr] = max(reach.get(ptr, 0), n)
                recorder.bytes[launcher.kernel.name].append(sum(reach.values()))
            recorder._orig(launcher, *args)

        triton_launch.Launcher.__call__ = call  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    ap = model_parser("train")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    peak = copy_bandwidth()
    print(f"copy bandwidth: {peak / 1e9:.0f} GB/s ({torch.cuda.get_device_name()})")
    recorder = Recorder()
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    step = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    recorder.on = True
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.iters):
            step()
        torch.cuda.synchronize()
    recorder.on = False
    times: dict[str, tuple[float, int]] = {}
    for e in prof.key_averages():
        if e.key in recorder.bytes and e.self_device_time_total > 0:
            times[e.key] = (e.self_device_time_total / 1e6, e.count)
    total_gpu = sum(e.self_device_time_total for e in prof.key_averages()) / 1e6 / args.iters
    rows = []
    for name, (seconds, count) in times.items():
        per_launch = seconds / count
        nbytes = statistics.mean(recorder.bytes[name])
        rows.append((seconds / args.iters, name, count // args.iters, per_launch, nbytes))
    rows.sort(reverse=True)
    ours_total = sum(r[0] for r in rows)
    print(f"{args.model} {args.mode} {args.dtype}: GPU time {total_gpu * 1e3:.3f} ms/step, "
          f"our Triton kernels {ours_total * 1e3:.3f} ms/step ({len(rows)} kernels)")
    print(f"{'kernel':58s} {'ms/step':>8s} {'n':>3s} {'us/launch':>9s} {'MB':>8s} "
          f"{'GB/s':>7s} {'of copy':>7s}")
    for per_step, name, n, per_launch, nbytes in rows[:args.top]:
        bw = nbytes / per_launch
        print(f"{name[:58]:58s} {per_step * 1e3:8.3f} {n:3d} {per_launch * 1e6:9.1f} "
              f"{nbytes / 1e6:8.2f} {bw / 1e9:7.0f} {bw / peak:7.2f}")
    weighted = sum(r[0] * (r[4] / r[3]) for r in rows) / max(ours_total, 1e-12)
    print(f"time-weighted mean over our kernels: {weighted / 1e9:.0f} GB/s "
          f"({weighted / peak:.2f} of copy)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
