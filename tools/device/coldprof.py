"""Where a cold compile's time goes: the first call of one GPU zoo model compiled by ours
(capture + inductor), with empty inductor and Triton caches, under cProfile; then the same for
torch.compile in this process when `--torch` is given. Usage (device box, after
`source tools/device/install.sh`, from tools/bench; run each model in its own process):

    python3 ../device/coldprof.py mobilenetv3 [infer|train] [--dtype bfloat16] [--torch]

Set INDUCTOR_TRITON_COMPILE_WORKERS / INDUCTOR_TRITON_AUTOTUNE in the environment to compare
variants. Prints the wall time of the first call, the time inside a few named phases
(cumulative, from the profile) and the top functions by cumulative and own time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

_TMP = tempfile.mkdtemp(prefix="coldprof_")
os.environ["INDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "ours")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_TMP, "triton")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_TMP, "torch")

import torch  # noqa: E402
import zoo  # noqa: E402
from gpuprof import gpu_model  # noqa: E402

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
    ("triton workers (wall)", "runtime/triton_workers.py", "compile_in_workers"),
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


def _first_call(label: str, step: object) -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    step()  # type: ignore[operator]
    torch.cuda.synchronize()
    prof.disable()
    wall = time.perf_counter() - t0
    print(f"== {label}: cold first call {wall:.2f} s")
    stats = pstats.Stats(prof)
    _phases(stats)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("mode", nargs="?", default="infer")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--torch", action="store_true",
                    default=os.environ.get("COLDPROF_TORCH") == "1")
    args = ap.parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    eager = zoo._step(model, params, inputs, train)
    eager()
    torch.cuda.synchronize()
    variant = (f"workers={os.environ.get('INDUCTOR_TRITON_COMPILE_WORKERS', 'default')} "
               f"autotune={os.environ.get('INDUCTOR_TRITON_AUTOTUNE', 'default')}")
    _first_call(f"ours {args.model} {args.mode} {args.dtype} {variant}",
                zoo._step(zoo._ours(model, "capture"), params, inputs, train))
    if args.torch:
        _first_call(f"torch.compile {args.model} {args.mode} {args.dtype}",
                    zoo._step(torch.compile(model), params, inputs, train))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
