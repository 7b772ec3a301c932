"""Host cost of one call under `mode="reduce-overhead"`, layer by layer: the whole step, our
CUDA graph runner alone on the step's graph arguments, and the recording's bare
`graph.replay()`, each timed queued (host time per call) and synchronized after every call;
torch.compile's step for comparison. Usage (device box, after `source
tools/device/install.sh`, from tools/bench):

    python3 ../device/rohost.py mobilenetv3 [infer|train] [--dtype bfloat16]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import zoo
from gpuprof import gpu_model, model_parser
from inductor.runtime.cudagraphs import CudaGraphRunner


def _times(fn: Callable[[], Any], iters: int = 200) -> str:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    queued = (time.perf_counter() - t0) / iters
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
        torch.cuda.synchronize()
    synced = (time.perf_counter() - t0) / iters
    return (f"host {queued * 1e3:.3f} ms, wall {wall * 1e3:.3f} ms, "
            f"synchronized {synced * 1e3:.3f} ms")


def _syncs(step: Callable[[], Any]) -> None:
    """Where a step synchronizes with the GPU (CUDA's sync debug mode raising there)."""
    import traceback

    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            step()
        print("sync debug: no synchronizing call in 3 steps")
    except RuntimeError:
        print("sync debug: a step synchronizes here:\n" + traceback.format_exc(limit=30))
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _host_profile(step: Callable[[], Any]) -> None:
    """cProfile of 100 synchronized steps: where the host time of a step goes."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(100):
        step()
        torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


def main(argv: list[str]) -> int:
    args = model_parser().parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    zoo.MODE = "reduce-overhead"
    step = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    for _ in range(5):
        step()
    from aotgrad.backend import BackendCallable
    from aotgrad.runtime import InferenceRunner
    from inductor.pipeline import CompiledGraph

    layers = (BackendCallable, InferenceRunner, CompiledGraph, CudaGraphRunner)
    seen: dict[type, tuple[Any, Any]] = {}
    originals = {cls: cls.__call__ for cls in layers}
    for cls in layers:
        def spy(self: Any, *a: Any, _cls: type = cls) -> Any:
            seen.setdefault(_cls, (self, a))
            return originals[_cls](self, *a)

        cls.__call__ = spy  # type: ignore[method-assign]
    step()
    for cls, fn in originals.items():
        cls.__call__ = fn  # type: ignore[method-assign]
    print(f"== {args.model} {args.mode} {args.dtype}")
    print(f"step (ours):            {_times(step)}")
    _syncs(step)
    _host_profile(step)
    for cls in layers:
        if cls in seen:
            obj, a = seen[cls]
            print(f"{cls.__name__:22s}: {_times(lambda o=obj, a=a: o(*a))}")  # type: ignore[misc]
    runner = seen.get(CudaGraphRunner, (None, ()))[0]
    if runner is not None and runner.recordings:
        print(f"graph.replay() alone:   {_times(runner.recordings[0].graph.replay)}")
        print(f"copied inputs: {[len(r.buffers) for r in runner.recordings]}")
    from torch.profiler import ProfilerActivity, profile

    for name, fn in (("step", step), ("runner", lambda: runner(*seen[CudaGraphRunner][1]))):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
                torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=12,
                                          max_name_column_width=60)
        print(f"---- profile of 10 synchronized calls: {name}\n{table}")
    compiled = torch.compile(model, mode="reduce-overhead")
    print(f"step (torch.compile):   {_times(zoo._step(compiled, params, inputs, train))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
