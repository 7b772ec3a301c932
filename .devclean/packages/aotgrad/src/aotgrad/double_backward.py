"""Backward with `create_graph=True` (double backward) through a compiled training graph.

The compiled backward is not differentiable. When autograd calls it with grad mode on
(`torch.autograd.grad(..., create_graph=True)`, a gradient penalty), the runtime instead runs
the user's program again, eagerly and under autograd, on the same inputs and differentiates
that with `create_graph=True`: the result is eager's, higher-order terms included.

That is exact only when the program's outputs are a function of its inputs alone. A program
that mutates its inputs or draws random numbers has no `Recompute`; its double backward
raises an error saying why. Inputs modified in place after the forward also raise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_flatten

from aotgrad.functionalize import FunctionalGraph

__all__ = ["Recompute", "make_recompute"]


class Recompute:
    """`self(inputs)`: the forward outputs that get tangents, recomputed eagerly with
    autograd, in the order of the runner's tangents."""

    def __init__(self, fn: Callable[..., Any], sources: Sequence[tuple[str, int]]) -> None:
        self.fn = fn
        self.sources = list(sources)

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        flat = tree_flatten(self.fn(*inputs))[0]
        return [flat[j] if kind == "user" else flat[j]._base for kind, j in self.sources]


def _random(gm: fx.GraphModule) -> bool:
    return any(isinstance(n.target, torch._ops.OpOverload)
               and torch.Tag.nondeterministic_seeded in n.target.tags
               for n in gm.graph.nodes if n.op == "call_function")


def make_recompute(fn: Callable[..., Any], forward: FunctionalGraph,
                   tangent_outputs: Sequence[int]) -> Recompute | str:
    """A `Recompute` of `fn` for the tangents at forward outputs `tangent_outputs`, or the
    reason why a double backward cannot be computed exactly."""
    if forward.mutated_inputs:
        return "mutates its inputs"
    if _random(forward.gm):
        return "draws random numbers (a second run would draw others)"
    by_index: dict[int, tuple[str, int]] = {}
    for j, spec in enumerate(forward.outputs):
        if spec.kind == "graph":
            by_index.setdefault(spec.index, ("user", j))
        elif spec.kind == "view":
            by_index.setdefault(spec.index, ("base", j))
    sources = []
    for index in tangent_outputs:
        if index not in by_index:
            return "has outputs the recomputation cannot find"
        sources.append(by_index[index])
    return Recompute(fn, sources)


def double_backward(recompute: Recompute | str, inputs: Sequence[Any], versions: Sequence[int],
                    tangent_list: Sequence[int], grads: Sequence[Any]) -> tuple[Any, ...]:
    """The input gradients, differentiable (`create_graph=True`), one per input."""
    if isinstance(recompute, str):
        raise RuntimeError(  # noqa: TRY004  # an unsupported program, not a bad argument
            "backward with create_graph=True (double backward) through a compiled graph "
            f"that {recompute} is not supported; compute this part without compiling it "
            "(compiler.disable) or use create_graph=False")
    if any(getattr(a, "_version", 0) != v for a, v in zip(inputs, versions)):
        raise RuntimeError(
            "an input of a compiled graph was modified in place after its forward; backward "
            "with create_graph=True recomputes the forward from its inputs and needs them "
            "unchanged")
    targets = [i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor) and a.requires_grad]
    with torch.enable_grad():
        outs = recompute(inputs)
        pairs = [(o, g) for o, g in zip(outs, (grads[i] for i in tangent_list))
                 if g is not None and o.requires_grad]
        computed = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in targets],
                                       [g for _, g in pairs], create_graph=True,
                                       allow_unused=True) if pairs and targets else ()
    result: list[Any] = [None] * len(inputs)
    for i, grad in zip(targets, computed):
        result[i] = grad
    return tuple(result)
