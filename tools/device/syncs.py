"""Where a compiled training or inference step synchronizes the host with the GPU (default
mode, no CUDA graphs): three warm steps, then one under CUDA's sync debug mode "error",
which raises at the first synchronizing call; prints its traceback, or that none happened.
Usage (device box, after `source tools/device/install.sh`, from tools/bench):

    python3 ../device/syncs.py bert [infer|train] [--dtype bfloat16]
"""

from __future__ import annotations

import sys
import traceback

import torch
import zoo
from gpuprof import gpu_model, model_parser


def main(argv: list[str]) -> int:
    args = model_parser().parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    zoo.MODE = "default"
    step = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
        print(f"{args.model} {args.mode} {args.dtype}: no synchronizing call in one step")
    except RuntimeError:
        print(f"{args.model} {args.mode} {args.dtype}: a step synchronizes here:\n"
              + traceback.format_exc(limit=40))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
