"""Run every sample of one OpInfo op through compiler.compile(backend="inductor") one at a
time, printing the sample and the generated code first (for a crash that kills the process).

    python tools/device/seg2.py OP_NAME [--grad]
"""
import logging
import sys

import compiler
import torch
from torch.testing._internal.common_methods_invocations import op_db

logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s: %(message)s")
logging.getLogger("inductor.output_code").setLevel(logging.DEBUG)
grad = "--grad" in sys.argv
op = next(o for o in op_db if o.name == sys.argv[1])
for i, s in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=grad)):
    x = s.input
    print(f"SAMPLE {i}: shape={tuple(x.shape)} stride={x.stride()} off={x.storage_offset()} "
          f"args={s.args} kwargs={s.kwargs}", flush=True)
    compiler.reset()
    fn = op.op
    f = compiler.compile(lambda x, *a, **k: fn(x, *a, **k),  # noqa: B023 - called in this iteration
                         backend="inductor", fullgraph=True)
    r = f(x, *s.args, **s.kwargs)
    e = fn(x, *s.args, **s.kwargs)
    torch.testing.assert_close(r, e, equal_nan=True)
    print("  ok", tuple(r.shape), r.stride(), r.dtype, flush=True)
