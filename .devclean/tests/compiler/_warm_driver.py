"""Child process of test_warm_start.py: compiles and runs programs in a fresh process.

Usage: `python _warm_driver.py '<json>'` with {"backend": "inductor" | "aot_eager",
"variant": "base" | "shape" | "nograd" | "options", "cache": dir}. Runs a training step of a
small MLP and a function that mutates an input and returns a view of one, compiled with
`compiler.compile`, and the same in eager; prints one JSON line: whether every output and
gradient equals eager's, how many times tracing / kernel planning ran in this process, and
aotgrad's cache counters (disk hits, misses, stores, errors).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from _driver_common import count_compiles, run_driver, steps_match
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
    import compiler
    from aotgrad import cache

    traced = count_compiles(plan=True)

    variant = request["variant"]
    options = {"fusion": False} if variant == "options" else None
    batch = 6 if variant == "shape" else 8
    torch.manual_seed(0)
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    compiled = compiler.compile(model, backend=request["backend"], options=options)
    x = torch.randn(batch, 16)
    same = steps_match(compiled, model, reference, x, variant == "nograd")
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
    run_driver(main)
