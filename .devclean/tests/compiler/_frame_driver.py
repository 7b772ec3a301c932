"""Child process of test_frame_cache.py: compiles and runs a module and a function in a fresh
process, with the frame disk cache (`compiler.frame_cache`) on.

Usage: `python _frame_driver.py '<json>'` with {"backend": ..., "cache": dir}. What the
program reads can be changed between processes through the environment: FRAME_SCALE (a
module global read by both frames), FRAME_ALPHA (an attribute of the module), FRAME_HELPER
("other": the helper the module's forward calls has other code), FRAME_NOGRAD (run under
no_grad), FRAME_NONLEAF (the function's input requires grad and is not a leaf: a call
signature the guards do not tell apart from a leaf's). Prints one JSON line: whether outputs
and gradients equal eager's, per frame whether its entry came from disk, how many graphs
were traced to ATen, and whether `torch._dynamo` was imported.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from _driver_common import count_compiles, run_driver, steps_match
from torch import nn

SCALE = float(os.environ.get("FRAME_SCALE", "2.0"))

if os.environ.get("FRAME_HELPER") == "other":
    def helper(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)
else:
    def helper(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)
        self.alpha = float(os.environ.get("FRAME_ALPHA", "0.5"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(helper(self.fc1(x)) * self.alpha) * SCALE


def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(1) + SCALE


def main(request: dict[str, Any]) -> dict[str, Any]:
    os.environ["INDUCTOR_CACHE_DIR"] = request["cache"]
    import compiler

    traced = count_compiles()

    torch.manual_seed(0)
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    compiled = compiler.compile(model, backend=request["backend"])
    x = torch.randn(8, 16)
    same = steps_match(compiled, model, reference, x, bool(os.environ.get("FRAME_NOGRAD")))
    fn = compiler.compile(combine, backend=request["backend"])
    a, b = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    if os.environ.get("FRAME_NONLEAF"):
        a = torch.randn(8, 8, requires_grad=True) * 1.0
    got = fn(a, b)
    want_b = b.detach().clone().requires_grad_(True)
    want_a = a.detach().clone().requires_grad_(a.requires_grad)
    want = combine(want_a, want_b)
    got.sum().backward()
    want.sum().backward()
    same &= torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    same &= b.grad is not None and torch.allclose(b.grad, want_b.grad)  # type: ignore[arg-type]
    frames = {"module": compiled._compiled_call.compiles, "function": fn.compiles}
    return {"same": bool(same), "traced": traced,
            "from_disk": {name: [bool(r.extra.get("from_disk")) for r in records]
                          for name, records in frames.items()},
            "dynamo_imported": "torch._dynamo" in sys.modules}


if __name__ == "__main__":
    run_driver(main)
