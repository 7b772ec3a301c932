"""GPT-2 inference over many sequence lengths: dynamic shapes, ours vs eager and torch.compile.

    python tools/bench/dynamic_shapes.py [--backend inductor|aot_eager|eager]
                                         [--lengths 8,12,...] [--no-torch] [--steady 3]

A small GPT-2 (transformers, 2 layers, n_positions 512) runs under no_grad on token ids of
each length once (default: 16 lengths from 8 to 512). Printed per system: the total time of
the sweep, compiles included, and the number of graphs compiled (a counting backend around
ours and one around torch's). Then, at `--steady` lengths, the steady-state time of the
graph compiled for symbolic sizes (automatic dynamic) against one compiled static
(`dynamic=False`) at the same size, medians of interleaved calls. Every output is checked
against eager.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import compiler
import torch

LENGTHS = [8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512]


def _model() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=1000, n_positions=512, n_embd=128, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = "eager"
    return GPT2LMHeadModel(cfg).eval()


class _Count:
    def __init__(self, backend: Callable[..., Any]) -> None:
        self.backend = backend
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kw: Any) -> Any:
        self.graphs += 1
        return self.backend(gm, example_inputs, **kw)


Cases = list[tuple[torch.Tensor, torch.Tensor]]


def _cases(model: torch.nn.Module, lengths: list[int]) -> Cases:
    """Token ids per length and eager's logits for them."""
    out = []
    with torch.no_grad():
        for length in lengths:
            ids = torch.randint(0, 1000, (1, length),
                                generator=torch.Generator().manual_seed(length))
            out.append((ids, model(ids).logits))
    return out


def _sweep(fn: Callable[[torch.Tensor], torch.Tensor], cases: Cases) -> float:
    """Seconds to call `fn` once per length (compiles included); outputs checked after."""
    with torch.no_grad():
        start = time.perf_counter()
        outs = [fn(ids) for ids, _ in cases]
        seconds = time.perf_counter() - start
    for out, (_, expected) in zip(outs, cases):
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    return seconds


def _steady(fns: list[Callable[[torch.Tensor], Any]], length: int,
            iters: int = 30) -> list[float]:
    """Median seconds per call of each of `fns` at `length`, their calls interleaved (the
    machine's load drifts; interleaving gives each the same share of it)."""
    ids = torch.randint(0, 1000, (1, length))
    times: list[list[float]] = [[] for _ in fns]
    with torch.no_grad():
        for fn in fns:
            fn(ids)
            fn(ids)
        for _ in range(iters):
            for fn, out in zip(fns, times):
                start = time.perf_counter()
                fn(ids)
                out.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main(argv: list[str] | None = None) -> int:
    """Run the sweep (`tools/bench/run.py` convention: argv in, exit status out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--steady", type=int, default=3, help="lengths timed at steady state")
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    model = _model()

    def logits(m: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda ids: m(ids).logits

    cases = _cases(model, lengths)
    eager_total = _sweep(logits(model), cases)
    print(f"eager: total {eager_total:.2f}s over {len(lengths)} lengths")
    ours = _Count(compiler.lookup_backend(args.backend))
    fn = compiler.compile(logits(model), backend=ours)
    total = _sweep(fn, cases)
    print(f"ours ({args.backend}): total {total:.2f}s, {ours.graphs} graphs compiled")
    if not args.no_torch:
        import torch._dynamo

        torch._dynamo.reset()
        counted = _Count(torch._dynamo.lookup_backend(args.backend))
        theirs = torch.compile(logits(model), backend=counted)
        total = _sweep(theirs, cases)
        print(f"torch.compile ({args.backend}): total {total:.2f}s, {counted.graphs} graphs "
              "compiled")
    picks = lengths[len(lengths) // 4::max(1, len(lengths) // max(args.steady, 1))]
    for length in picks[:args.steady]:
        static = compiler.compile(logits(model), backend=args.backend, dynamic=False)
        symbolic_time, static_time = _steady([fn, static], length)
        print(f"steady state at length {length}: symbolic {symbolic_time * 1e3:.3f} ms, "
              f"static {static_time * 1e3:.3f} ms ({symbolic_time / static_time:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
