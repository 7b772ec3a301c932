"""The user's per-callable rules for capture: graph breaks on request, opaque graph calls,
forced breaks, constant results, polyfills, and frames skipped with or without their callees.

In: a callable and what to do with it. Out: an entry in `policy`'s tables (consulted by the
translator before any built-in handling) and, for `disable`, the wrapper to call instead.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any, TypeVar

from capture import policy
from capture.frame import CompiledFunction, run_disabled

_F = TypeVar("_F", bound=Callable[..., Any])


def graph_break() -> None:
    """Eagerly nothing; in traced code, a graph break at the call."""


def mark_graph_break(fn: Callable[[], None]) -> None:
    """Make `fn` (a function that does nothing eagerly) a graph break where traced code calls
    it, like `graph_break` (the facade's own `graph_break` is one)."""
    policy.mark_graph_break(fn)


mark_graph_break(graph_break)


def allow_in_graph(fn: _F) -> _F:
    """Put every call of `fn` in the graph as one opaque node (its output found by running it
    on fake tensors); returns `fn`."""
    if not callable(fn):
        raise TypeError(f"allow_in_graph: expected a callable, got {type(fn).__name__}")
    policy.allow_in_graph(fn)
    return fn


def disallow_in_graph(fn: _F) -> _F:
    """Keep `fn` (a torch operation) out of graphs: each call is a graph break; returns `fn`."""
    if not callable(fn):
        raise TypeError(f"disallow_in_graph: expected a callable, got {type(fn).__name__}")
    policy.disallow_in_graph(fn)
    return fn


def assume_constant_result(fn: _F) -> _F:
    """Call `fn` for real at capture; its result is a constant of the graph; returns `fn`."""
    if not callable(fn):
        raise TypeError(f"assume_constant_result: expected a callable, got {type(fn).__name__}")
    policy.assume_constant_result(fn)
    return fn


def substitute_in_graph(original: Callable[..., Any]) -> Callable[[_F], _F]:
    """A decorator: the decorated Python function is traced wherever traced code calls
    `original`; its parameters must be `original`'s (when `original` has a signature)."""
    if not callable(original):
        raise TypeError(
            f"substitute_in_graph: expected a callable, got {type(original).__name__}")

    def decorate(polyfill: _F) -> _F:
        if not isinstance(polyfill, types.FunctionType):
            raise TypeError("substitute_in_graph: the substitute must be a Python function, "
                            f"got {type(polyfill).__name__}")
        _check_signature(original, polyfill)
        policy.substitute_in_graph(original, polyfill)
        return polyfill

    return decorate


def _check_signature(original: Callable[..., Any], polyfill: types.FunctionType) -> None:
    try:
        expected = inspect.signature(original)
    except (TypeError, ValueError):
        return  # NOTE: a builtin without a text signature: nothing to compare
    got = inspect.signature(polyfill)

    def shape(sig: inspect.Signature) -> list[tuple[str, object, bool]]:
        return [(p.name, p.kind, p.default is inspect.Parameter.empty)
                for p in sig.parameters.values()]

    if shape(expected) != shape(got):
        name = getattr(original, "__qualname__", repr(original))
        raise TypeError(
            f"substitute_in_graph: the substitute for {name} must take the same parameters: "
            f"{name}{expected} vs {polyfill.__name__}{got}"
        )


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True) -> Any:
    """Run `fn` eagerly, never captured (usable as a decorator).

    A call from traced code is a graph break around that call. With `recursive=True`
    compiled functions that `fn` calls run eagerly too; with `recursive=False` only `fn`'s
    own frame is skipped: compiled functions and modules it calls still compile."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    inner = fn.fn if isinstance(fn, CompiledFunction) else fn
    wrapped = run_disabled(inner) if recursive else _skip_frame(inner)
    code = getattr(wrapped, "__code__", None)
    if code is not None:
        policy.mark_disabled(code)
    return wrapped


def _skip_frame(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def skipped(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    # NOTE: a compiled frame calling `skipped` runs `fn` with its callees compiled
    # (`capture.shallow`); called from eager code it just runs.
    skipped.__capture_shallow__ = fn  # type: ignore[attr-defined]  # a marker attribute
    return skipped
