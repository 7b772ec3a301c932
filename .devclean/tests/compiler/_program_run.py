"""Run a generated program (`_program_gen.Program`) eagerly and through a backend, and compare.

Each run execs the program's source into a fresh module, so eager and compiled runs never share
globals, classes or objects. The driver `main(fn, record)` makes the calls; `record` runs one
call and takes a snapshot of everything a user could observe afterwards: the returned value
(or the exception's type), the arguments (tensors, the list, the object), the module's state
(globals, class `K`, object `OBJ`, which helper/method is bound), grad mode after the call,
which returned tensors are or share storage with inputs, and the gradients of the inputs'
leaves after a backward pass of the returned tensors.
"""

from __future__ import annotations

import dataclasses
import itertools
import linecache
import math
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from _program_gen import STATE, Program, render

_counter = itertools.count()


@dataclasses.dataclass
class Snapshot:
    """What one call left behind, frozen into plain comparable values."""

    result: Any
    exception: str | None
    args: Any
    state: Any
    grad_enabled: bool
    aliasing: Any
    grads: Any


def _freeze(v: Any, depth: int = 0) -> Any:
    if depth > 6:
        return ("deep",)
    if isinstance(v, torch.Tensor):
        t = v.detach().clone()
        return ("tensor", t, v.requires_grad, tuple(v.shape), tuple(v.stride()), v.dtype)
    if isinstance(v, (bool, int, str, type(None))):
        return v
    if isinstance(v, float):
        return ("float", v)
    if isinstance(v, tuple):
        return ("tuple", [_freeze(e, depth + 1) for e in v])
    if isinstance(v, list):
        return ("list", [_freeze(e, depth + 1) for e in v])
    if isinstance(v, dict):
        return ("dict", [(_freeze(k, depth + 1), _freeze(e, depth + 1)) for k, e in v.items()])
    if isinstance(v, types.FunctionType):
        return ("function", v.__name__)
    if isinstance(v, type):
        attrs = {k: e for k, e in vars(v).items() if not k.startswith("__")}
        return ("class", v.__name__, _freeze(attrs, depth + 1))
    if hasattr(v, "__dict__"):
        return ("object", type(v).__name__, _freeze(dict(vars(v)), depth + 1))
    return ("other", repr(v))


def _tensors(v: Any, out: list[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for e in v:
            _tensors(e, out)
    elif isinstance(v, dict):
        for e in v.values():
            _tensors(e, out)
    return out


def _aliasing(result: Any, args: dict[str, Any], ns: dict[str, Any]) -> Any:
    """For each returned tensor: which input it is, and which inputs share its storage."""
    anchors = _tensors([args["x"], args["y"], args["lst"], args["obj"].w, ns["GT"]], [])
    sig = []
    for t in _tensors(result, []):
        same = [i for i, a in enumerate(anchors) if t is a]
        ptr = t.untyped_storage().data_ptr()
        shares = [i for i, a in enumerate(anchors) if a.untyped_storage().data_ptr() == ptr]
        sig.append((same, shares))
    return sig


class _Recorder:
    def __init__(self, ns: dict[str, Any]) -> None:
        self.ns = ns
        self.snapshots: list[Snapshot] = []

    def __call__(self, index: int, thunk: Callable[[], Any], args: dict[str, Any],
                 leaves: list[torch.Tensor]) -> None:
        exception = None
        result = None
        try:
            result = thunk()
        except Exception as e:  # noqa: BLE001 - the exception's type is what we compare
            exception = type(e).__name__
        grad_enabled = torch.is_grad_enabled()
        grads: Any = None
        outs = [t for t in _tensors(result, []) if t.requires_grad and t.is_floating_point()]
        if exception is None and outs:
            try:
                loss = sum(t.sum() for t in outs)
                assert isinstance(loss, torch.Tensor)
                with torch.enable_grad():
                    loss.backward(retain_graph=True)
                grads = [_freeze(leaf.grad) for leaf in leaves]
            except Exception as e:  # noqa: BLE001
                grads = ("backward raised", type(e).__name__)
            for leaf in leaves:
                leaf.grad = None
        self.snapshots.append(Snapshot(
            result=_freeze(result),
            exception=exception,
            args=_freeze(args),
            state=_freeze({k: self.ns[k] for k in STATE}),
            grad_enabled=grad_enabled,
            aliasing=_aliasing(result, args, self.ns) if exception is None else None,
            grads=grads,
        ))


def run(program: Program, backend: str | Callable[..., Any] | None) -> list[Snapshot]:
    """Exec the program into a fresh module and run its driver; `backend=None` is eager."""
    source = render(program)
    name = f"_generated_program_{next(_counter)}"
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - the point
        ns = module.__dict__
        fn = ns["f"]
        if backend is not None:
            import compiler

            fn = compiler.compile(fn, backend=backend)
        recorder = _Recorder(ns)
        grad = torch.is_grad_enabled()
        try:
            ns["main"](fn, recorder)
        finally:
            torch.set_grad_enabled(grad)
        return recorder.snapshots
    finally:
        del sys.modules[name]


def _close(a: Any, e: Any, where: str, out: list[str]) -> None:
    tag = e[0] if isinstance(e, tuple) and e and isinstance(e[0], str) else None
    if tag is not None and not (isinstance(a, tuple) and a and a[0] == tag):
        out.append(f"{where}: {_short(a)} != eager {_short(e)}")
        return
    if tag == "tensor":
        _, te, rg_e, shape_e, _stride_e, dtype_e = e
        _, ta, rg_a, shape_a, _stride_a, dtype_a = a
        if (shape_a, dtype_a) != (shape_e, dtype_e):
            out.append(f"{where}: shape/dtype {shape_a}/{dtype_a} != eager {shape_e}/{dtype_e}")
        elif not torch.allclose(ta, te, rtol=1e-4, atol=1e-4, equal_nan=True):
            out.append(f"{where}: values differ\n  compiled={ta}\n  eager={te}")
        if rg_a != rg_e:
            out.append(f"{where}: requires_grad {rg_a} != eager {rg_e}")
    elif tag == "float":
        if not (math.isclose(a[1], e[1], rel_tol=1e-4, abs_tol=1e-5)
                or (math.isnan(a[1]) and math.isnan(e[1]))):
            out.append(f"{where}: {a[1]!r} != eager {e[1]!r}")
    elif tag in ("tuple", "list"):
        if len(a[1]) != len(e[1]):
            out.append(f"{where}: length {len(a[1])} != eager {len(e[1])}: "
                       f"{_short(a)} != {_short(e)}")
            return
        for i, (x, y) in enumerate(zip(a[1], e[1])):
            _close(x, y, f"{where}[{i}]", out)
    elif tag == "dict":
        keys_a, keys_e = [k for k, _ in a[1]], [k for k, _ in e[1]]
        if keys_a != keys_e:
            out.append(f"{where}: keys {_short(keys_a)} != eager {_short(keys_e)}")
            return
        for (k, x), (_, y) in zip(a[1], e[1]):
            _close(x, y, f"{where}[{k!r}]" if where.endswith("]") or "." in where
                   or not where.startswith("call") else f"{where} {k}", out)
    elif tag in ("class", "object"):
        if a[1] != e[1]:
            out.append(f"{where}: type {a[1]} != eager {e[1]}")
            return
        attrs_a, attrs_e = dict(a[2][1]), dict(e[2][1])
        if list(attrs_a) != list(attrs_e):
            out.append(f"{where}: attributes {list(attrs_a)} != eager {list(attrs_e)}")
        for k, value in attrs_e.items():
            if k in attrs_a:
                _close(attrs_a[k], value, f"{where}.{k}", out)
    elif isinstance(e, (list, tuple)) and isinstance(a, (list, tuple)):
        if len(a) != len(e):
            out.append(f"{where}: {_short(a)} != eager {_short(e)}")
            return
        for i, (x, y) in enumerate(zip(a, e)):
            _close(x, y, f"{where}[{i}]", out)
    elif a != e or type(a) is not type(e):
        out.append(f"{where}: {_short(a)} != eager {_short(e)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 300 else text[:300] + "..."


def compare(compiled: list[Snapshot], eager: list[Snapshot]) -> list[str]:
    """Differences between a compiled run and the eager run, call by call (empty: agree)."""
    out: list[str] = []
    for i, (c, e) in enumerate(zip(compiled, eager)):
        if c.exception != e.exception:
            out.append(f"call {i}: exception {c.exception} != eager {e.exception}")
            continue
        for field in ("result", "args", "state", "grad_enabled", "aliasing", "grads"):
            _close(getattr(c, field), getattr(e, field), f"call {i} {field}", out)
    if len(compiled) != len(eager):
        out.append(f"{len(compiled)} calls recorded, eager {len(eager)}")
    return out


def check(program: Program, backend: str | Callable[..., Any]) -> list[str]:
    """Run eagerly and through `backend`; the differences (an exception escaping the driver
    itself is reported as a difference too)."""
    eager = run(program, None)
    try:
        compiled = run(program, backend)
    except Exception as e:  # noqa: BLE001
        return [f"the compiled run raised outside a call: {type(e).__name__}: {e}"]
    finally:
        _reset()
    return compare(compiled, eager)


def _reset() -> None:
    import compiler

    compiler.reset()


def reproducer(program: Program, backend: object, differences: list[str]) -> str:
    """A standalone script: `python repro.py` (eager) vs `python repro.py <backend>`."""
    head = "\n".join(f"# {line}" for d in differences[:6] for line in d.splitlines()[:6])
    footer = '''

if __name__ == "__main__":
    import sys

    def record(i, thunk, args, leaves):
        try:
            out = thunk()
        except Exception as e:
            out = f"raised {type(e).__name__}: {e}"
        print(f"call {i}: {out!r}")
        print(f"   args={args!r}")
        print(f"   G={G} GN={GN} FLAG={FLAG} LOG={LOG} D={D} K=({K.scale}, {K.count}, "
              f"{K.registry}) OBJ={vars(OBJ)}")

    if len(sys.argv) > 1:
        import compiler
        main(compiler.compile(f, backend=sys.argv[1]), record)
    else:
        main(f, record)
'''
    return f"# backend {backend!r} differs from eager:\n{head}\n" + render(program) + footer
