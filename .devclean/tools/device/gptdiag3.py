# Session 11 device diagnostic of the gpt2_tiny first-training-step bug on CUDA (see tools/DEVICE_RUNS.md).
# Run on the device from the repo root: source tools/device/install.sh; python3 -P tools/device/gptdiag3.py [variant]
import os
import sys

sys.path.insert(0, "tools/bench")
import compiler
import torch
import zoo
from inductor.runtime import triton_launch

orig_call = triton_launch.Launcher.__call__
seen = set(); bad = []
def call(self, *args):
    first = self.kernel.name not in seen
    orig_call(self, *args)
    if first and not self.kernel.inplace:
        seen.add(self.kernel.name)
        snap = [a.clone() for a in args if isinstance(a, torch.Tensor)]
        orig_call(self, *args)
        after = [a for a in args if isinstance(a, torch.Tensor)]
        for j, (s, a) in enumerate(zip(snap, after)):
            if not torch.equal(s.nan_to_num(), a.nan_to_num()):
                bad.append(self.kernel)
                print("FIRST-LAUNCH DIFFERS", self.kernel.name, "arg", j, self.config, self.kernel.reduction, self.kernel.persistent, self.kernel.xnumel, self.kernel.rnumel, flush=True)
                with open(os.environ["OUT"] + f"/{self.kernel.name}.py", "w") as f:
                    f.write(self.kernel.source)
                break
triton_launch.Launcher.__call__ = call
torch.manual_seed(0)
model, inputs = zoo.MODELS["gpt2_tiny"]()
model = model.cuda(); inputs = tuple(t.cuda() for t in inputs)
params = [p for p in model.parameters() if p.requires_grad]
eager = zoo._step(model, params, inputs, True)
exp = [t.clone() for t in eager()]
cm = compiler.compile(model, backend="inductor", options={"triton_autotune": False})
got = zoo._step(cm, params, inputs, True)()
print("bad grads", sum((g - e).abs().max().item() > 2e-3 * max(e.abs().max().item(), 1) for g, e in zip(got, exp)), "kernels differing", len(bad))
