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


class InductorCompiler:
    """The ATen-graph compiler: `compile_aten` with `values` applied to the options.

    `cache_key()` (the code-generating options in effect) lets aotgrad share the compiled
    graphs of identical captured graphs (`aotgrad.cache`); equal option values compare equal.
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)
        self._frozen = tuple(sorted(self.values.items()))

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if not self.values:
            return compile_aten(gm, example_inputs)
        with config.patch(self.values):
            return compile_aten(gm, example_inputs)

    def cache_key(self) -> tuple[tuple[str, Any], ...]:
        """The values of the options that change generated code, as compiles see them now."""
        if not self.values:
            return config.codegen_key()
        with config.patch(self.values):
            return config.codegen_key()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InductorCompiler) and other._frozen == self._frozen

    def __hash__(self) -> int:
        return hash(self._frozen)


def make_compiler(values: Mapping[str, Any]) -> Callable[..., Any]:
    """The ATen-graph compiler with `values` applied to the options while compiling."""
    return InductorCompiler(values)


def make_inductor(options: Mapping[str, Any] | None = None,
                  mode: str | None = None) -> Backend:
    from aotgrad import make_backend

    values = resolve_options(options, mode)
    compiler = InductorCompiler(values)
    return make_backend(compiler, compiler, partition_fn="min_cut",
                        decompositions=decomposition_table())


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The default `inductor` backend (the backend contract in INTERFACES.md).

    Options patched while the backend is called (`config.patch`, `compiler.compile(options=
    ...)`) apply to the graph's compiles, which happen later, on its first calls.
    """
    overrides = _active_overrides()
    if not overrides:
        return _default()(gm, example_inputs)
    return make_inductor(overrides)(gm, example_inputs)


def _active_overrides() -> dict[str, Any]:
    """Options whose current value differs from the environment's (or the default)."""
    current = config.options.snapshot()
    return {name: value for name, value in current.items()
            if value != config.OPTIONS[name].from_env()}


_cached: list[Backend] = []


def _default() -> Backend:
    if not _cached:
        _cached.append(make_inductor())
    return _cached[0]
