"""Child process of test_precompile.py.

`python _precompile_driver.py '<json>'` with {"mode": ..., "path": file, "backend": name,
"train": bool}:
- "save": precompile the test module for its example input, save it to `path`, write the
  compiled outputs (and gradients) beside it (`path + ".pt"`);
- "load": load `path` in this fresh process, run it, compare with the saved outputs and with
  eager; prints how many graphs were traced or planned here (none: nothing compiled);
- "artifacts-save": compile the test module with `compiler.compile`, save
  `compiler.save_cache_artifacts()` to `path`;
- "artifacts-load": `compiler.load_cache_artifacts` from `path` into this process' (empty)
  cache, then compile and run: the compiled graphs come from the artifacts.
"""

from __future__ import annotations

from typing import Any

import torch
from _driver_common import count_compiles, run_driver
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
        self.norm = nn.LayerNorm(32)
        self.scale = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.norm(self.fc1(x)))) * self.scale


def build() -> tuple[Block, torch.Tensor]:
    torch.manual_seed(0)
    return Block(), torch.randn(4, 16)


def step(run: Any, model: nn.Module, x: torch.Tensor, train: bool) -> list[torch.Tensor]:
    for p in model.parameters():
        p.grad = None
    if not train:
        with torch.no_grad():
            return [run(x)]
    out = run(x)
    out.pow(2).sum().backward()
    return [out.detach()] + [p.grad for p in model.parameters() if p.grad is not None]


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.allclose(x, y, atol=1e-5, rtol=1e-4)
                                    for x, y in zip(a, b))


def main(request: dict[str, Any]) -> dict[str, Any]:
    import compiler

    mode, path, train = request["mode"], request["path"], request.get("train", False)
    model, x = build()
    if mode == "save":
        # NOTE: inference is compiled under no_grad (the grad mode is part of the signature)
        with torch.set_grad_enabled(train):
            artifact = compiler.precompile(model, (x,), backend=request["backend"])
        artifact.save(path)
        run = compiler.load_precompiled(path, model)
        torch.save(step(run, model, x, train), path + ".pt")
        return {"saved": True}
    if mode == "load":
        traced = count_compiles(plan=True)
        run = compiler.load_precompiled(path, model)
        got = step(run, model, x, train)
        compiled_outputs = torch.load(path + ".pt")
        eager = step(model, model, x, train)
        try:
            step(run, model, torch.randn(5, 16), train)
            refused = ""
        except compiler.PrecompiledGuardError as exc:
            refused = str(exc)
        return {"same_as_compiled": _close(got, compiled_outputs),
                "same_as_eager": _close(got, eager), "traced": traced,
                "other_shape_refused": refused}
    if mode == "artifacts-save":
        compiled = compiler.compile(model, backend=request["backend"])
        step(compiled, model, x, train)
        with open(path, "wb") as f:
            f.write(compiler.save_cache_artifacts())
        return {"saved": True}
    if mode == "artifacts-load":
        traced = count_compiles(plan=True)
        with open(path, "rb") as f:
            written = compiler.load_cache_artifacts(f.read())
        compiled = compiler.compile(model, backend=request["backend"])
        got = step(compiled, model, x, train)
        eager = step(model, model, x, train)
        from aotgrad import cache

        return {"written": written, "traced": traced, "same_as_eager": _close(got, eager),
                "disk_hits": cache.stats().disk_hits}
    raise ValueError(mode)


if __name__ == "__main__":
    run_driver(main)
