"""The `inductor` capture backend: aotgrad traces, functionalizes and partitions; inductor
compiles the forward and backward ATen graphs (`compile_aten`).

Registered as `inductor = "inductor.backend:inductor"` in the `capture.backends` entry
points. `make_inductor(options, mode)` builds a backend with options applied while compiling;
`inductor(gm, example_inputs, options=...)` takes a compile call's options as an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch.fx
from aotgrad import config as aotgrad_config

from inductor import config
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten
from inductor.runtime import graph_cache

Backend = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def resolve_options(options: Mapping[str, Any] | None = None,
                    mode: str | None = None) -> dict[str, Any]:
    """Validate `mode` and `options` against the declared inductor and aotgrad options
    (ValueError for an unknown name, TypeError for a wrong type); options win over mode."""
    values: dict[str, Any] = {}
    if mode is not None:
        modes = config.list_mode_options()
        if mode not in modes:
            raise ValueError(f"unknown mode {mode!r}; one of {sorted(modes)}")
        values.update(modes[mode])
    values.update(options or {})
    inductor_values, aotgrad_values = _split(values)
    config.replace(inductor_values)
    aotgrad_config.replace(aotgrad_values)
    return values


def _split(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inductor options, aotgrad options); ValueError naming the closest option if unknown."""
    inductor_values: dict[str, Any] = {}
    aotgrad_values: dict[str, Any] = {}
    for name, value in values.items():
        if name in config.declared:
            inductor_values[name] = value
        elif name in aotgrad_config.declared:
            aotgrad_values[name] = value
        else:
            config.replace({name: value})  # raises, naming the closest inductor options
    return inductor_values, aotgrad_values


class InductorCompiler:
    """The ATen-graph compiler: `compile_aten` with `values` applied to the options.

    `cache_key()` (the code-generating options in effect) lets aotgrad share the compiled
    graphs of identical captured graphs (`aotgrad.cache`); equal option values compare equal.
    """

    #: Compiles graphs whose sizes are symbolic (aotgrad traces them once for every size):
    #: kernels take the sizes as arguments (`inductor.dynamic`).
    symbolic_sizes = True

    #: Fuses pointwise ops into the kernels that read them: aotgrad's partitioner may then
    #: recompute a pointwise chain in the backward instead of saving its result
    #: (`aotgrad.partition.PartitionConfig.fused_recompute`).
    fuses_pointwise = True

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)
        self._frozen = tuple(sorted(self.values.items()))

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if not self.values:
            return compile_aten(gm, example_inputs)
        with config.patch(self.values):
            return compile_aten(gm, example_inputs)

    def compile_boxed(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        """`compile_aten` boxed (`aotgrad.boxed`: the runtime asks so for backwards): the
        result takes its inputs as one list, clears it and frees each input after its last
        use; a graph that runs op by op in ATen comes back unboxed (no `boxed_call`)."""
        if not self.values:
            return compile_aten(gm, example_inputs, boxed=True)
        with config.patch(self.values):
            return compile_aten(gm, example_inputs, boxed=True)

    def cache_key(self) -> tuple[tuple[str, Any], ...]:
        """The values of the options that change generated code, as compiles see them now."""
        if not self.values:
            return config.codegen_key()
        with config.patch(self.values):
            return config.codegen_key()

    def save_compiled(self, compiled: Any, gm: torch.fx.GraphModule) -> Any:
        """The on-disk form of a graph this compiled (`runtime/graph_cache.py`)."""
        with config.patch(self.values):  # NOTE: the plan cache's key reads the options
            return graph_cache.save_compiled(compiled, gm)

    def load_compiled(self, state: Any) -> Any:
        """The compiled graph `save_compiled` described, without compiling (its kernels
        looked up under this compiler's options: compiler, flags)."""
        with config.patch(self.values):
            return graph_cache.load_compiled(state)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InductorCompiler) and other._frozen == self._frozen

    def __hash__(self) -> int:
        return hash(self._frozen)


def make_compiler(values: Mapping[str, Any]) -> Callable[..., Any]:
    """The ATen-graph compiler with `values` applied to the options while compiling."""
    return InductorCompiler(values)


def make_inductor(options: Mapping[str, Any] | None = None,
                  mode: str | None = None) -> Backend:
    """The inductor backend with `options` (inductor and aotgrad option names) and `mode`
    applied to its graphs' compiles."""
    from aotgrad import make_backend

    inductor_values, aotgrad_values = _split(resolve_options(options, mode))
    compiler = InductorCompiler(inductor_values)
    # NOTE: the partitioner and its options (activation_memory_budget, ...) are aotgrad's,
    # read when a graph compiles: the compile call's values, else those in effect.
    return make_backend(compiler, compiler, partition_fn=None,
                        decompositions=decomposition_table(), options=aotgrad_values)


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any],
             options: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The default `inductor` backend (the backend contract in INTERFACES.md).

    `options`: inductor and aotgrad option values for this graph's compiles, by name (see
    `inductor.config.list_options()` and `aotgrad.config.list_options()`);
    `compiler.compile(..., options=...)` passes them here. Options not given take the
    values in effect (`config.options`) when a graph compiles.
    """
    if any(isinstance(t, torch.Tensor) and (t.is_neg() or t.is_conj()) for t in example_inputs):
        # NOTE: an input is a lazily negated or conjugated view (`torch._neg_view(x)`,
        # `z.conj()`): its memory holds the values before the negation and generated kernels
        # read memory, so the graph runs through aot_eager (ATen applies the bit). The guard
        # checks the input's dispatch keys: this entry only ever sees such inputs.
        from aotgrad import aot_eager

        return aot_eager(gm, example_inputs)
    if not options:
        return _default()(gm, example_inputs)
    return make_inductor(options)(gm, example_inputs)


_cached: list[Backend] = []
graph_cache.install()  # NOTE: compiled graphs persist on disk (warm starts)


def _default() -> Backend:
    if not _cached:
        _cached.append(make_inductor())
    return _cached[0]
