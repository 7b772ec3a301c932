"""Differential checking of programs that read and write module state (globals, class
attributes, other modules, closures, default arguments).

A program is source text. `twin_run` executes it twice, in two fresh module namespaces: one
side runs eagerly, the other through `capture.optimize`. Every call gets equal fresh
arguments; a `between` hook changes the state of both namespaces between calls. After every
call the results, the arguments and the whole module state (globals, attributes of the
classes the program defines, other modules' globals, defaults, closure cells) are compared,
including identity: where eager has one object in two places (an argument stored in a
global list, a returned argument), the compiled side must have its own counterpart object
in both places, and floats compare by bits (`-0.0` is not `0.0`).
"""

from __future__ import annotations

import importlib.util
import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import capture
import pytest
import torch
from _differential import CountingBackend, fresh

_AOTGRAD_SPEC = importlib.util.find_spec("aotgrad")
_HAS_AOTGRAD = _AOTGRAD_SPEC is not None and _AOTGRAD_SPEC.origin is not None
_INDUCTOR_SPEC = importlib.util.find_spec("inductor")
_HAS_INDUCTOR = _INDUCTOR_SPEC is not None and _INDUCTOR_SPEC.origin is not None
needs_aotgrad = pytest.mark.skipif(not _HAS_AOTGRAD, reason="aotgrad is not installed")
needs_inductor = pytest.mark.skipif(not _HAS_INDUCTOR, reason="inductor is not installed")
# NOTE: inductor compiles C++ per graph (seconds on a small machine): marked slow, run with
# `-m slow`; the programs are the same, only the graphs' compiler differs.
BACKENDS = [
    "eager",
    pytest.param("aot_eager", marks=needs_aotgrad),
    pytest.param("inductor", marks=[needs_inductor, pytest.mark.slow]),
]

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


class Recording:
    """Wraps a backend (by name) and counts the graphs it receives."""

    def __init__(self, name: str) -> None:
        self.inner = CountingBackend() if name == "eager" else capture.lookup_backend(name)
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


@dataclass
class TwinResult:
    """What a twin run saw: graphs the backend got, compiles (incl. eager fallbacks)."""

    graphs: int
    compiles: int
    eager_ns: dict[str, Any] = field(default_factory=dict)
    compiled_ns: dict[str, Any] = field(default_factory=dict)


class _Pairs:
    """Eager object -> compiled object, both ways: aliasing must match."""

    def __init__(self) -> None:
        self.fwd: dict[int, Any] = {}
        self.back: dict[int, Any] = {}
        self.keep: list[Any] = []

    def seen(self, c: Any, e: Any, where: str) -> bool:
        if id(e) in self.fwd:
            assert self.fwd[id(e)] is c, f"{where}: eager has the same object here as elsewhere, compiled does not"
            return True
        assert id(c) not in self.back, f"{where}: compiled shares an object here that eager does not"
        self.fwd[id(e)] = c
        self.back[id(c)] = e
        self.keep += [c, e]
        return False


def _same_scalar(c: Any, e: Any, where: str) -> None:
    assert type(c) is type(e), f"{where}: type {type(c).__name__} != {type(e).__name__} ({c!r} vs {e!r})"
    if isinstance(e, float):
        same = (math.isnan(c) and math.isnan(e)) or (c == e and math.copysign(1, c) == math.copysign(1, e))
        assert same, f"{where}: {c!r} != {e!r}"
    elif isinstance(e, complex):
        _same_scalar(c.real, e.real, where + ".real")
        _same_scalar(c.imag, e.imag, where + ".imag")
    else:
        assert c == e, f"{where}: {c!r} != {e!r}"


def same(c: Any, e: Any, where: str, pairs: _Pairs, shared_ok: bool = True) -> None:
    """Compiled value `c` equals eager value `e` in value, type and aliasing structure."""
    if isinstance(e, _SCALARS):
        _same_scalar(c, e, where)
        return
    if isinstance(e, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
                      torch.dtype, torch.device, torch.nn.Module, types.MethodType)):
        if isinstance(e, types.FunctionType) and isinstance(c, types.FunctionType) and c is not e:
            assert c.__qualname__ == e.__qualname__, f"{where}: function {c!r} vs {e!r}"
        elif isinstance(e, type) and isinstance(c, type) and c is not e:
            assert c.__qualname__ == e.__qualname__, f"{where}: class {c!r} vs {e!r}"
        elif isinstance(e, types.ModuleType) and isinstance(c, types.ModuleType):
            pass
        else:
            assert c is e or c == e, f"{where}: {c!r} vs {e!r}"
        return
    assert type(c) is type(e) or (
        type(c).__qualname__ == type(e).__qualname__ and type(e).__module__.startswith("twin_")
    ), f"{where}: type {type(c).__name__} != {type(e).__name__}"
    if isinstance(e, torch.Tensor):
        if pairs.seen(c, e, where):
            return
        assert c.shape == e.shape and c.dtype == e.dtype, f"{where}: {c.shape}/{c.dtype} vs {e.shape}/{e.dtype}"
        torch.testing.assert_close(c, e, equal_nan=True, msg=lambda m: f"{where}: {m}")
        assert c.requires_grad == e.requires_grad, f"{where}: requires_grad differs"
        return
    if (isinstance(e, (list, dict, set)) or hasattr(e, "__dict__")) and pairs.seen(c, e, where):
        return
    if isinstance(e, (list, tuple)):
        assert len(c) == len(e), f"{where}: length {len(c)} != {len(e)} ({c!r} vs {e!r})"
        for i, (a, b) in enumerate(zip(c, e)):
            same(a, b, f"{where}[{i}]", pairs)
    elif isinstance(e, dict):
        assert list(c) == list(e), f"{where}: keys {list(c)} != {list(e)}"
        for k in e:
            same(c[k], e[k], f"{where}[{k!r}]", pairs)
    elif isinstance(e, (set, frozenset)):
        assert c == e, f"{where}: {c!r} != {e!r}"
        assert list(c) == list(e), f"{where}: set order {list(c)} != {list(e)}"
    elif hasattr(e, "__dict__"):
        same(vars(c), vars(e), f"{where}.__dict__", pairs)
    else:
        assert c == e, f"{where}: {c!r} != {e!r}"


def _state(ns: dict[str, Any], mod_name: str) -> dict[str, Any]:
    """The comparable state of a namespace: its globals, the class attributes of classes it
    defines, the globals of the other modules it holds, and functions' defaults and cells."""
    out: dict[str, Any] = {}
    for name, value in ns.items():
        if name.startswith("__"):
            continue
        if isinstance(value, type) and value.__module__ == mod_name:
            for k, v in vars(value).items():
                if not k.startswith("__") and not callable(v) and not isinstance(
                    v, (staticmethod, classmethod, property)
                ):
                    out[f"{name}.{k}"] = v
            out[f"{name}.__attrs__"] = sorted(k for k in vars(value) if not k.startswith("__"))
        elif isinstance(value, types.ModuleType) and value.__name__.startswith("twin_"):
            out.update({f"{name}.{k}": v for k, v in _state(vars(value), value.__name__).items()})
        elif isinstance(value, types.FunctionType):
            out[f"{name}.__defaults__"] = value.__defaults__
            for i, cell in enumerate(value.__closure__ or ()):
                try:
                    out[f"{name}.cell{i}"] = cell.cell_contents
                except ValueError:
                    out[f"{name}.cell{i}"] = "<empty>"
        elif not isinstance(value, types.ModuleType):
            out[name] = value
    return out


def _namespace(side: str, src: str, modules: dict[str, str]) -> dict[str, Any]:
    mod_name = f"twin_{side}"
    mod = types.ModuleType(mod_name)
    ns = mod.__dict__
    ns["torch"] = torch
    ns["math"] = math
    for name, mod_src in modules.items():
        other = types.ModuleType(f"twin_{side}_{name}")
        other.__dict__["torch"] = torch
        exec(compile(mod_src, f"<twin {name}>", "exec"), other.__dict__)  # noqa: S102
        ns[name] = other
    exec(compile(src, f"<twin {side}>", "exec"), ns)  # noqa: S102  # a module made for the test
    return ns


def twin_run(
    src: str,
    args: Callable[[int], tuple[Any, ...]] = lambda i: (),
    *,
    fn: str = "f",
    calls: int = 4,
    between: Callable[[dict[str, Any], int], None] | None = None,
    modules: dict[str, str] | None = None,
    backend: str = "eager",
    fullgraph: bool = False,
    max_compiles: int | None = None,
) -> TwinResult:
    """Run `src`'s `fn` eagerly and compiled over `calls` calls; compare everything."""
    capture.reset()
    modules = modules or {}
    e_ns = _namespace("e", src, modules)
    c_ns = _namespace("c", src, modules)
    recording = Recording(backend)
    compiled = capture.optimize(c_ns[fn], backend=recording, fullgraph=fullgraph)
    c_ns["__compiled__"] = compiled
    pairs = _Pairs()
    for call in range(calls):
        where = f"call {call + 1}"
        if between is not None and call:
            between(e_ns, call)
            between(c_ns, call)
        base = args(call)
        e_args = fresh(base)
        c_args = fresh(base)
        for i, (a, b) in enumerate(zip(c_args, e_args)):
            same(a, b, f"{where}: argument {i}", pairs)
        e_exc = c_exc = None
        try:
            expected = e_ns[fn](*e_args)
        except Exception as exc:  # noqa: BLE001 - compared with the compiled side
            e_exc, expected = exc, None
        try:
            actual = compiled(*c_args)
        except Exception as exc:  # noqa: BLE001 - compared with the eager side
            c_exc, actual = exc, None
        if e_exc is not None or c_exc is not None:
            assert type(c_exc) is type(e_exc), f"{where}: eager raised {e_exc!r}, compiled raised {c_exc!r}"
        same(actual, expected, f"{where}: result", pairs)
        same(list(c_args), list(e_args), f"{where}: arguments after the call", pairs)
        e_state = _state(e_ns, "twin_e")
        c_state = _state(c_ns, "twin_c")
        assert sorted(c_state) == sorted(e_state), f"{where}: names {sorted(c_state)} != {sorted(e_state)}"
        for name in e_state:
            same(c_state[name], e_state[name], f"{where}: {name}", pairs)
    compiles = len(compiled.compiles)
    if max_compiles is not None:
        assert compiles <= max_compiles, f"{compiles} compiles over {calls} calls (at most {max_compiles})"
    return TwinResult(len(recording.graphs), compiles, e_ns, c_ns)
