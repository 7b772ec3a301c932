"""The runtime wrapper: runs compiled forward/backward graphs behind an `autograd.Function`,
copies mutated inputs back, regenerates outputs that alias inputs or other outputs.

IR in: a `FunctionalGraph` (inference) or a `JointGraph` split by a partitioner (training),
plus the ATen-graph compilers. IR out: callables taking the flat tensor inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from aotgrad.functionalize import FunctionalGraph, OutputSpec

__all__ = ["Compiler", "InferenceRunner", "SavedBytesCounter", "TrainingRunner", "example_inputs"]

Compiler = Callable[[fx.GraphModule, list[Any]], Callable[..., Any]]


@dataclasses.dataclass
class SavedBytesCounter:
    """Bytes of the tensors saved for backward: by the last call, the maximum, the total."""

    last: int = 0
    peak: int = 0
    total: int = 0
    calls: int = 0

    def record(self, tensors: Sequence[torch.Tensor]) -> None:
        size = sum(t.numel() * t.element_size() for t in tensors)
        self.last = size
        self.peak = max(self.peak, size)
        self.total += size
        self.calls += 1


def example_inputs(gm: fx.GraphModule) -> list[Any]:
    """The example values (fake tensors) of a graph's placeholders, in order."""
    return [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]


def _apply_mutations(args: Sequence[Any], mutated: Sequence[int], values: Sequence[Any]) -> None:
    for index, value in zip(mutated, values):
        target = args[index]
        if target.requires_grad and not target.is_leaf and torch.is_grad_enabled():
            target.copy_(value)
        else:
            with torch.no_grad():
                target.copy_(value)


def _replay(base: Any, spec: OutputSpec) -> Any:
    value = base
    for step in spec.chain:
        value = step.apply(value)
    return value


def user_outputs(specs: Sequence[OutputSpec], args: Sequence[Any],
                 graph_outputs: Sequence[Any]) -> list[Any]:
    """The user outputs from the graph's outputs, the inputs (views of inputs), constants."""
    results: list[Any] = []
    for spec in specs:
        if spec.kind == "graph":
            results.append(graph_outputs[spec.index])
        elif spec.kind == "input":
            results.append(_replay(args[spec.index], spec))
        elif spec.kind == "output":
            results.append(_replay(results[spec.index], spec))
        else:
            results.append(spec.value)
    return results


class InferenceRunner:
    """Runs the compiled functional forward alone (no input requires grad, or grad mode off)."""

    def __init__(self, forward: FunctionalGraph, fw_compiler: Compiler) -> None:
        self.forward = forward
        self.compiled = fw_compiler(forward.gm, example_inputs(forward.gm))

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        outs = self.compiled(*args)
        k = len(self.forward.mutated_inputs)
        _apply_mutations(args, self.forward.mutated_inputs, outs[:k])
        return user_outputs(self.forward.outputs, args, outs[k:])


class TrainingRunner:
    """Runs a partitioned joint graph through an `autograd.Function`."""

    def __init__(self, forward: FunctionalGraph, fw_gm: fx.GraphModule, bw_gm: fx.GraphModule,
                 *, num_fwd_outputs: int, tangent_outputs: Sequence[int],
                 fw_compiler: Compiler, bw_compiler: Compiler,
                 counter: SavedBytesCounter) -> None:
        self.forward = forward
        self.num_fwd_outputs = num_fwd_outputs
        self.fw_gm = fw_gm
        self.bw_gm = bw_gm
        fw = fw_compiler(fw_gm, example_inputs(fw_gm))
        bw_examples = example_inputs(bw_gm)
        bw_compiled: list[Callable[..., Any]] = []
        tangent_list = list(tangent_outputs)
        tangent_set = set(tangent_list)
        num_outputs = num_fwd_outputs
        mutated_inputs = list(forward.mutated_inputs)

        def compiled_bw() -> Callable[..., Any]:
            # NOTE: compiled lazily: inference-like training calls never run backward.
            if not bw_compiled:
                bw_compiled.append(bw_compiler(bw_gm, bw_examples))
            return bw_compiled[0]

        class CompiledFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *args: Any) -> Any:
                outs = fw(*args)
                fwd = list(outs[:num_outputs])
                saved = list(outs[num_outputs:])
                # NOTE: an input that the wrapper overwrites after this forward is saved as a
                # copy: the backward must read its value from before the mutation.
                overwritten = {id(args[i]) for i in mutated_inputs}
                tensors = [s.clone() if id(s) in overwritten else s
                           for s in saved if isinstance(s, torch.Tensor)]
                ctx.save_for_backward(*tensors)
                ctx.saved_layout = [isinstance(s, torch.Tensor) for s in saved]
                ctx.saved_other = [s for s in saved if not isinstance(s, torch.Tensor)]
                counter.record(tensors)
                no_grad = [o for i, o in enumerate(fwd)
                           if isinstance(o, torch.Tensor) and i not in tangent_set]
                if no_grad:
                    ctx.mark_non_differentiable(*no_grad)
                return tuple(fwd)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx: Any, *grads: Any) -> Any:
                tensors = iter(ctx.saved_tensors)
                others = iter(ctx.saved_other)
                saved = [next(tensors) if is_tensor else next(others)
                         for is_tensor in ctx.saved_layout]
                tangents: list[torch.Tensor] = []
                for i in tangent_list:
                    grad = grads[i]
                    if grad is None:
                        example = bw_examples[len(saved) + len(tangents)]
                        grad = torch.zeros(example.shape, dtype=example.dtype,
                                           device=example.device)
                    tangents.append(grad.contiguous())
                return tuple(compiled_bw()(*saved, *tangents))

        self.function = CompiledFunction

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        outs = self.function.apply(*args)  # type: ignore[no-untyped-call]  # torch: untyped
        k = len(self.forward.mutated_inputs)
        _apply_mutations(args, self.forward.mutated_inputs, outs[:k])
        return user_outputs(self.forward.outputs, args, outs[k:])
