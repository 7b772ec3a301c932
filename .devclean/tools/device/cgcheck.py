"""Whether our CUDA graphs (`mode="reduce-overhead"`) take hold on a zoo model: the
`inductor` logger's cudagraphs lines at INFO, and the step time with and without them.

Usage (device box, after `source tools/device/install.sh`):

    python3 tools/device/cgcheck.py gpt2 [infer|train] [--dtype bfloat16]
"""

from __future__ import annotations

import logging
import sys

import capture
import zoo
from gpuprof import gpu_model, model_parser, time_steps


def _time(step: object) -> float:
    return time_steps(step, 50, warm=5) * 1e3


def main(argv: list[str]) -> int:
    ap = model_parser()
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s: %(message)s")
    logging.getLogger("inductor").setLevel(logging.INFO)
    logging.getLogger("capture").setLevel(logging.INFO)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    eager = _time(zoo._step(model, params, inputs, train))
    plain = _time(zoo._step(capture.optimize(model, backend="inductor"), params, inputs, train))
    print("---- cudagraphs on")
    graphs = capture.optimize(model, backend="inductor", options={"cudagraphs": True})
    cg = _time(zoo._step(graphs, params, inputs, train))
    print(f"{args.model} {args.mode} {args.dtype}: eager {eager:.3f} ms, ours {plain:.3f} ms, "
          f"ours with CUDA graphs {cg:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
