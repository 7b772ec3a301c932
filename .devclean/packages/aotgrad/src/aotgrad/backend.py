"""Capture backends built from ATen-graph compilers: `make_backend(...)` and `aot_eager`.

IR in: a torch-level GraphModule from capture and its example inputs (the backend contract
in INTERFACES.md). IR out: a callable returning what the GraphModule returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import fx

from aotgrad import config as _config
from aotgrad.api import AotCompiled, LiftedModule
from aotgrad.boxed import BoxedCode, boxed_graph
from aotgrad.dynamic import symbolic_signature
from aotgrad.pipeline import PartitionFnLike
from aotgrad.runtime import Compiler
from aotgrad.serialize import GraphCode

__all__ = ["aot_eager", "make_backend", "run_graph_as_is"]

Backend = Callable[[fx.GraphModule, list[Any]], Callable[..., Any]]


class BackendCallable:
    """What a backend built by `make_backend` returns for one captured graph."""

    def __init__(self, gm: fx.GraphModule, compiled: AotCompiled, lifted: LiftedModule) -> None:
        self.gm = gm
        self.compiled = compiled
        self.lifted = lifted

    @property
    def saved_bytes(self) -> Any:
        return self.compiled.saved_bytes

    def __call__(self, *args: Any) -> Any:
        if not self.lifted.names:
            return self.compiled(*args)
        return self.compiled(*self.lifted.state(), *args)


def make_backend(fw_compiler: Compiler, bw_compiler: Compiler | None = None,
                 partition_fn: PartitionFnLike | None = None,
                 decompositions: str | Mapping[Any, Callable[..., Any]] | None = None,
                 options: Mapping[str, object] | None = None,
                 ) -> Backend:
    """A capture backend `backend(gm, example_inputs) -> callable` that traces the captured
    graph to ATen, functionalizes it, and (when an input or parameter requires grad)
    builds, partitions and compiles the joint forward/backward graph.

    It compiles for the example inputs' call signature when called (so a compile error is
    raised there, where capture reports it), and for any other signature on first use.
    `options`: aotgrad option values (`aotgrad.config` names) in effect while compiling.
    """
    values = dict(options or {})
    _config.replace(values)  # checks names and types now

    def backend(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        lifted = LiftedModule(gm)
        compiled = AotCompiled(lifted, fw_compiler, bw_compiler, partition_fn, decompositions,
                               values)
        placeholders = sum(1 for node in gm.graph.nodes if node.op == "placeholder")
        if all(getattr(c, "symbolic_sizes", False) for c in (fw_compiler, bw_compiler)
               if c is not None):
            # NOTE: graphs traced once for symbolic sizes (aotgrad.dynamic); other
            # compilers get the concrete sizes of each call.
            compiled.symbolic = symbolic_signature(gm, len(lifted.state()))
        if len(example_inputs) == placeholders:
            compiled.prepare(*lifted.state(), *example_inputs)
        # NOTE: without an example for every input (a caller that has none), the graph is
        # compiled on its first call instead.
        return BackendCallable(gm, compiled, lifted)

    return backend


class _GraphAsIs:
    """The ATen-graph compiler of `aot_eager`: run the graph's Python code as it is."""

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        del example_inputs
        return gm.forward

    def compile_boxed(self, gm: fx.GraphModule,
                      example_inputs: list[Any]) -> Callable[..., Any]:
        """The graph taking its inputs as one list that it clears (`aotgrad.boxed`: the
        runtime asks so for backwards), or as `__call__` gives it where FX cannot."""
        boxed = boxed_graph(gm)
        return boxed if boxed is not None else self(gm, example_inputs)

    #: Runs graphs whose sizes are symbolic (they compute sizes from their inputs).
    symbolic_sizes = True

    def cache_key(self) -> tuple[()]:
        """No options: compiled graphs may be shared (`aotgrad.cache`)."""
        return ()

    def save_compiled(self, compiled: Callable[..., Any],
                      gm: fx.GraphModule) -> GraphCode | BoxedCode:
        """The on-disk form of a compiled graph (`aotgrad.disk`): the graph's code (in the
        boxed convention for a boxed backward)."""
        boxed = BoxedCode.of(compiled)
        return boxed if boxed is not None else GraphCode.of(gm)

    def load_compiled(self, state: GraphCode | BoxedCode) -> Callable[..., Any]:
        """The graph's code, executed: what `save_compiled` saved, ready to run."""
        return state.load()


run_graph_as_is = _GraphAsIs()


# NOTE: like torch's aot_eager, no decompositions: the ATen graphs keep the ops (and the
# numerics) that eager runs. The partitioner is the options' (`partition_fn=None`): by
# default memory_budget under `activation_memory_budget`, as for inductor.
_aot_eager_default: Backend = make_backend(run_graph_as_is, run_graph_as_is,
                                           partition_fn=None, decompositions="none")


def aot_eager(gm: fx.GraphModule, example_inputs: list[Any],
              options: Mapping[str, object] | None = None) -> Callable[..., Any]:
    """The `aot_eager` backend: ATen graphs (forward and backward) run as they are.

    `options`: aotgrad option values for this graph's compiles (`compiler.compile(...,
    options=...)` passes them), e.g. `{"activation_memory_budget": 0.5}` or
    `{"partitioner": "default"}`; options not given take the values in effect
    (`aotgrad.config.options`) when the graph compiles.
    """
    if not options:
        return _aot_eager_default(gm, example_inputs)
    backend = make_backend(run_graph_as_is, run_graph_as_is, partition_fn=None,
                           decompositions="none", options=options)
    return backend(gm, example_inputs)
