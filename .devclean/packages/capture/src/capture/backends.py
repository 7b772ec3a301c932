"""The backend registry: entry points of group `capture.backends` plus `register_backend`.

A backend is `backend(gm, example_inputs) -> callable` (INTERFACES.md). `eager` is built in.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib import metadata
from typing import Any

import torch

Backend = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable[..., Any]]

ENTRY_POINT_GROUP = "capture.backends"

_registered: dict[str, Backend] = {}
_entry_points: dict[str, metadata.EntryPoint] | None = None


def eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Run the captured graph as is (its generated `forward`)."""
    del example_inputs
    forward: Callable[..., Any] = gm.forward
    return forward


def _discover() -> dict[str, metadata.EntryPoint]:
    global _entry_points
    if _entry_points is None:
        _entry_points = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return _entry_points


def register_backend(name: str, fn: Backend | None = None, *, override: bool = False) -> Any:
    """Register `fn` under `name` (usable as a decorator when `fn` is omitted).

    A name already taken (registered, built in, or an installed entry point) raises
    ValueError unless `override=True`.
    """
    if fn is None:

        def decorate(f: Backend) -> Backend:
            register_backend(name, f, override=override)
            return f

        return decorate
    if not override and name in list_backends():
        raise ValueError(
            f"a backend named {name!r} is already registered; pass override=True to "
            "replace it"
        )
    _registered[name] = fn
    return fn


def list_backends() -> list[str]:
    """Sorted names of every registered and entry-point backend."""
    return sorted({"eager", *_registered, *_discover()})


def lookup_backend(name: str) -> Backend:
    """The backend callable for `name`; ValueError with the closest names if unknown."""
    if name in _registered:
        return _registered[name]
    if name == "eager":
        return eager
    eps = _discover()
    if name in eps:
        fn = eps[name].load()
        _registered[name] = fn
        return fn  # type: ignore[no-any-return]  # entry points are untyped by nature
    known = list_backends()
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown backend {name!r}.{hint} Registered backends: {known}")


def backend_name(backend: Backend | str) -> str:
    """A readable name for a backend (its registry name or its qualified name)."""
    if isinstance(backend, str):
        return backend
    for registered_name, fn in _registered.items():
        if fn is backend:
            return registered_name
    if backend is eager:
        return "eager"
    name = getattr(backend, "__qualname__", None) or getattr(backend, "__name__", None)
    return name if isinstance(name, str) else repr(backend)
