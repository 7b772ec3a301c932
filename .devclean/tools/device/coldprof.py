"""Where a cold compile's time goes: the first call of one GPU zoo model compiled by ours
(capture + inductor) or by torch.compile, with empty inductor and Triton caches, after one
eager call. Usage (device box, after `source tools/device/install.sh`, from tools/bench; run
each in its own process, so neither warms the other's CUDA libraries):

    python3 ../device/coldprof.py mobilenetv3 [infer|train] [--dtype bfloat16]
        [--which ours|torch|both] [--profile]

Set INDUCTOR_TRITON_COMPILE_WORKERS / INDUCTOR_TRITON_AUTOTUNE in the environment to compare
variants. Prints the wall time of the first call, how many Triton compiles this process ran
(cache hits apart) and the time in our compile workers; with `--profile`, under cProfile, the
time inside a few named phases and the top functions by cumulative and own time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

# NOTE: set before torch and Triton read them; compile workers inherit them
if "COLDPROF_DIR" not in os.environ:
    os.environ["COLDPROF_DIR"] = tempfile.mkdtemp(prefix="coldprof_")
_TMP = os.environ["COLDPROF_DIR"]
os.environ["INDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "ours")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_TMP, "triton")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "torch")

import torch
import zoo
from gpuprof import gpu_model

# (label, file suffix, function name): phases summed from the profile's cumulative times
PHASES = [
    ("capture: trace + codegen", "capture/frame_trace.py", "trace_and_codegen"),
    ("aotgrad: _compile", "aotgrad/api.py", "_compile"),
    ("inductor: compile_aten", "inductor/pipeline.py", "compile_aten"),
    ("  plan", "inductor/pipeline.py", "plan"),
    ("    lowering (ctx.run)", "lowering/context.py", "run"),
    ("    fuse", "scheduler/fusion.py", "fuse"),
    ("    kernel codegen", "inductor/targets.py", "generate"),
    ("    plan_memory", "scheduler/memory.py", "plan_memory"),
    ("    wrapper codegen", "codegen/wrapper.py", "generate"),
    ("  load_planned", "inductor/pipeline.py", "load_planned"),
    ("triton workers (queueing)", "runtime/triton_workers.py", "start_in_workers"),
    ("waits for the workers", "runtime/triton_workers.py", "wait"),
    ("triton JIT compile", "triton/compiler/compiler.py", "compile"),
    ("autotune (_tune)", "runtime/triton_launch.py", "_tune"),
    ("mm template launcher", "runtime/triton_mm_launch.py", None),
]


def _phases(stats: pstats.Stats) -> None:
    raw = stats.stats  # type: ignore[attr-defined]
    for label, suffix, name in PHASES:
        total = 0.0
        calls = 0
        for (path, _line, fn), (_cc, nc, _tt, ct, _callers) in raw.items():
            if path.endswith(suffix) and (name is None or fn == name):
                if name is None:
                    total = max(total, ct)
                else:
                    total += ct
                calls += nc
        print(f"  {label:<28} {total:8.2f} s  ({calls} calls)")


class _Counts:
    """Triton compiles seen by this process (cache hits apart) and time in compile workers."""

    def __init__(self) -> None:
        self.compiles = 0
        self.hits = 0
        self.workers_s = 0.0
        try:
            import triton
            from inductor.runtime import triton_workers
        except ImportError:
            return
        triton.knobs.compilation.listener = self._listen
        inner = triton_workers.start_in_workers
        close = triton_workers.Batch._close

        def started(*args: object, **kwargs: object) -> object:
            batch = inner(*args, **kwargs)  # type: ignore[arg-type]
            if batch is not None:
                batch.started = time.perf_counter()  # type: ignore[attr-defined]
            return batch

        def closed(batch: object) -> None:
            close(batch)  # type: ignore[arg-type]
            t0 = getattr(batch, "started", None)
            if t0 is not None:
                self.workers_s += time.perf_counter() - t0

        triton_workers.Batch._close = closed  # type: ignore[method-assign]
        import inductor.targets

        inductor.targets.start_in_workers = started  # type: ignore[assignment]

    def _listen(self, **kw: object) -> None:
        self.compiles += 1
        self.hits += bool(kw.get("cache_hit"))

    def take(self) -> str:
        text = (f"main-process Triton compiles {self.compiles - self.hits} (+{self.hits} cache "
                f"hits), batches in compile workers (start to end) {self.workers_s:.2f} s")
        self.compiles = self.hits = 0
        self.workers_s = 0.0
        return text


_counts = _Counts()


def _first_call(label: str, step: object, profile: bool) -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    if profile:
        prof.enable()
    step()  # type: ignore[operator]
    torch.cuda.synchronize()
    if profile:
        prof.disable()
    wall = time.perf_counter() - t0
    print(f"== {label}: cold first call {wall:.2f} s{' (profiled)' if profile else ''}; "
          f"{_counts.take()}")
    if not profile:
        return
    stats = pstats.Stats(prof)
    _phases(stats)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("mode", nargs="?", default="infer")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--which", choices=("ours", "torch", "both"),
                    default=os.environ.get("COLDPROF_WHICH", "ours"))
    ap.add_argument("--profile", action="store_true",
                    default=os.environ.get("COLDPROF_PROFILE") == "1",
                    help="under cProfile (about 1.5x slower), with per-phase totals")
    args = ap.parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    eager = zoo._step(model, params, inputs, train)
    eager()
    torch.cuda.synchronize()
    variant = (f"workers={os.environ.get('INDUCTOR_TRITON_COMPILE_WORKERS', 'default')} "
               f"autotune={os.environ.get('INDUCTOR_TRITON_AUTOTUNE', 'default')}")
    if args.which != "torch":
        _first_call(f"ours {args.model} {args.mode} {args.dtype} {variant}",
                    zoo._step(zoo._ours(model, "capture"), params, inputs, train), args.profile)
    if args.which != "ours":
        _first_call(f"torch.compile {args.model} {args.mode} {args.dtype}",
                    zoo._step(torch.compile(model), params, inputs, train), args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
