"""The README's main job (`hatch run demo`).

Until capture lands, it shows the guards package at work on a real `nn.Module`: a guard
tree over the module's parameters, buffers and the call's inputs, the generated check, a
passing call, failing calls with their reasons, the per-code cache with its limit, and the
timing against the model's own forward. `guards_section()` is meant to stay when the demo
grows into compiling a real model.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

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
    b.add(xs, TensorMatch.from_tensor(x, dynamic_dims={0}))
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
        first = model.linear1
        first.weight.requires_grad_(False)
        print(f"  {'frozen weight':<22} check -> {guard.fn(L, G)!s:<5}  {explain(tree, L, G)}")
        first.weight.requires_grad_(True)
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
    """Run the demo on a small transformer encoder layer."""
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             batch_first=True)
    x = torch.randn(8, 32)
    print("== guards: the check that runs on every call of a compiled function")
    guards_section(model, x)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
