"""Child process of test_inductor_boxed_backward.py: a training step of a small MLP under
`compiler.compile(backend="inductor")` in a fresh process whose compiled-graph cache is the
folder argv[1] (cold: compiled and written there; warm: read back without planning).

Prints one JSON line: whether gradients equal eager's over three steps, whether a saved
activation died inside the last step's backward, how many kernel plans ran, and
`boxed_call` of each compiled graph read back from the disk.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from boxed_support import freed_before_last_matmul, saved_alive_during_backward
from torch import nn


def main(cache: str) -> dict[str, Any]:
    os.environ["INDUCTOR_CACHE_DIR"] = cache
    import compiler
    import inductor.pipeline
    from inductor.runtime import graph_cache

    plans: list[int] = []
    plan = inductor.pipeline.plan

    def counting(*args: Any, **kwargs: Any) -> Any:
        plans.append(1)
        return plan(*args, **kwargs)

    inductor.pipeline.plan = counting  # type: ignore[assignment]
    loaded: list[bool] = []
    load = graph_cache.load_compiled

    def recording(state: Any) -> Any:
        compiled = load(state)
        loaded.append(bool(compiled.boxed_call))
        return compiled

    graph_cache.load_compiled = recording  # type: ignore[assignment]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 8))
    reference = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(),
                              nn.Linear(64, 8))
    reference.load_state_dict(model.state_dict())
    # NOTE: the loss inside the compiled graph: every tensor saved is the backward's input
    compiled = compiler.compile(lambda inp: model(inp).square().mean(), backend="inductor")
    x = torch.randn(32, 16)
    for _ in range(2):
        compiled(x).backward()
        reference(x).square().mean().backward()
    state = [*model.parameters(), x]
    watched, mode = saved_alive_during_backward(lambda: compiled(x), state)
    reference(x).square().mean().backward()
    same = all(torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-4)
               for p, q in zip(model.parameters(), reference.parameters())
               if p.grad is not None and q.grad is not None)
    return {"same": same, "freed_early": freed_before_last_matmul(watched, mode),
            "plans": len(plans), "loaded": loaded}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
