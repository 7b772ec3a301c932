"""Host cost of one call under `mode="reduce-overhead"`, layer by layer: the whole step, our
CUDA graph runner alone on the step's graph arguments, and the recording's bare
`graph.replay()`, each timed queued (host time per call) and synchronized after every call;
torch.compile's step for comparison. Usage (device box, after `source
tools/device/install.sh`, from tools/bench):

    python3 ../device/rohost.py mobilenetv3 [infer|train] [--dtype bfloat16]
"""

from __future__ import annotations

import gc
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


def main(argv: list[str]) -> int:
    args = model_parser().parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    zoo.MODE = "reduce-overhead"
    step = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    for _ in range(5):
        step()
    runners = [o for o in gc.get_objects() if isinstance(o, CudaGraphRunner)]
    seen: dict[int, tuple[Any, ...]] = {}
    inner = CudaGraphRunner.__call__

    def spy(self: CudaGraphRunner, *a: Any) -> Any:
        seen.setdefault(id(self), a)
        return inner(self, *a)

    CudaGraphRunner.__call__ = spy  # type: ignore[method-assign]
    step()
    CudaGraphRunner.__call__ = inner  # type: ignore[method-assign]
    print(f"== {args.model} {args.mode} {args.dtype}: {len(runners)} runner(s)")
    print(f"step (ours):            {_times(step)}")
    for r in runners:
        a = seen.get(id(r))
        if a is None or not r.recordings:
            continue
        rec = r.recordings[0]
        timed = _times(lambda r=r, a=a: r(*a))  # type: ignore[misc]
        print(f"runner, {len(a)} args, {len(rec.buffers)} copied: {timed}")
        print(f"graph.replay() alone:   {_times(rec.graph.replay)}")
    compiled = torch.compile(model, mode="reduce-overhead")
    print(f"step (torch.compile):   {_times(zoo._step(compiled, params, inputs, train))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
