"""Cold and warm first call of zoo models in fresh processes: ours vs `torch.compile`.

    python tools/bench/warm_start.py [--models mlp,attention,gpt2_tiny] [--no-train]
                                     [--backends inductor,aot_eager] [--repeat 2]
    python tools/bench/warm_start.py --profile mlp     # cProfile of our warm first call

Each model runs in new processes: cold (empty cache folders), then warm (the folders the
cold process filled, nothing in memory). A process imports torch and the compiler and
builds the model first; the time measured is its first call: `compile(model)` and one
training step (forward, backward; `--no-train`: a forward under no_grad), compile included.
torch.compile runs with its own caches on (FX graph cache, AOTAutograd cache; its own fresh
folder per model). `size` is our cache folder (kernels + compiled graphs) after the cold
run. With `--repeat N`, each time is the median of N process pairs.

Also printed: `hits` (compiled graphs our warm process read from disk) and `traced` (graphs
it traced to ATen: 0 when the warm start skipped tracing).
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


def child(request: dict[str, Any]) -> dict[str, Any]:
    """One process: build the model, time compile + first step."""
    import torch

    sys.path.insert(0, str(HERE))
    from zoo import MODELS

    torch.manual_seed(0)
    model, inputs = MODELS[request["model"]]()
    train = request["train"]
    if not train:
        for p in model.parameters():
            p.requires_grad_(False)
    traced: list[int] = []
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
        aotgrad.api.compile_inference = counted(original[1])  # type: ignore[assignment]
        backend = request["who"]
        compile_fn = lambda m: compiler.compile(m, backend=backend)
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
    result: dict[str, Any] = {"first_call_s": elapsed, "traced": len(traced)}
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
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(request)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{request}: {done.stderr[-2000:]}")
    if request.get("profile"):
        print(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def bench(model: str, who: str, train: bool, repeat: int) -> dict[str, Any]:
    """Median cold and warm first-call times of `repeat` cold/warm process pairs."""
    colds, warms, size, last = [], [], 0, {}
    for _ in range(repeat):
        caches = Path(tempfile.mkdtemp(prefix="warm-start-"))
        try:
            request = {"model": model, "who": who, "train": train}
            colds.append(_run(request, caches)["first_call_s"])
            size = _size(caches / ("torch" if who == "torch" else "ours"))
            last = _run(request, caches)
            warms.append(last["first_call_s"])
        finally:
            shutil.rmtree(caches, ignore_errors=True)
    return {"cold": statistics.median(colds), "warm": statistics.median(warms),
            "size": size, "hits": last.get("hits", "-"), "traced": last["traced"]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,attention,gpt2_tiny")
    parser.add_argument("--backends", default="inductor")
    parser.add_argument("--no-train", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", metavar="MODEL")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    train = not args.no_train
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
          f"{'vs tc warm':>11}{'size MB':>9}{'hits':>6}{'traced':>8}")
    for model in args.models.split(","):
        rows = {who: bench(model, who, train, args.repeat)
                for who in args.backends.split(",") + ([] if args.no_torch else ["torch"])}
        tc_warm = rows["torch"]["warm"] if "torch" in rows else float("nan")
        for who, row in rows.items():
            print(f"{model:<14}{who:<11}{row['cold']:>8.2f}{row['warm']:>8.2f}"
                  f"{row['warm'] / row['cold']:>10.2f}{row['warm'] / tc_warm:>11.2f}"
                  f"{row['size'] / 2**20:>9.2f}{row['hits']!s:>6}{row['traced']:>8}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
