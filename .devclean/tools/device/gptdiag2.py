# Session 11 device diagnostic of the gpt2_tiny first-training-step bug on CUDA (see tools/DEVICE_RUNS.md).
# Run on the device from the repo root: source tools/device/install.sh; python3 -P tools/device/gptdiag2.py [variant]
import sys

sys.path.insert(0, "tools/bench")
import compiler
import torch
import zoo
from inductor.runtime import triton_launch

variant = sys.argv[1]
if variant == "nofast":
    orig = triton_launch.Launcher.__init__
    def init(self, *a, **k):
        orig(self, *a, **k); self.fast = False
    triton_launch.Launcher.__init__ = init
torch.manual_seed(0)
model, inputs = zoo.MODELS["gpt2_tiny"]()
model = model.cuda(); inputs = tuple(t.cuda() for t in inputs)
params = [p for p in model.parameters() if p.requires_grad]
names = [n for n, p in model.named_parameters() if p.requires_grad]
eager = zoo._step(model, params, inputs, True)
exp = [t.clone() for t in eager()]
backend = "aot_eager" if variant == "aot_eager" else "inductor"
cm = compiler.compile(model, backend=backend, options={} if backend == "aot_eager" else {"triton_autotune": False})
step = zoo._step(cm, params, inputs, True)
for call in range(2):
    got = step()
    bad = []
    for i, (g, e) in enumerate(zip(got, exp)):
        err = (g.double() - e.double()).abs().max().item(); scale = max(e.abs().max().item(), 1.0)
        if err > 2e-3 * scale:
            bad.append((names[i - 1] if i else "out", round(err, 1)))
    print(variant, "call", call, "bad", len(bad), bad[-3:], flush=True)
