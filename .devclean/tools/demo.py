"""The README's main job (`hatch run demo`): compile a small real model and show what happened.

A tiny GPT-style language model (token + position embeddings, two pre-norm transformer blocks
with causal self-attention and a GELU MLP, a tied output head; random weights) is compiled
with `compiler.compile(fullgraph=True)` and checked against eager. The demo prints:
the FX graph capture produced, the guards that protect it, the capture time, what a call
with new inputs of the same shape does (cache hit) and of a new shape (a logged recompile
with its reason), the per-call overhead against the plain module, a training step with
gradients compared to eager, and the other backends (aot_eager, inductor) when they run.
`guards_section()` (the guards package at work on its own) closes the demo.

Usage: python tools/demo.py [--quick] [--no-guards] [--verbose]
"""

from __future__ import annotations

import copy
import functools
import io
import logging
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Self

import compiler
import torch
from guards import (
    AttrSource,
    BackendMatch,
    BufferSource,
    EqualsMatch,
    GlobalStateMatch,
    GuardBuilder,
    GuardCache,
    GuardTree,
    IdMatch,
    LocalSource,
    ParamSource,
    SizeSource,
    Source,
    SubmoduleSource,
    TensorMatch,
    TypeMatch,
    backend_scope,
    compile_guard,
    explain,
    interpret,
    parse_relation,
)
from torch import nn

# --- the model ----------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, n, self.n_heads, d // self.n_heads).transpose(1, 2)
                   for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.n_heads)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = scores.softmax(dim=-1) @ v
        out: torch.Tensor = self.proj(y.transpose(1, 2).reshape(b, n, d))
        return out


class Block(nn.Module):
    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, n_heads: int = 4, n_layers: int = 2,
                 max_len: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


# --- helpers ------------------------------------------------------------------------------------


class RecordingBackend:
    """The `eager` backend, keeping each graph it receives (to print it)."""

    def __init__(self, inner: str = "eager") -> None:
        self.__name__ = f"recording_{inner}"
        self.inner = compiler.lookup_backend(inner)
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


class LogTap:
    """Collect the `capture` loggers' records while active."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        self.logger = logging.getLogger("capture")

    def __enter__(self) -> Self:
        self.old_level = self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.old_level)

    def lines(self, topic: str) -> list[str]:
        return [ln for ln in self.stream.getvalue().splitlines() if ln.startswith(topic)]


def per_call_us(fns: dict[str, Callable[[], object]], quick: bool) -> dict[str, float]:
    """Microseconds per call of each function: batches interleaved between the functions (so
    machine load hits them alike), the fastest batch's mean kept."""
    batch, samples = (20, 10) if quick else (50, 30)
    best = {name: float("inf") for name in fns}
    for _ in range(samples):
        for name, fn in fns.items():
            start = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            best[name] = min(best[name], (time.perf_counter_ns() - start) / batch / 1000)
    return best


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach() - b.detach()).abs().max())


def header(text: str) -> None:
    print(f"\n== {text}")


def indent(text: str, limit: int | None = None, prefix: str = "    ") -> None:
    lines = text.rstrip().splitlines()
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        print(prefix + line[:118])
    if limit is not None and len(lines) > limit:
        print(f"{prefix}... ({len(lines) - limit} more lines)")


def compile_records(compiled: Any) -> list[Any]:
    """capture's per-compile records (graph, guard tree, capture time) of a compiled module."""
    call = getattr(compiled, "_compiled_call", compiled)
    return list(getattr(call, "compiles", []))


# --- the capture demo -----------------------------------------------------------------------------


def capture_section(quick: bool, verbose: bool) -> bool:
    torch.manual_seed(0)
    model = TinyGPT().eval()
    eager_model = copy.deepcopy(model)
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: TinyGPT, 2 blocks, d=32, 4 heads, {n_params} parameters; input {tuple(idx.shape)}")

    compiler.reset()
    backend = RecordingBackend()
    compiled = compiler.compile(model, backend=backend, fullgraph=True)

    with torch.no_grad():
        eager_model(idx)
        start = time.perf_counter()
        eager_out = eager_model(idx)
        eager_s = time.perf_counter() - start
        with LogTap() as tap, compiler.config.patch(verbose=verbose):
            start = time.perf_counter()
            out = compiled(idx)
            first_s = time.perf_counter() - start
    ok = torch.allclose(out, eager_out, rtol=1e-5, atol=1e-5)
    header("1. capture: one graph for the whole model (fullgraph=True)")
    print(f"graphs: {len(backend.graphs)}; output {tuple(out.shape)} matches eager: {ok} "
          f"(max abs diff {max_diff(out, eager_out):.2e})")
    print(f"first call {first_s * 1000:.1f} ms = capture + backend + run "
          f"(eager call {eager_s * 1000:.2f} ms)")
    records = compile_records(compiled)
    if records:
        print(f"capture time (bytecode -> FX graph -> guards -> new code): "
              f"{records[0].capture_seconds * 1000:.1f} ms")
    gm = backend.graphs[0]
    nodes = list(gm.graph.nodes)
    kinds: dict[str, int] = {}
    for n in nodes:
        kinds[n.op] = kinds.get(n.op, 0) + 1
    print(f"FX graph: {len(nodes)} nodes ({', '.join(f'{v} {k}' for k, v in kinds.items())}); "
          "parameters are graph inputs, so an optimizer step needs no recompile")
    readable = gm.print_readable(print_output=False).splitlines()
    # NOTE: drop the placeholder renames (`l_x = L_x`), one per parameter, to show the ops.
    body = [ln for ln in readable if not re.fullmatch(r"\s+l_\w+ = L_\w+", ln)]
    indent("\n".join(body), limit=None if verbose else 45)
    call_nodes = [n for n in nodes if n.op in ("call_function", "call_method")]
    if call_nodes:
        n = call_nodes[len(call_nodes) // 2]
        print(f"metadata of node {n.name!r}:")
        print(f"    source_fn: {n.meta.get('source_fn')!r}"[:120])
        stack = n.meta.get("nn_module_stack") or {}
        print(f"    nn_module_stack: {[v[0] for v in stack.values()]}"[:120])
        trace = str(n.meta.get("stack_trace", "")).rstrip().splitlines()
        indent("\n".join(trace[-4:]), prefix="    stack_trace (innermost)| ")

    header("2. guards: checked on every call before the compiled code runs")
    if records:
        tree = records[0].guard_tree
        print(f"{tree.count_nodes()} accessors, {tree.count_checks()} checks")
        indent(tree.render(), limit=None if verbose else 24)
    else:
        indent("\n".join(tap.lines("capture.guards")), limit=24)

    header("3. later calls: same shapes hit the cache, a new shape recompiles")
    with torch.no_grad(), LogTap() as tap:
        other = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(2))
        same = torch.allclose(compiled(other), eager_model(other), rtol=1e-5, atol=1e-5)
        print(f"new tokens, same shape: graphs still {len(backend.graphs)}, matches eager: {same}")
        longer = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(3))
        again = torch.allclose(compiled(longer), eager_model(longer), rtol=1e-5, atol=1e-5)
        print(f"sequence length 24: graphs now {len(backend.graphs)}, matches eager: {again}")
    for line in tap.lines("capture.recompiles"):
        print("    log: " + line[:150])
    ok = ok and same and again

    header("4. per-call cost (best batch of calls, interleaved with the plain call)")
    with torch.no_grad():
        times = per_call_us({"plain": lambda: eager_model(idx), "ours": lambda: compiled(idx)},
                            quick)
    print(f"TinyGPT: plain module {times['plain']:.0f} us, compiled {times['ours']:.0f} us "
          "(one FX graph, no nn.Module call machinery)")
    one = torch.ones(1)

    def plain_add(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    add_one = compiler.compile(plain_add, backend="eager")
    add_one(one)
    times = per_call_us({"plain": lambda: plain_add(one), "ours": lambda: add_one(one)}, quick)
    print(f"lambda x: x + 1 on 1 element: plain {times['plain']:.2f} us, compiled "
          f"{times['ours']:.2f} us: overhead {times['ours'] - times['plain']:.2f} us per call "
          "(bind arguments, guard check, transformed code)")

    header("5. a training step through the compiled model")
    train_model = TinyGPT().train()
    eager_train = copy.deepcopy(train_model)
    compiled_train = compiler.compile(train_model, backend="eager", fullgraph=True)
    targets = torch.roll(idx, -1, dims=1)
    _, loss = compiled_train(idx, targets)
    loss.backward()
    _, eager_loss = eager_train(idx, targets)
    eager_loss.backward()
    grads = dict(eager_train.named_parameters())
    worst = max(max_diff(p.grad, g) for name, p in train_model.named_parameters()
                if p.grad is not None and (g := grads[name].grad) is not None)
    print(f"loss {loss.item():.4f} (eager {eager_loss.item():.4f}); largest gradient difference "
          f"over {len(grads)} parameters: {worst:.2e}")
    ok = ok and abs(loss.item() - eager_loss.item()) < 1e-5 and worst < 1e-4

    header("6. other backends on the same model")
    for name in ("aot_eager", "inductor"):
        if name not in compiler.list_backends():
            print(f"{name}: not registered")
            continue
        try:
            compiler.reset()
            fast = compiler.compile(copy.deepcopy(eager_model), backend=name, fullgraph=True)
            with torch.no_grad():
                start = time.perf_counter()
                result = fast(idx)
                first = time.perf_counter() - start
                match = torch.allclose(result, eager_out, rtol=1e-4, atol=1e-4)
                warm = per_call_us({"eager": lambda: eager_model(idx),
                                    name: functools.partial(fast, idx)}, True)
            print(f"{name}: matches eager: {match}; first call {first * 1000:.0f} ms; "
                  f"warm call {warm[name]:.0f} us vs eager {warm['eager']:.0f} us")
        except Exception as e:  # noqa: BLE001 - the demo reports any backend failure in one line
            first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
            print(f"{name}: failed: {type(e).__name__}: {first_line[:140]}")
    return ok


# --- the guards package on its own (kept from the guards demo) -----------------------------------


def module_sources(root: Source, module: torch.nn.Module) -> Iterator[tuple[Source, Any]]:
    """Every submodule, parameter and buffer of `module` with its source, depth first."""
    yield root, module
    for name, param in module._parameters.items():
        if param is not None:
            yield ParamSource(root, name), param
    for name, buf in module._buffers.items():
        if buf is not None:
            yield BufferSource(root, name), buf
    for name, child in module._modules.items():
        if child is not None:
            yield from module_sources(SubmoduleSource(root, name), child)


def guard_module_call(model: torch.nn.Module, x: torch.Tensor, backend: object) -> GuardTree:
    """The guards a compiled `model(x)` would need: global state and backend, the module
    object and its training flag, each parameter and buffer, and `x` with a dynamic batch
    dimension bound to `s0` (1 <= s0 <= 1024)."""
    b = GuardBuilder()
    b.add_global(GlobalStateMatch.current())
    b.add_global(BackendMatch.of(backend))
    me = LocalSource("self")
    for source, value in module_sources(me, model):
        if isinstance(value, torch.nn.Module):
            b.add(source, IdMatch.of(value) if source == me else TypeMatch(type(value)))
        else:
            b.add(source, TensorMatch.from_tensor(value))
    b.add(AttrSource(me, "training"), EqualsMatch(model.training))
    xs = LocalSource("x")
    b.add(xs, TensorMatch.from_tensor(x, dynamic_dims=frozenset({0})))
    b.bind_symbol("s0", SizeSource(xs, 0))
    b.add_relation(parse_relation("1 <= s0 <= 1024"))
    return b.build()


def _time_ns(fn: Callable[[], object], number: int = 300, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        samples = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter_ns() - start) / number)
        best = min(best, statistics.median(samples))
    return best


def guards_section(model: torch.nn.Module, x: torch.Tensor) -> None:
    """Print the guards demo for `model(x)`."""

    def backend(gm: Any, example_inputs: Any) -> Any:
        return gm

    tree = guard_module_call(model, x, backend)
    guard = compile_guard(tree)
    print(f"guard tree for {type(model).__name__}(x): {tree.count_nodes()} accessors, "
          f"{tree.count_checks()} checks; generated check: {len(guard.source.splitlines())} "
          "lines")
    print("first lines of the tree:")
    for line in tree.render().splitlines()[:14]:
        print("   ", line)
    print("first lines of the generated check:")
    for line in guard.source.splitlines()[:16]:
        print("   ", line[:110])

    L: dict[str, object] = {"self": model, "x": x}
    G: dict[str, object] = {}
    with backend_scope(backend):
        print(f"\npassing call: check -> {guard.fn(L, G)}, explain -> {explain(tree, L, G)}")
        print("failing calls, with the first failing check in words:")
        cases: list[tuple[str, Callable[[], dict[str, object]]]] = [
            ("batch 2048", lambda: {"self": model, "x": torch.randn(2048, *x.shape[1:])}),
            ("float64 input", lambda: {"self": model, "x": x.double()}),
            ("feature size changed", lambda: {"self": model, "x": torch.randn(x.shape[0], 3)}),
            ("another module object", lambda: {"self": copy.deepcopy(model), "x": x}),
        ]
        for label, make in cases:
            L_bad = make()
            print(f"  {label:<22} check -> {guard.fn(L_bad, G)!s:<5}  "
                  f"{explain(tree, L_bad, G)}")
        with torch.no_grad():
            print(f"  {'under no_grad':<22} check -> {guard.fn(L, G)!s:<5}  {explain(tree, L, G)}")
        model.eval()
        print(f"  {'model.eval()':<22} check -> {guard.fn(L, G)!s:<5}  {explain(tree, L, G)}")
        model.train()
        weight = model.get_parameter("linear1.weight")
        weight.requires_grad_(False)
        print(f"  {'frozen weight':<22} check -> {guard.fn(L, G)!s:<5}  {explain(tree, L, G)}")
        weight.requires_grad_(True)
    print(f"  {'other backend':<22} check -> {guard.fn(L, G)!s:<5}  {explain(tree, L, G)}")

    print("\nthe per-code cache (limit 2): entries tried most recent first")
    cache: GuardCache[str] = GuardCache(limit=2)
    with backend_scope(backend):
        for batch in (8, 16, 8, 32):
            xb = torch.randn(batch, x.shape[1])
            call = {"self": model, "x": xb}
            hit = cache.lookup(call, G)
            if hit is not None:
                print(f"  x{tuple(xb.shape)}: hit {hit}")
                continue
            report = cache.miss_report(call, G)
            if report.limit_reached:
                print(f"  x{tuple(xb.shape)}: " + report.message().replace("\n", "\n    "))
                continue
            static = GuardBuilder().add(LocalSource("x"), TensorMatch.from_tensor(xb)).build()
            cache.add(static, f"entry for batch {batch}")
            why = "; ".join(report.reasons) or "empty cache"
            print(f"  x{tuple(xb.shape)}: miss ({why}) -> compiled entry for batch {batch}")

    with backend_scope(backend):
        assert guard.fn(L, G)
        check_ns = _time_ns(lambda: guard.fn(L, G))
        interp_ns = _time_ns(lambda: interpret(tree, L, G), number=30)
        forward_ns = _time_ns(lambda: model(x), number=10, rounds=3)
    per = check_ns / tree.count_nodes()
    print(f"\ntiming: compiled check {check_ns / 1000:.1f} us ({per:.0f} ns per accessor), "
          f"interpreted walk {interp_ns / 1000:.1f} us ({interp_ns / check_ns:.1f}x slower), "
          f"model forward {forward_ns / 1000:.1f} us (check = {check_ns / forward_ns:.1%} of it)")


def main(argv: list[str]) -> int:
    """Run the demo; exit status 1 if the compiled model disagrees with eager."""
    quick = "--quick" in argv
    print("== compiler demo: capture a real model into one FX graph and check it against eager")
    ok = capture_section(quick, verbose="--verbose" in argv)
    if "--no-guards" not in argv:
        torch.manual_seed(0)
        model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                 batch_first=True)
        header("7. the guards package on its own: a guard tree over a TransformerEncoderLayer")
        guards_section(model, torch.randn(8, 32))
    print(f"\ndemo result: {'OK, compiled results equal eager' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
