"""What the child-process drivers of the cache tests share (`_frame_driver.py`,
`_warm_driver.py`, `_precompile_driver.py`): counting the compiles that happen in the fresh
process, running a module's training steps beside an eager twin, and the JSON command line.

The drivers run as scripts (`python tests/compiler/_x_driver.py '<json>'`), so this module is
found beside them on `sys.path`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def count_compiles(plan: bool = False) -> list[str]:
    """Patch aotgrad's `compile_training`/`compile_inference` (and, with `plan`, inductor's
    kernel planning) to note their name in the returned list each time they run in this
    process: nothing noted means every graph came from a cache."""
    import aotgrad.api

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
    if plan:
        import inductor.pipeline

        inductor.pipeline.plan = counting(  # type: ignore[assignment]
            "plan", inductor.pipeline.plan)
    return traced


def steps_match(compiled: Callable[[torch.Tensor], torch.Tensor], model: nn.Module,
                reference: nn.Module, x: torch.Tensor, no_grad: bool, steps: int = 2) -> bool:
    """Run `compiled` (a compiled `model`) and `reference` (an eager copy of `model`) for
    `steps` steps on `x`: under no_grad the outputs only, else a backward of the squared sum
    each step, outputs and the accumulated gradients of every parameter compared."""
    same = True
    for _ in range(steps):
        if no_grad:
            with torch.no_grad():
                same &= torch.allclose(compiled(x), reference(x), atol=1e-5, rtol=1e-5)
            continue
        out, want = compiled(x), reference(x)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        same &= torch.allclose(out, want, atol=1e-5, rtol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert p.grad is not None and q.grad is not None
            same &= torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-4)
    return same


def run_driver(main: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The drivers' command line: `main` gets the JSON request of argv[1]; its answer is
    printed as one JSON line (the parent test reads the last line of stdout)."""
    print(json.dumps(main(json.loads(sys.argv[1]))))
