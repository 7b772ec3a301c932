"""Host-side (Python) profile of one zoo model compiled by ours on the GPU: where the wall
time of a steady call goes when the GPU waits for the CPU. Usage (device box, after
`source tools/device/install.sh`, from tools/bench):

    python3 ../device/cpuprof.py mobilenetv3 [infer|train] [--dtype bfloat16] [--iters 50]
        [--mode reduce-overhead] [--sync]

`--sync` synchronizes after every call (as the zoo's timing does), so the profile's
`synchronize` row is the GPU time the host waited for and the rest is host time per call.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch
import zoo
from gpuprof import gpu_model, model_parser


def main(argv: list[str]) -> int:
    ap = model_parser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--mode", dest="cmode", default="default")
    ap.add_argument("--sync", action="store_true", help="synchronize after every call")
    ap.add_argument("--torch", action="store_true", help="profile torch.compile instead")
    args = ap.parse_args(argv)
    zoo.MODE = args.cmode
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    compiled = (torch.compile(model, mode=args.cmode) if args.torch
                else zoo._ours(model, "capture"))
    step = zoo._step(compiled, params, inputs, train)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        step()
    host = (time.perf_counter() - t0) / args.iters
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / args.iters
    print(f"== {args.model} {args.mode}: host {host * 1e3:.3f} ms/iter (queue), "
          f"wall {wall * 1e3:.3f} ms/iter")
    t0 = time.perf_counter()
    for _ in range(args.iters):
        step()
        torch.cuda.synchronize()
    synced = (time.perf_counter() - t0) / args.iters
    print(f"== synchronized after every call: {synced * 1e3:.3f} ms/iter")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.iters):
        step()
        if args.sync:
            torch.cuda.synchronize()
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
