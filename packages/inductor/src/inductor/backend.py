"""The `inductor` capture backend: aotgrad traces, functionalizes and partitions; inductor
compiles the forward and backward ATen graphs (`compile_aten`).

Registered as `inductor = "inductor.backend:inductor"` in the `capture.backends` entry
points. `make_inductor(options, mode)` builds a backend with options applied while compiling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch.fx

from inductor import config
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten

Backend = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def resolve_options(options: Mapping[str, Any] | None = None,
                    mode: str | None = None) -> dict[str, Any]:
    """Validate `mode` and `options` against the declared options; options win over mode."""
    values: dict[str, Any] = {}
    if mode is not None:
        modes = config.list_mode_options()
        if mode not in modes:
            raise ValueError(f"unknown mode {mode!r}; one of {sorted(modes)}")
        values.update(modes[mode])
    for name, value in (options or {}).items():
        if name not in config.OPTIONS:
            raise KeyError(f"unknown inductor option {name!r}; see list_options()")
        values[name] = value
    with config.patch(values):
        pass  # NOTE: validates the types now rather than at the first compile
    return values


def make_compiler(values: Mapping[str, Any]) -> Callable[..., Any]:
    def compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        with config.patch(values):
            return compile_aten(gm, example_inputs)

    return compiler


def make_inductor(options: Mapping[str, Any] | None = None,
                  mode: str | None = None) -> Backend:
    from aotgrad import make_backend

    values = resolve_options(options, mode)
    compiler = make_compiler(values) if values else compile_aten
    return make_backend(compiler, compiler, partition_fn="min_cut",
                        decompositions=decomposition_table())


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The default `inductor` backend (the backend contract in INTERFACES.md)."""
    return _default()(gm, example_inputs)


_cached: list[Backend] = []


def _default() -> Backend:
    if not _cached:
        _cached.append(make_inductor())
    return _cached[0]
