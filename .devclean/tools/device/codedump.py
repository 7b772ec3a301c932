"""Our generated code for one zoo model on the GPU, and where its ATen calls go.

Usage (device box, after `source tools/device/install.sh`):

    python3 tools/device/codedump.py resnet50 [infer|train] [--dtype bfloat16] > code.txt

Prints the wrapper and kernels our inductor generates (the `inductor.output_code` log), then
a profile of five steps grouped by input shapes, ATen ops only (copies, pooling, ...).
"""

from __future__ import annotations

import logging
import sys

import torch
import zoo
from gpuprof import gpu_model, model_parser
from torch.profiler import ProfilerActivity, profile


def main(argv: list[str]) -> int:
    ap = model_parser()
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
    logging.getLogger("inductor.output_code").setLevel(logging.DEBUG)
    model, params, inputs, train = gpu_model(args.model, args.mode, args.dtype)
    step = zoo._step(zoo._ours(model, "capture"), params, inputs, train)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    table = prof.key_averages(group_by_input_shape=True)
    print(table.table(sort_by="self_device_time_total", row_limit=40,
                      max_name_column_width=40, max_shapes_column_width=90))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
