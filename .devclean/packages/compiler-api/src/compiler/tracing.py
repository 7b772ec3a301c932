"""The fine-grained tracing API: what capture does with particular callables.

`graph_break`, `allow_in_graph`, `disallow_in_graph`, `assume_constant_result` and
`substitute_in_graph` check their arguments and delegate to `capture.rules`; `disable`
lives in `compiler.api` beside `compile`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import capture
import torch

from compiler.validation import expect

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=Callable[..., Any] | Sequence[Callable[..., Any]])


def graph_break() -> None:
    """Split the graph here: the code before and after this call is compiled separately.

    Returns:
        None. Eagerly the call does nothing.

    Examples:
        >>> import torch, compiler
        >>> graphs = []
        >>> def count(gm, example_inputs):
        ...     graphs.append(gm)
        ...     return gm.forward
        >>> def f(x):
        ...     y = x.sin()
        ...     compiler.graph_break()
        ...     return y.cos()
        >>> out = compiler.compile(f, backend=count)(torch.zeros(2))
        >>> out, len(graphs)
        (tensor([1., 1.]), 2)

    Notes:
        While tracing, the graph captured so far is compiled and called, and a resume
        function (compiled on its first call) continues the frame after the call. Under
        `compile(fullgraph=True)` it raises instead, naming the line. Use it to isolate a
        region while debugging, or to bound the size of a graph.
    """
    capture.graph_break()


capture.rules.mark_graph_break(graph_break)


def allow_in_graph(fn: _C) -> _C:
    """Put each call of `fn` in the graph as one opaque call, without tracing into it.

    Args:
        fn: A callable, or a list or tuple of callables, taking and returning tensors (and
            Python values). Its output's shapes and dtypes are found by running it on fake
            tensors, so it must be a function of its arguments' shapes and dtypes alone: no
            reading of tensor values, no side effects.

    Returns:
        `fn` itself (so it can be used as a decorator).

    Raises:
        TypeError: `fn` is not a callable or a sequence of callables.

    Examples:
        >>> import torch, compiler
        >>> @compiler.allow_in_graph
        ... def scaled_relu(x):
        ...     return x.relu() * 2
        >>> def f(x):
        ...     return scaled_relu(x - 1) + 1
        >>> compiler.compile(f, backend="eager")(torch.tensor([0.0, 3.0]))
        tensor([1., 5.])

    Notes:
        The graph holds a `call_function` node whose target is `fn`; backends that trace to
        ATen (aot_eager, inductor) trace through it then. Guards are not taken on anything
        `fn` reads besides its arguments, so it must not depend on global state that changes
        between calls. The rule lasts for the process; `compiler.reset()` keeps it.
    """
    items: list[object] = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    for item in items:
        expect("allow_in_graph", "fn", item, "a callable or a sequence of callables",
               callable(item))
        capture.allow_in_graph(cast(Callable[..., Any], item))
    return fn


def disallow_in_graph(fn: _F) -> _F:
    """Keep a torch operation out of graphs: each call of it is a graph break.

    Args:
        fn: A callable that capture would put in a graph: a torch function, a tensor
            method, an ATen operator, or a callable given to `allow_in_graph` before.

    Returns:
        `fn` itself.

    Raises:
        TypeError: `fn` is not callable.
        ValueError: `fn` would never be put in a graph (user code is traced into, other
            callables run eagerly); the message names `compiler.disable`, the way to keep
            a Python function out of capture.

    Examples:
        >>> import torch, compiler
        >>> graphs = []
        >>> def count(gm, example_inputs):
        ...     graphs.append(gm)
        ...     return gm.forward
        >>> _ = compiler.disallow_in_graph(torch.cumsum)
        >>> def f(x):
        ...     return torch.cumsum(x + 1, 0) * 2
        >>> compiler.compile(f, backend=count)(torch.ones(3))
        tensor([ 4.,  8., 12.])
        >>> len(graphs)
        2
        >>> _ = compiler.allow_in_graph(torch.cumsum)   # undo

    Notes:
        The operation runs eagerly between the graph before it and the graph after it.
        `allow_in_graph(fn)` undoes the rule.
    """
    expect("disallow_in_graph", "fn", fn, "a callable", callable(fn))
    return capture.disallow_in_graph(fn)


def assume_constant_result(fn: _F) -> _F:
    """Treat the result of `fn` as a constant: called once when a frame is captured.

    Args:
        fn: A function of Python values (no tensors) whose result does not change while the
            program runs, such as reading a world size or a configuration flag.

    Returns:
        `fn` itself (so it can be used as a decorator).

    Raises:
        TypeError: `fn` is not callable.

    Examples:
        >>> import torch, compiler
        >>> @compiler.assume_constant_result
        ... def world_size():
        ...     return 4
        >>> def f(x):
        ...     return x / world_size()
        >>> compiler.compile(f, backend="eager")(torch.full((2,), 8.0))
        tensor([2., 2.])

    Notes:
        While tracing, `fn` is called for real with the call's arguments (they must be
        Python constants at capture time) and its result (a Python value, not a tensor)
        is written into the compiled code; later calls of the compiled code do not call
        `fn` again, and no guard checks that its result is unchanged: a different result
        takes effect after `compiler.reset()`. Eager calls of `fn` are unaffected.
    """
    expect("assume_constant_result", "fn", fn, "a callable", callable(fn))
    return capture.assume_constant_result(fn)


def substitute_in_graph(original: Callable[..., Any]) -> Callable[[_F], _F]:
    """Trace a Python replacement wherever traced code calls `original`.

    Args:
        original: A callable that capture cannot trace (a C function, or code capture does
            not support), for which you write an equivalent in plain Python.

    Returns:
        A decorator. Applied to the replacement (a Python function with `original`'s
        parameters), it registers it and returns it unchanged.

    Raises:
        TypeError: `original` is not callable; the replacement is not a Python function or
            its parameters (names, kinds, which have defaults) differ from `original`'s.

    Examples:
        >>> import numpy as np, torch, compiler
        >>> def clip_unit(x):                  # through NumPy: not traceable
        ...     return torch.from_numpy(np.clip(x.numpy(), 0.0, 1.0))
        >>> @compiler.substitute_in_graph(clip_unit)
        ... def clip_unit_traced(x):
        ...     return x.clamp(0.0, 1.0)
        >>> def f(x):
        ...     return clip_unit(x * 2) + 1
        >>> compiler.compile(f, backend="eager", fullgraph=True)(torch.tensor([-1.0, 0.25]))
        tensor([1.0000, 1.5000])

    Notes:
        Eager calls of `original` are unaffected: only traced calls run the replacement,
        and they must compute what `original` computes. The rule lasts for the process.
    """
    expect("substitute_in_graph", "original", original, "a callable", callable(original))
    return capture.substitute_in_graph(original)


# NOTE: keeps `torch` referenced: the doctests use it through the module's namespace.
_ = torch
