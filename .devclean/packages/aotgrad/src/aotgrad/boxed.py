"""Boxed calls of a compiled backward: the callee takes its inputs as one list and clears it,
so each saved activation is freed after its last use inside the backward instead of when
the backward returns.

A compiler offering it has `compile_boxed(gm, example_inputs)`, returning a callable with
`boxed_call = True` that takes the list. The runtime (`aotgrad.runtime.TrainingRunner`)
asks for it for backward graphs, lets autograd drop its references to the saved tensors
(`ctx.maybe_clear_saved_tensors()`, a no-op under `retain_graph=True`) and keeps none of
its own. GPT-2 (SDPA, aot_eager, 1 thread): the backward ran 1.09-1.17x torch.compile's
with every saved activation alive to its end (new memory for the backward's intermediates
instead of the freed activations'); 0.96x boxed.

aot_eager's compiler (`aotgrad.backend`) offers it; its on-disk form (`BoxedCode`) keeps the
convention, so a warm process runs the backward boxed too. Inductor's compiler does too
(`InductorCompiler.compile_boxed`: its generated wrapper frees each input after its last
use, as planned in `inductor.scheduler.memory`; its disk form keeps the convention).
`aotgrad.pipeline.checked_compiler` keeps a boxed result boxed.

IR in: a backward ATen graph. IR out: a callable on a list of its inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from torch import fx

from aotgrad.serialize import GraphCode

__all__ = ["BoxedCode", "boxed_graph"]


class _Boxed:
    """Runs graph code that takes one list of inputs and clears it."""

    boxed_call = True

    def __init__(self, fn: Callable[[list[Any]], Any], gm: fx.GraphModule | None) -> None:
        self.fn = fn
        #: the boxed graph module (None for code read back from disk)
        self.gm = gm

    def __call__(self, args: list[Any]) -> Any:
        return self.fn(args)


@dataclasses.dataclass
class BoxedCode:
    """The on-disk form of a boxed graph (`aotgrad.disk`): its code in the boxed convention."""

    code: GraphCode

    @classmethod
    def of(cls, compiled: Any) -> BoxedCode | None:
        """The code of a graph `boxed_graph` made, else None."""
        if isinstance(compiled, _Boxed) and compiled.gm is not None:
            return cls(GraphCode.of(compiled.gm))
        return None

    def load(self) -> Callable[[list[Any]], Any]:
        """The boxed graph, ready to run."""
        return _Boxed(self.code.load(), None)


def boxed_graph(gm: fx.GraphModule) -> Callable[[list[Any]], Any] | None:
    """`gm`'s code in the boxed convention (a copy of its graph; `gm` is left as it is), or
    None where this torch's FX has no boxed code generator."""
    try:
        from torch.fx.graph import _BoxedCodeGen
    except ImportError:  # NOTE: a private FX class; without it backwards run unboxed
        return None
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    graph.set_codegen(_BoxedCodeGen())
    boxed = fx.GraphModule(gm, graph)
    return _Boxed(boxed, boxed)
