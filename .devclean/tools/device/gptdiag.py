# Session 11 device diagnostic of the gpt2_tiny first-training-step bug on CUDA (see tools/DEVICE_RUNS.md).
# Run on the device from the repo root: source tools/device/install.sh; python3 -P tools/device/gptdiag.py [variant]
import sys

sys.path.insert(0, "tools/bench")
import compiler
import torch
import zoo

torch.manual_seed(0)
model, inputs = zoo.MODELS["gpt2_tiny"]()
model = model.cuda(); inputs = tuple(t.cuda() for t in inputs)
params = [p for p in model.parameters() if p.requires_grad]
names = [n for n, p in model.named_parameters() if p.requires_grad]
eager = zoo._step(model, params, inputs, True)
exp = [t.clone() for t in eager()]
for opts in [{"triton_autotune": False}, {}]:
    compiler.reset()
    cm = compiler.compile(model, backend="inductor", options=opts)
    step = zoo._step(cm, params, inputs, True)
    for call in range(3):
        got = step()
        bad = []
        for i, (g, e) in enumerate(zip(got, exp)):
            err = (g.double() - e.double()).abs().max().item(); scale = max(e.abs().max().item(), 1.0)
            if err > 2e-3 * scale:
                bad.append((names[i - 1] if i else "out", err, scale))
        print(opts, "call", call, "bad", len(bad), bad[:6], flush=True)
