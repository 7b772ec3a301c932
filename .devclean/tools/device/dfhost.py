"""Host cost of one call in default mode (no CUDA graphs): our step and torch.compile's,
each timed queued (host time per call), as wall time and synchronized after every call;
where our step synchronizes with the GPU, if anywhere (CUDA's sync debug mode); and a
cProfile of 100 synchronized steps of ours. Usage (device box, after `source
tools/device/install.sh`, from tools/bench):

    python3 ../device/dfhost.py mobilenetv3 [infer|train] [--dtype bfloat16]
"""

from __future__ import annotations

import sys

import torch
import zoo
from gpuprof import gpu_model, model_parser
from rohost import _host_profile, _syncs, _times


def main(argv: list[str]) -> int:
    args = model_parser().parse_args(argv)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    zoo.MODE = "default"
    ours = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    theirs = zoo._step(torch.compile(model), params, inputs, train)
    eager = zoo._step(model, params, inputs, train)
    for step in (ours, theirs):
        for _ in range(5):
            step()
    print(f"== {args.model} {args.mode} {args.dtype} (default mode)")
    for name, step in (("eager", eager), ("ours", ours), ("torch.compile", theirs),
                       ("ours again", ours)):
        print(f"{name:14s}: {_times(step)}")
    _syncs(ours)  # NOTE: a synchronizing call inside the step makes it host + GPU time
    _host_profile(ours)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
