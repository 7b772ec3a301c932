"""Child process of test_warm_start.py: compiles and runs programs in a fresh process.

Usage: `python _warm_driver.py '<json>'` with {"backend": "inductor" | "aot_eager",
"variant": "base" | "shape" | "nograd" | "options", "cache": dir}. Runs a training step of a
small MLP and a function that mutates an input and returns a view of one, compiled with
`compiler.compile`, and the same in eager; prints one JSON line: whether every output and
gradient equals eager's, how many times tracing / kernel planning ran in this process, and
aotgrad's cache counters (disk hits, misses, stores, errors).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def mutate(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a.add_(1)
    return a * b + 2, b.t()


def main(request: dict[str, Any]) -> dict[str, Any]:
    os.environ["INDUCTOR_CACHE_DIR"] = request["cache"]
    import aotgrad.api
    import compiler
    import inductor.pipeline
    from aotgrad import cache

    traced: list[str] = []

    def counting(name: str, original: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            traced.append(name)
            return original(*args, **kwargs)
        return run

    aotgrad.api.compile_training = counting(  # type: ignore[assignment]
        "compile_training", aotgrad.api.compile_training)
    aotgrad.api.compile_inference = counting(  # type: ignore[assignment]
        "compile_inference", aotgrad.api.compile_inference)
    inductor.pipeline.plan = counting("plan", inductor.pipeline.plan)  # type: ignore[assignment]

    variant = request["variant"]
    options = {"fusion": False} if variant == "options" else None
    batch = 6 if variant == "shape" else 8
    torch.manual_seed(0)
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    compiled = compiler.compile(model, backend=request["backend"], options=options)
    x = torch.randn(batch, 16)
    same = True
    for _ in range(2):
        if variant == "nograd":
            with torch.no_grad():
                same &= torch.allclose(compiled(x), reference(x), atol=1e-5, rtol=1e-5)
            continue
        out = compiled(x)
        want = reference(x)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        same &= torch.allclose(out, want, atol=1e-5, rtol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert p.grad is not None and q.grad is not None
            same &= torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    fn = compiler.compile(mutate, backend=request["backend"], options=options)
    a, b = torch.randn(batch, batch), torch.randn(batch, batch)
    a2, b2 = a.clone(), b.clone()
    got = fn(a, b)
    want2 = mutate(a2, b2)
    same &= all(torch.allclose(g, w) for g, w in zip(got, want2)) and torch.equal(a, a2)
    same &= got[1]._base is b  # the view of an input is a view of the input, as in eager
    stats = cache.stats()
    return {"same": bool(same), "traced": traced, "disk_hits": stats.disk_hits,
            "disk_misses": stats.disk_misses, "disk_stores": stats.disk_stores,
            "disk_errors": stats.disk_errors, "disk_uncacheable": stats.disk_uncacheable}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
