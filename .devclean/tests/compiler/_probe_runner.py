"""Differential runner for the probe programs of `test_differential_*.py` (issue 11).

A probe is a function `make() -> Probe`: the program `fn`, a `state()` thunk that returns a
snapshot of the Python state the program touches (globals, attributes, containers, tensors),
and `calls`, a list of `call(fn) -> result` steps; a step may change state before calling
(rebind a global, replace a method, toggle grad mode). `make` is called once per run, so the
eager run and each compiled run start from equal fresh state; `cleanup()` undoes anything a
probe patched outside itself (a library function, a class attribute).

`compare(make, compile_fn)` runs the steps eagerly and compiled and returns the first
difference in words (None when they agree): the result or the exception type of each call,
the printed output, the state after the call, the grad mode after the call. Tensors are
compared by value, dtype, shape and requires_grad; floats tell -0.0 from 0.0 and nan equals
nan.

`python tests/compiler/test_differential_*.py [--torch] [--backends eager,aot_eager] [name ...]`
prints OK/BAD per probe and backend, with `--torch` for `torch.compile` on the same probes.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import math
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

Step = Callable[[Callable[..., Any]], Any]


@dataclasses.dataclass
class Probe:
    """One program and the calls made to it (see the module doc)."""

    fn: Callable[..., Any]
    calls: list[Step]
    state: Callable[[], Any] | None = None
    cleanup: Callable[[], None] | None = None


Make = Callable[[], Probe]


def registry() -> tuple[list[Make], Callable[[Make], Make]]:
    """A probe file's list of probes and the decorator (`@probe`) that appends to it."""
    probes: list[Make] = []

    def probe(make: Make) -> Make:
        probes.append(make)
        return make

    return probes, probe


def T(*shape: int, seed: int = 0, grad: bool = False) -> torch.Tensor:
    """A seeded random tensor (the same values in the eager and the compiled run)."""
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return t.requires_grad_(grad)


def grads(*tensors: torch.Tensor) -> list[Any]:
    """Copies of the tensors' gradients (None where there is none)."""
    return [None if t.grad is None else t.grad.clone() for t in tensors]


def _snapshot(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (value.detach().clone(), value.requires_grad, value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value) if isinstance(value, list) else tuple(
            _snapshot(v) for v in value)
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is compared by repr
        return repr(value)


def same(a: Any, b: Any) -> str | None:
    """None when `a` and `b` agree, else what differs."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"tensor vs {type(b).__name__}"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
        if a.requires_grad != b.requires_grad:
            return f"requires_grad {a.requires_grad} vs {b.requires_grad}"
        if a.dtype == torch.bool or not (a.is_floating_point() or a.is_complex()):
            return None if torch.equal(a, b) else f"{a} vs {b}"
        wide = torch.complex128 if a.is_complex() else torch.float64
        ok = torch.allclose(a.detach().resolve_conj().resolve_neg().to(wide),
                            b.detach().resolve_conj().resolve_neg().to(wide), rtol=1e-4,
                            atol=1e-5, equal_nan=True)
        return None if ok else f"{a.detach()} vs {b.detach()}"
    if isinstance(a, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{type(a).__name__}[{len(a)}] vs {type(b).__name__}[{len(b)}]"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y)
            if d:
                return f"[{i}] {d}"
        return None
    if isinstance(a, dict):
        if type(a) is not type(b) or list(a.keys()) != list(b.keys()):
            return f"keys {list(a)} vs {list(b) if isinstance(b, dict) else b}"
        for k in a:
            d = same(a[k], b[k])
            if d:
                return f"[{k!r}] {d}"
        return None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a):
            return None if math.isnan(b) else f"{a} vs {b}"
        ok = a == b and math.copysign(1, a) == math.copysign(1, b)
        return None if ok else f"{a!r} vs {b!r}"
    if type(a) is not type(b) or a != b:
        return f"{a!r} vs {b!r}"
    return None


def _run(make: Callable[[], Probe], compile_fn: Callable[[Callable[..., Any]], Any] | None
         ) -> list[tuple[Any, ...]]:
    torch.manual_seed(1234)
    grad = torch.is_grad_enabled()
    probe = make()
    try:
        fn = probe.fn if compile_fn is None else compile_fn(probe.fn)
        seen: list[tuple[Any, ...]] = []
        torch.manual_seed(0)
        for step in probe.calls:
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    result = _snapshot(step(fn))
                kind = "ok"
            except Exception as e:  # noqa: BLE001 - the exception's type is compared
                kind, result = "raised", type(e).__name__
            state = _snapshot(probe.state()) if probe.state else None
            seen.append((kind, result, out.getvalue(), state, torch.is_grad_enabled()))
        return seen
    finally:
        torch.set_grad_enabled(grad)
        if probe.cleanup is not None:
            probe.cleanup()


def compare(make: Callable[[], Probe],
            compile_fn: Callable[[Callable[..., Any]], Any]) -> str | None:
    """The first difference between `make`'s steps run eagerly and through `compile_fn`."""
    expected = _run(make, None)
    got = _run(make, compile_fn)
    for i, (e, g) in enumerate(zip(expected, got)):
        where = f"call {i + 1}"
        if e[0] != g[0]:
            return f"{where}: eager {e[0]} {e[1] if e[0] == 'raised' else ''} vs " \
                   f"compiled {g[0]} {g[1] if g[0] == 'raised' else ''}"
        for label, a, b in (("result", e[1], g[1]), ("state", e[3], g[3])):
            d = same(a, b)
            if d:
                return f"{where}: {label} differs: {d}"[:400]
        if e[2] != g[2]:
            return f"{where}: printed {e[2]!r} vs {g[2]!r}"
        if e[4] != g[4]:
            return f"{where}: grad mode after the call {e[4]} vs {g[4]}"
    return None


def ours(backend: str) -> Callable[[Callable[..., Any]], Any]:
    """Compile with this project's compiler (its caches reset first)."""
    import compiler

    compiler.reset()
    return lambda fn: compiler.compile(fn, backend=backend)


BACKENDS = ["eager", "aot_eager", "inductor"]


def probe_test(probes: list[Make], xfail: Callable[[Make, str], str | None] | None = None,
               ) -> Callable[..., None]:
    """A probe file's pytest test: every probe on every backend agrees with eager (results,
    exceptions, printed output, state). `xfail(make, backend)` gives the reason of a known
    difference (a strict xfail), or None."""

    @pytest.mark.parametrize("backend", BACKENDS)
    @pytest.mark.parametrize("make", probes, ids=[p.__name__ for p in probes])
    def test_probe(make: Make, backend: str, request: pytest.FixtureRequest) -> None:
        reason = xfail(make, backend) if xfail is not None else None
        if reason is not None:
            request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
        difference = compare(make, ours(backend))
        assert difference is None, difference

    return test_probe


def theirs(backend: str) -> Callable[[Callable[..., Any]], Any]:
    """Compile with torch.compile, the yardstick (its caches reset first)."""
    torch._dynamo.reset()
    return lambda fn: torch.compile(fn, backend=backend)


def main(probes: list[Callable[[], Probe]], argv: list[str]) -> int:
    """Print OK/BAD per probe and backend and the BAD counts per backend."""
    use_torch = "--torch" in argv
    backends = list(BACKENDS)
    names = []
    rest = [a for a in argv if a != "--torch"]
    while rest:
        a = rest.pop(0)
        if a == "--backends":
            backends = rest.pop(0).split(",")
        else:
            names.append(a)
    bad = dict.fromkeys(backends, 0)
    picked = [p for p in probes if not names or p.__name__ in names]
    for p in picked:
        line = []
        for b in backends:
            try:
                d = compare(p, theirs(b) if use_torch else ours(b))
            except Exception as e:  # noqa: BLE001 - a crash of the runner is reported
                d = f"runner crashed: {type(e).__name__}: {e}"[:300]
            bad[b] += d is not None
            line.append(f"{b}={'ok' if d is None else d}")
        flag = "OK " if all(x.endswith("=ok") for x in line) else "BAD"
        print(f"{flag} {p.__name__}: " + "  ".join(line), flush=True)
    who = "torch.compile" if use_torch else "ours"
    print(f"{who}: {len(picked)} probes; BAD " + ", ".join(f"{b} {n}" for b, n in bad.items()))
    return 0


if __name__ == "__main__":
    sys.exit(0)
