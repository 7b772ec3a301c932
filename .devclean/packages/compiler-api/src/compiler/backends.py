"""The backend registry as seen by users: list, look up and register backends.

The registry itself is capture's (entry-point group `capture.backends` plus
`capture.register_backend`); these functions check arguments and delegate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, overload

import capture
import torch

from compiler.validation import expect

Backend: TypeAlias = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable[..., Any]]
"""`backend(gm, example_inputs) -> compiled callable` (see `compiler.compile`)."""


def list_backends() -> list[str]:
    """List the names of every registered backend.

    Returns:
        The sorted names: the built-in `eager`, backends installed through the entry-point
        group `capture.backends` (`aot_eager`, `inductor`, ...) and those added with
        `compiler.register_backend`.

    Examples:
        >>> import compiler
        >>> "eager" in compiler.list_backends()
        True

    Notes:
        Any name listed here can be passed as `compiler.compile(backend=name)`.
    """
    return list(capture.list_backends())


def lookup_backend(name: str) -> Backend:
    """Return the backend callable registered under `name`.

    Args:
        name: A registered backend name, e.g. `"eager"`.

    Returns:
        The backend: a callable `backend(gm, example_inputs) -> compiled callable`.

    Raises:
        TypeError: `name` is not a string.
        ValueError: No backend has that name; the message lists the closest names and every
            registered name.

    Examples:
        >>> import compiler
        >>> backend = compiler.lookup_backend("eager")
        >>> callable(backend)
        True
        >>> compiler.lookup_backend("eagr")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: unknown backend 'eagr'. Did you mean 'eager'...

    Notes:
        Entry-point backends are imported on first lookup.
    """
    expect("lookup_backend", "name", name, "a str", isinstance(name, str))
    backend: Backend = capture.lookup_backend(name)
    return backend


@overload
def register_backend(name: str, fn: Backend, *, override: bool = False) -> Backend: ...


@overload
def register_backend(
    name: str, fn: None = None, *, override: bool = False
) -> Callable[[Backend], Backend]: ...


def register_backend(
    name: str, fn: Backend | None = None, *, override: bool = False
) -> Backend | Callable[[Backend], Backend]:
    """Register a backend under `name`, directly or as a decorator.

    Args:
        name: The name to register; `compiler.compile(backend=name)` then uses it.
        fn: The backend, `fn(gm, example_inputs) -> compiled callable`. Omit it to use
            `register_backend(name)` as a decorator. A backend that takes an `options`
            keyword gets a compile call's backend options (`compile(..., options=...)`).
        override: Replace a backend already registered under `name` (default: an error).

    Returns:
        `fn` itself, or (when `fn` is omitted) a decorator that registers and returns its
        argument.

    Raises:
        TypeError: `name` is not a string or `fn` is not callable.
        ValueError: `name` is taken (a registered, built-in or installed backend) and
            `override` is False.

    Examples:
        >>> import compiler
        >>> @compiler.register_backend("doc_counting")
        ... def doc_counting(gm, example_inputs):
        ...     return gm.forward
        >>> "doc_counting" in compiler.list_backends()
        True
        >>> compiler.lookup_backend("doc_counting") is doc_counting
        True
        >>> compiler.register_backend("doc_counting", doc_counting)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: a backend named 'doc_counting' is already registered; pass override=True...

    Notes:
        Packages register backends without code, through the entry-point group
        `capture.backends` (`name = "module:object"`) in their `pyproject.toml`.
    """
    expect("register_backend", "name", name, "a str", isinstance(name, str))
    expect("register_backend", "override", override, "a bool", isinstance(override, bool))
    if fn is None:

        def decorate(f: Backend) -> Backend:
            expect("register_backend", "fn", f, "a callable backend", callable(f))
            capture.register_backend(name, f, override=override)
            return f

        return decorate
    expect("register_backend", "fn", fn, "a callable backend", callable(fn))
    capture.register_backend(name, fn, override=override)
    return fn
