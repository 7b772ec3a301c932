"""Bytecode capture: a symbolic CPython bytecode interpreter producing FX graphs, guards and
transformed code.

    import capture
    fast = capture.optimize(fn, backend="eager", fullgraph=True)
    fast(x)        # first call traces fn's bytecode into an FX graph; later calls hit the cache
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from capture import config as config
from capture import policy
from capture.backends import backend_name as _backend_name
from capture.backends import list_backends, lookup_backend, register_backend
from capture.frame import (
    CompiledFunction,
    CompileOptions,
    CompileRecord,
    is_compiling,
    recording,
    reset_all,
    run_disabled,
)
from capture.graph_break import BackendCompilerFailed, Unsupported
from capture.module_wrapper import OptimizedModule, make_trampoline

__version__ = "0.1.0"

__all__ = [
    "BackendCompilerFailed",
    "CompileRecord",
    "CompiledFunction",
    "OptimizedModule",
    "Unsupported",
    "__version__",
    "config",
    "disable",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "optimize",
    "recording",
    "register_backend",
    "reset",
]


def optimize(
    target: Any,
    *,
    backend: str | Callable[..., Any] = "eager",
    fullgraph: bool = False,
    dynamic: bool | None = None,
    options: Mapping[str, object] | None = None,
) -> Any:
    """Compile `target` (function, bound method or nn.Module) with `backend`.

    Returns a wrapper: a `CompiledFunction` for functions and methods, an `OptimizedModule`
    for modules. `dynamic=True` is accepted and treated as static shapes for now.
    `options`: option values for this compile: capture's and guards' (`suppress_errors`,
    `cache_size_limit`, ...) apply to the wrapper; any other name is passed to the backend
    as `backend(gm, example_inputs, options=...)`.
    """
    opts = CompileOptions.split(options)
    if isinstance(backend, str):
        backend_fn = lookup_backend(backend)
        name = backend
    elif callable(backend):
        backend_fn = backend
        name = _backend_name(backend)
    else:
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if dynamic:
        # NOTE: static shapes only for now; shape changes recompile through the guards.
        logging.getLogger("capture").info(
            "capture.optimize(dynamic=True): dynamic shapes are not supported yet; "
            "compiling with static shapes (a shape change recompiles)"
        )
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
    # NOTE: not callable(): a bound Python `__call__` method is what can be compiled.
    if callable(target) and isinstance(getattr(target, "__call__", None),  # noqa: B004
                                        types.MethodType):
        call_fn = target.__call__.__func__
        return CompiledFunction(call_fn, backend_fn, name, fullgraph, target, opts)
    raise TypeError(f"capture.optimize: cannot compile {type(target).__name__} objects")


def reset() -> None:
    """Forget every compiled entry (all wrappers' caches)."""
    reset_all()


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True) -> Any:
    """Run `fn` eagerly, never captured (usable as a decorator)."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    inner = fn.fn if isinstance(fn, CompiledFunction) else fn
    wrapped = run_disabled(inner)
    code = getattr(wrapped, "__code__", None)
    if code is not None:
        policy.mark_disabled(code)
    return wrapped
