import logging, sys, torch, compiler
from torch.testing._internal.common_methods_invocations import op_db
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s: %(message)s")
for n in ("capture", "guards", "aotgrad"):
    logging.getLogger(n).setLevel(logging.WARNING)
op = [o for o in op_db if o.name == sys.argv[1]][0]
for i, s in enumerate(op.sample_inputs("cpu", torch.float32)):
    x = s.input
    print(f"SAMPLE {i}: shape={tuple(x.shape)} stride={x.stride()} off={x.storage_offset()} "
          f"args={s.args} kwargs={s.kwargs}", flush=True)
    compiler.reset()
    f = compiler.compile(lambda x, *a, **k: op(x, *a, **k), backend="inductor", fullgraph=True)
    r = f(x, *s.args, **s.kwargs)
    print("  ok", tuple(r.shape), r.stride(), r.dtype, flush=True)
