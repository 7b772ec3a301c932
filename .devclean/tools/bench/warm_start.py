"""Cold and warm first call of zoo models in fresh processes: ours vs `torch.compile`.

    python tools/bench/warm_start.py [--models mlp,attention,gpt2_tiny] [--no-train]
                                     [--backends inductor,aot_eager] [--repeat 2]
    python tools/bench/warm_start.py --profile mlp     # cProfile of our warm first call
    python tools/bench/warm_start.py --precompile gpt2_tiny,resnet_small

Each model runs in new processes: cold (empty cache folders), then warm (the folders the
cold process filled, nothing in memory). A process imports torch and the compiler and
builds the model first; the time measured is its first call: `compile(model)` and one
training step (forward, backward; `--no-train`: a forward under no_grad), compile included.
torch.compile runs with its own caches on (FX graph cache, AOTAutograd cache; its own fresh
folder per model). `size` is our cache folder (kernels + compiled graphs) after the cold
run. With `--repeat N`, each time is the median of N process pairs. `--preimport` imports
torch._dynamo before the timer starts in every process: the first call without that one-time
import (1.3-2.4 s here). Capture cannot avoid it while it propagates fake tensors, whatever
the ShapeEnv does: `FakeTensorMode()` imports `torch._dynamo.config` (so the whole package)
and its dispatch is wrapped in `torch._disable_dynamo`, which imports `torch._dynamo` on the
first call (measured: `FakeTensorMode()` alone 2.46 s in a fresh process, a `ShapeEnv()`
after it 1.6 ms); torch.compile imports it too. A warm start that skips capture does not pay
it: the frame disk cache (`compiler.frame_cache`: whole compiled frames recorded by the cold
process, installed without capture when their guards pass) or `--precompile`'s artifacts.

`--precompile`: `compiler.precompile` (training) in one process, then `load_precompiled` and
the first training step timed in a fresh process with an empty cache, its outputs and
gradients compared with the precompiling process' run of the artifact (`same`).

Also printed: `hits` (compiled graphs our warm process read from disk), `traced` (graphs
it traced to ATen: 0 when the warm start skipped tracing), `captured` (frames it captured:
0 when every frame came from the frame disk cache) and `dyn` (whether `torch._dynamo` was
imported in the warm process).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _resnet_small() -> tuple[Any, tuple[Any, ...]]:
    """A small ResNet (basic blocks with batch norm, strided downsampling, a linear head)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(16), nn.ReLU())
            self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
            self.head = nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.layers(self.stem(x)).mean((2, 3)))

    return ResNet(), (torch.randn(8, 3, 32, 32),)


def _model(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    sys.path.insert(0, str(HERE))
    from zoo import MODELS

    torch.manual_seed(0)
    return _resnet_small() if name == "resnet_small" else MODELS[name]()


def _outputs_and_grads(run: Any, model: Any, inputs: tuple[Any, ...]) -> list[Any]:
    for p in model.parameters():
        p.grad = None
    out = run(*inputs)
    out.float().sum().backward()
    return [out.detach()] + [p.grad for p in model.parameters() if p.grad is not None]


def precompile_child(request: dict[str, Any]) -> dict[str, Any]:
    """"save": precompile, save, record the loaded artifact's outputs and gradients;
    "load": time load + first training step in this fresh process, compare."""
    import compiler
    import torch

    model, inputs = _model(request["model"])
    path = request["path"]
    if request["mode"] == "save":
        t0 = time.perf_counter()
        compiler.precompile(model, inputs, backend=request["who"]).save(path)
        elapsed = time.perf_counter() - t0
        run = compiler.load_precompiled(path, model)
        torch.save(_outputs_and_grads(run, model, inputs), path + ".pt")
        return {"precompile_s": elapsed}
    t0 = time.perf_counter()
    run = compiler.load_precompiled(path, model)
    got = _outputs_and_grads(run, model, inputs)
    elapsed = time.perf_counter() - t0
    want = torch.load(path + ".pt")
    same = len(got) == len(want) and all(torch.allclose(a, b, atol=1e-5, rtol=1e-5)
                                         for a, b in zip(got, want))
    return {"first_call_s": elapsed, "same_as_compiled": same,
            "size": os.path.getsize(path)}


def child(request: dict[str, Any]) -> dict[str, Any]:
    """One process: build the model, time compile + first step."""
    import torch

    if "mode" in request:
        return precompile_child(request)
    model, inputs = _model(request["model"])
    train = request["train"]
    if not train:
        for p in model.parameters():
            p.requires_grad_(False)
    traced: list[int] = []
    captured: list[int] = []
    if request["who"] == "torch":
        compile_fn: Any = lambda m: torch.compile(m)
    else:
        import aotgrad.api
        import compiler

        original = aotgrad.api.compile_training, aotgrad.api.compile_inference

        def counted(fn: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                traced.append(1)
                return fn(*args, **kwargs)
            return run

        aotgrad.api.compile_training = counted(original[0])  # type: ignore[assignment]
        import capture.frame

        capture_original = capture.frame.CompiledFunction._compile

        def counted_capture(self: Any, L: Any) -> Any:
            captured.append(1)
            return capture_original(self, L)

        capture.frame.CompiledFunction._compile = counted_capture  # type: ignore[method-assign]
        aotgrad.api.compile_inference = counted(original[1])  # type: ignore[assignment]
        backend = request["who"]
        compile_fn = lambda m: compiler.compile(m, backend=backend)
    if request.get("preimport"):
        # NOTE: torch's fake tensors import torch._dynamo (FakeTensorMode's constructor and
        # its dispatch; a ShapeEnv through fx.experimental.validator) the first time one is
        # made: ~1-2 s of every first call, ours and torch.compile's alike
        import torch._dynamo  # NOTE: the import itself is what is measured
    profile = cProfile.Profile() if request.get("profile") else None
    t0 = time.perf_counter()
    if profile is not None:
        profile.enable()
    compiled = compile_fn(model)
    if train:
        out = compiled(*inputs)
        loss = out.float().sum() if isinstance(out, torch.Tensor) else sum(
            o.float().sum() for o in out)
        loss.backward()
    else:
        with torch.no_grad():
            compiled(*inputs)
    if profile is not None:
        profile.disable()
    elapsed = time.perf_counter() - t0
    result: dict[str, Any] = {"first_call_s": elapsed, "traced": len(traced),
                              "captured": len(captured),
                              "dynamo": "torch._dynamo" in sys.modules}
    if request["who"] != "torch":
        from aotgrad import cache

        result["hits"] = cache.stats().disk_hits
    if profile is not None:
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(40)
    return result


def _run(request: dict[str, Any], caches: Path) -> dict[str, Any]:
    env = dict(os.environ, INDUCTOR_CACHE_DIR=str(caches / "ours"),
               TORCHINDUCTOR_CACHE_DIR=str(caches / "torch"))
    # NOTE: an installed package has its bytecode cached (.pyc), as torch's has; a
    # PYTHONDONTWRITEBYTECODE environment would recompile our modules in every process
    # (~0.1 s of a warm start that is not the compiler's). `main` primes the .pyc files.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(request)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{request}: {done.stderr[-2000:]}")
    if request.get("profile"):
        print(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _prime_bytecode() -> None:
    """Write the .pyc files of the compiler's modules (what an install does), so no timed
    process pays for compiling our sources."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", ("import compileall, compiler, capture, "
                    "aotgrad, inductor, guards; [compileall.compile_dir(p, quiet=1) for m in "
                    "(compiler, capture, aotgrad, inductor, guards) for p in m.__path__]")],
                   env=env, check=True)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def bench(model: str, who: str, train: bool, repeat: int, preimport: bool) -> dict[str, Any]:
    """Median cold and warm first-call times of `repeat` cold/warm process pairs."""
    colds, warms, size, last = [], [], 0, {}
    for _ in range(repeat):
        caches = Path(tempfile.mkdtemp(prefix="warm-start-"))
        try:
            request = {"model": model, "who": who, "train": train, "preimport": preimport}
            colds.append(_run(request, caches)["first_call_s"])
            size = _size(caches / ("torch" if who == "torch" else "ours"))
            last = _run(request, caches)
            warms.append(last["first_call_s"])
        finally:
            shutil.rmtree(caches, ignore_errors=True)
    return {"cold": statistics.median(colds), "warm": statistics.median(warms),
            "size": size, "hits": last.get("hits", "-"), "traced": last["traced"],
            "captured": last["captured"] if who != "torch" else "-",
            "dynamo": "yes" if last["dynamo"] else "no"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,attention,gpt2_tiny")
    parser.add_argument("--backends", default="inductor")
    parser.add_argument("--no-train", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", metavar="MODEL")
    parser.add_argument("--preimport", action="store_true",
                        help="import torch._dynamo (what torch's fake tensors import on "
                             "first use) before timing, in every process alike")
    parser.add_argument("--precompile", metavar="MODELS",
                        help="precompile these models (training) in one process, load and run "
                             "each in a fresh one with an empty cache")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    train = not args.no_train
    _prime_bytecode()
    if args.precompile:
        print("precompiled (training step): precompile time, then load + first step in a "
              "fresh process with an empty cache")
        print(f"{'model':<14}{'who':<11}{'precompile':>11}{'first call':>11}{'size MB':>9}"
              f"{'same':>6}")
        for model in args.precompile.split(","):
            for who in args.backends.split(","):
                caches = Path(tempfile.mkdtemp(prefix="precompile-"))
                path = str(caches / "artifact.bin")
                saved = _run({"mode": "save", "model": model, "who": who, "path": path},
                             caches / "a")
                loaded = _run({"mode": "load", "model": model, "who": who, "path": path},
                              caches / "b")
                print(f"{model:<14}{who:<11}{saved['precompile_s']:>11.2f}"
                      f"{loaded['first_call_s']:>11.2f}{loaded['size'] / 2**20:>9.2f}"
                      f"{loaded['same_as_compiled']!s:>6}", flush=True)
                shutil.rmtree(caches, ignore_errors=True)
        return 0
    if args.profile:
        caches = Path(tempfile.mkdtemp(prefix="warm-start-"))
        request = {"model": args.profile, "who": args.backends.split(",")[0], "train": train}
        print("cold:", _run(request, caches))
        print("warm:", _run({**request, "profile": True}, caches))
        shutil.rmtree(caches, ignore_errors=True)
        return 0
    print(f"first call (compile + one {'training step' if train else 'forward'}), "
          "seconds; each in a fresh process")
    print(f"{'model':<14}{'who':<11}{'cold':>8}{'warm':>8}{'warm/cold':>10}"
          f"{'vs tc warm':>11}{'size MB':>9}{'hits':>6}{'traced':>8}{'captured':>10}"
          f"{'dyn':>5}")
    for model in args.models.split(","):
        rows = {who: bench(model, who, train, args.repeat, args.preimport)
                for who in args.backends.split(",") + ([] if args.no_torch else ["torch"])}
        tc_warm = rows["torch"]["warm"] if "torch" in rows else float("nan")
        for who, row in rows.items():
            print(f"{model:<14}{who:<11}{row['cold']:>8.2f}{row['warm']:>8.2f}"
                  f"{row['warm'] / row['cold']:>10.2f}{row['warm'] / tc_warm:>11.2f}"
                  f"{row['size'] / 2**20:>9.2f}{row['hits']!s:>6}{row['traced']:>8}"
                  f"{row['captured']!s:>10}{row['dynamo']:>5}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
