"""Differential runner for the soundness tests (tests/capture/test_soundness_*.py).

A case is a program and a list of *makers*: each maker sets up the Python state for one call
(globals, class attributes, monkeypatches) and returns the call's arguments. The runner calls
each maker twice per step, once for the eager run and once for the compiled run, so both
runs start from the same state on fresh objects; then it compares results, the arguments
after the call and anything `observe()` reports (globals, attributes). Calls follow each other
on one compiled function, so a stale cache entry shows up as a wrong answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same

#: Backends the capture tests can use with only capture installed, plus those registered.
BACKENDS = ["eager"] + [b for b in ("aot_eager", "inductor") if b in capture.list_backends()]
#: BACKENDS as pytest params: inductor compiles C++ per graph, so its runs are marked slow.
BACKEND_PARAMS = [pytest.param(b, marks=pytest.mark.slow) if b == "inductor" else b
                  for b in BACKENDS]


def runner(backend: Any) -> Callable[..., CountingBackend | None]:
    """`run_steps` with `backend` (a name; None: the counting eager backend)."""
    return functools.partial(run_steps, backend=backend)


def run_steps(
    fn: Callable[..., Any],
    makers: Sequence[Callable[[], tuple[Any, ...]]],
    *,
    backend: Any = None,
    observe: Callable[[], Any] | None = None,
    compile_fn: Callable[..., Any] | None = None,
    max_graphs: int | None = None,
) -> CountingBackend | None:
    """Run `fn` eagerly and compiled, one step per maker; compare everything after each step.

    `backend`: a backend name or callable (default: a CountingBackend, returned).
    `compile_fn(fn, backend)`: how to compile (default `capture.optimize(fn, backend=...)`).
    `max_graphs`: with the counting backend, the most graphs the backend may receive.
    """
    capture.reset()
    counting = None
    if backend is None:
        counting = backend = CountingBackend()
    if compile_fn is None:
        compiled = capture.optimize(fn, backend=backend)
    else:
        compiled = compile_fn(fn, backend)
    for step, make in enumerate(makers):
        where = f"call {step + 1}"
        e_args = make()
        torch.manual_seed(0)
        expected = fn(*e_args)
        e_seen = observe() if observe is not None else None
        c_args = make()
        torch.manual_seed(0)
        actual = compiled(*c_args)
        c_seen = observe() if observe is not None else None
        assert_same(actual, expected, f"{where}: result")
        assert_same(list(c_args), list(e_args), f"{where}: arguments after the call")
        assert_same(c_seen, e_seen, f"{where}: observed state after the call")
    if counting is not None and max_graphs is not None:
        assert counting.frame_count <= max_graphs, (
            f"{counting.frame_count} graphs compiled, expected at most {max_graphs}")
    return counting
