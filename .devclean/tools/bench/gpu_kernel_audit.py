"""The Triton kernels our inductor would launch on a GPU for a zoo model, audited on the CPU:
for each kernel, the bytes it moves and how many programs its candidate configurations
launch, so kernels that leave an H100 idle (a memory-bound kernel over a few MB run by a few
dozen programs) show without a device.

The model's training (or inference) graphs come from the real pipeline (capture, aotgrad
with the inductor backend's partitioner and decompositions); each graph is planned with the
Triton target (`cpu_backend="triton"`) and every fused group generated as for a GPU
(`interpret=False`), not launched. The graphs then run eagerly. Layout choices that depend
on the device (channels-last convolutions) follow the CPU's rules, so convolutional models
differ from the GPU's plan; transformers do not.

Usage: python tools/bench/gpu_kernel_audit.py t5 [--infer] [--batch-div 1] [--top 25]
    [--sms 132]
Prints one line per kernel that moves at least 1 MB, busiest first by the bytes it moves,
and flags (`LOW`) those whose largest launch has fewer programs than `--sms`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from aotgrad.backend import make_backend, run_graph_as_is
from inductor import config
from inductor.codegen.triton_split import generate_triton_kernel
from inductor.decompositions import decomposition_table
from inductor.pipeline import plan
from inductor.scheduler.fusion import FusedGroup
from zoo_gpu_models import MODELS_GPU


@dataclass
class Audit:
    graph: str
    name: str
    kind: str
    mbytes: float
    programs: tuple[int, ...]  # per candidate configuration
    shape: str


def _programs(k: Any) -> tuple[int, ...]:
    if k.split > 1:
        return tuple(k.split * math.ceil(k.xnumel / xb) for xb, _, _ in k.configs)
    if k.tile:
        sx, sy, sz = k.tile
        return tuple(sz * math.ceil(sy / rb) * math.ceil(sx / xb) for xb, rb, _ in k.configs)
    total = k.xnumel if k.reduction else k.xnumel * k.rnumel
    return tuple(math.ceil(total / xb) for xb, _, _ in k.configs)


def _kind(k: Any) -> str:
    if k.split > 1:
        return f"split{k.split}"
    if k.tile:
        return "tile"
    if k.reduction:
        return "persistent" if k.persistent else "looped"
    return "pointwise"


def _bytes(k: Any, buffers: dict[str, Any]) -> float:
    total = 0
    for p in k.params:
        b = buffers.get(p)
        if b is None or not hasattr(b, "layout"):
            continue
        lay = b.layout
        n = 1
        for s in lay.size:
            n *= int(s)
        total += n * lay.dtype.itemsize
    return total / 1e6


def auditor(found: list[Audit]) -> Callable[..., Any]:
    """An ATen-graph compiler that records the audit of each graph's Triton kernels and
    runs the graph as it is."""
    count = [0]

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        count[0] += 1
        with config.patch(cpu_backend="triton"):
            planned = plan(gm, example_inputs)
            buffers = planned.ctx.buffers
            for step in planned.steps:
                if not isinstance(step, FusedGroup):
                    continue
                k = generate_triton_kernel(step, buffers, interpret=False)
                found.append(Audit(f"g{count[0]}", k.name, _kind(k), _bytes(k, buffers),
                                   _programs(k), f"{k.xnumel}x{k.rnumel}"))
        return run_graph_as_is(gm, example_inputs)

    return compile_graph


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS_GPU))
    ap.add_argument("--infer", action="store_true")
    ap.add_argument("--batch-div", type=int, default=1, help="divide the batch (faster)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sms", type=int, default=132)
    args = ap.parse_args(argv)
    import compiler

    torch.manual_seed(0)
    model, inputs = MODELS_GPU[args.model]()
    inputs = tuple(t[: max(1, t.shape[0] // args.batch_div)] for t in inputs)
    model.train(False)
    found: list[Audit] = []
    audit = auditor(found)
    backend = make_backend(audit, audit, partition_fn=None,
                           decompositions=decomposition_table())
    f = compiler.compile(model, backend=backend)
    if args.infer:
        with torch.no_grad():
            f(*inputs)
    else:
        out = f(*inputs)
        out = out if isinstance(out, torch.Tensor) else out[0]
        out.float().sum().backward()
    big = sorted((a for a in found if a.mbytes >= 1.0), key=lambda a: -a.mbytes)
    total = sum(a.mbytes for a in found)
    low = [a for a in big if max(a.programs) < args.sms]
    print(f"{len(found)} kernels, {total:.0f} MB moved; {len(low)} of {len(big)} kernels of "
          f"1 MB+ launch fewer than {args.sms} programs")
    for a in big[: args.top] + [a for a in low if a not in big[: args.top]]:
        flag = "LOW" if max(a.programs) < args.sms else ""
        print(f"{a.graph:4} {a.name:24} {a.kind:11} {a.shape:>16} {a.mbytes:9.1f} MB "
              f"programs {min(a.programs)}-{max(a.programs)} {flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
