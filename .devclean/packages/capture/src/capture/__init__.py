"""Bytecode capture: a symbolic CPython bytecode interpreter producing FX graphs, guards and
transformed code.

    import capture
    fast = capture.optimize(fn, backend="eager", fullgraph=True)
    fast(x)        # first call traces fn's bytecode into an FX graph; later calls hit the cache
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from capture import config as config
from capture.backends import backend_name as _backend_name
from capture.backends import list_backends, lookup_backend, register_backend
from capture.frame import (
    CompiledFunction,
    CompileOptions,
    CompileRecord,
    is_compiling,
    recording,
    reset_all,
)
from capture.graph_break import BackendCompilerFailed, Unsupported
from capture.module_wrapper import OptimizedModule, make_trampoline
from capture.rules import (
    allow_in_graph,
    assume_constant_result,
    disable,
    disallow_in_graph,
    graph_break,
    substitute_in_graph,
)

__version__ = "0.1.0"

__all__ = [
    "BackendCompilerFailed",
    "CompileRecord",
    "CompiledFunction",
    "OptimizedModule",
    "Unsupported",
    "__version__",
    "allow_in_graph",
    "assume_constant_result",
    "config",
    "disable",
    "disallow_in_graph",
    "graph_break",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "optimize",
    "recording",
    "register_backend",
    "reset",
    "substitute_in_graph",
]


def optimize(
    target: Any,
    *,
    backend: str | Callable[..., Any] = "eager",
    fullgraph: bool = False,
    dynamic: bool | None = None,
    options: Mapping[str, object] | None = None,
) -> Any:
    """Compile `target` (function, bound method, nn.Module, or a function written in C such
    as `torch.sign` or an ATen op, compiled as its call) with `backend`.

    Returns a wrapper: a `CompiledFunction` for functions and methods, an `OptimizedModule`
    for modules. `dynamic`: None (default) compiles static shapes first and makes a size
    or int argument symbolic when a later call changes it (automatic dynamic); True makes
    every input size symbolic from the first compile; False keeps static shapes (only
    dimensions marked with `mark_dynamic` are symbolic).
    `options`: option values for this compile: capture's and guards' (`suppress_errors`,
    `cache_size_limit`, ...) apply to the wrapper; any other name is passed to the backend
    as `backend(gm, example_inputs, options=...)`.
    """
    opts = CompileOptions.split(options, dynamic)
    if isinstance(backend, str):
        backend_fn = lookup_backend(backend)
        name = backend
    elif callable(backend):
        backend_fn = backend
        name = _backend_name(backend)
    else:
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if isinstance(target, OptimizedModule):
        target = target._orig_mod
    if isinstance(target, torch.nn.Module):
        call = CompiledFunction(make_trampoline(), backend_fn, name, fullgraph, options=opts)
        return OptimizedModule(target, call)
    if isinstance(target, CompiledFunction):
        target = target.fn
    if isinstance(target, types.MethodType) and isinstance(target.__func__, types.FunctionType):
        return CompiledFunction(target.__func__, backend_fn, name, fullgraph, target.__self__,
                                opts)
    if isinstance(target, types.FunctionType):
        return CompiledFunction(target, backend_fn, name, fullgraph, options=opts)
    if isinstance(target, (types.BuiltinFunctionType, torch._ops.OpOverload,
                           torch._ops.OpOverloadPacket)):
        # NOTE: a function written in C (`torch.sign`, an ATen op) has no bytecode: its
        # call from a Python function is what is captured
        return CompiledFunction(_calling(target), backend_fn, name, fullgraph, options=opts)
    # NOTE: not callable(): a bound Python `__call__` method is what can be compiled.
    if callable(target) and isinstance(getattr(target, "__call__", None),  # noqa: B004
                                        types.MethodType):
        call_fn = target.__call__.__func__
        return CompiledFunction(call_fn, backend_fn, name, fullgraph, target, opts)
    raise TypeError(f"capture.optimize: cannot compile {type(target).__name__} objects")


def _calling(target: Callable[..., Any]) -> types.FunctionType:
    def call(*args: Any, **kwargs: Any) -> Any:
        return target(*args, **kwargs)

    assert isinstance(call, types.FunctionType)
    name = str(getattr(target, "__name__", "call")).replace(".", "_")
    call.__name__ = call.__qualname__ = name if name.isidentifier() else "call"
    return call


def reset() -> None:
    """Forget every compiled entry (all wrappers' caches)."""
    reset_all()
