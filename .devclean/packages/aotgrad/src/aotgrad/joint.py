"""Joint forward+backward graphs: the functional forward and `torch.autograd.grad` traced
together on fake tensors, then functionalized.

Entry point for the partitioners: `build_joint(gm, example_inputs) -> JointGraph`.
IR in: a torch-level GraphModule (or any callable) and example inputs (real or fake tensors).
IR out: `JointGraph.gm` with placeholders `primals_1..n`, `tangents_1..m` returning
`(*forward_outputs, *grads)`: the first `num_fwd_outputs` values are the new values of mutated
inputs followed by the user outputs the graph computes, then one gradient per primal (None
where the primal does not require grad or gets no gradient). See INTERFACES.md.

The user program itself runs under autograd while tracing (not a replay of its ATen graph),
so `torch.no_grad()` regions, `detach()` and custom `autograd.Function`s keep their meaning.
User outputs that are views of inputs or of other outputs get no tangent: the runtime
wrapper regenerates them as views, outside the compiled graphs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten

from aotgrad.cse import eliminate_common_subexpressions
from aotgrad.decompositions import get_decompositions
from aotgrad.functionalize import FunctionalGraph, functionalize
from aotgrad.trace import (
    AtenTracer,
    new_fake_mode,
    run_with_meta,
    saved_tensor_hooks_deferred,
    trace,
)
from aotgrad.unread import drop_unread_arguments

__all__ = ["JointGraph", "build_joint", "fresh_fakes", "fresh_primals", "trace_forward",
           "trace_joint"]


@dataclasses.dataclass
class JointGraph:
    """A joint graph and what the runtime wrapper needs to run its partitions.

    Attributes:
        gm: the joint GraphModule (see the module docstring for its signature).
        num_fwd_outputs: how many leading outputs are forward outputs.
        requires_grad: per primal, whether it gets a gradient output (may still be None).
        tangent_outputs: indices (into the forward outputs) of the outputs with a tangent,
            in the order of `tangents_1..m`.
        forward: the functionalization record of the joint: mutated inputs, how each user
            output is produced (`OutputSpec`), with `gm` the joint graph itself.
        fake_mode: the fake mode of every example value in `gm`.
    """

    gm: fx.GraphModule
    num_fwd_outputs: int
    requires_grad: list[bool]
    tangent_outputs: list[int]
    forward: FunctionalGraph
    fake_mode: FakeTensorMode

    @property
    def num_primals(self) -> int:
        return len(self.requires_grad)

    @property
    def mutated_inputs(self) -> list[int]:
        return self.forward.mutated_inputs


def fresh_fakes(fake_mode: FakeTensorMode, values: Sequence[object]) -> list[object]:
    """New fake tensors with the metadata (requires_grad and leafness included) of `values`.

    NOTE: each trace gets its own fakes: the program may mutate its inputs, and
    `FakeTensorMode.from_tensor` would hand back the same (already mutated) fake.
    """
    return fresh_primals(fake_mode, values)[0]


def fresh_primals(fake_mode: FakeTensorMode, values: Sequence[object],
                  ) -> tuple[list[object], list[object]]:
    """`(args, leaves)`: fakes to hand the program, and per value the leaf that gradients
    are taken with respect to (None for values that do not require grad).

    A value that requires grad and is a leaf is handed over as its leaf: an in-place write
    to it under grad mode raises, as in eager. One that is not a leaf (an activation capture
    passes between graphs, `leaf * 1`) is handed over as a clone of its leaf: autograd then
    records an in-place write, and the gradient with respect to the leaf is the gradient
    with respect to the value as it came in, before the program mutated it.
    """
    args: list[object] = []
    leaves: list[object] = []
    with fake_mode:
        for value in values:
            if not isinstance(value, torch.Tensor):
                args.append(value)
                leaves.append(None)
                continue
            fake = torch.empty_strided(tuple(value.shape), tuple(value.stride()),
                                       dtype=value.dtype, device=value.device)
            if not value.requires_grad:
                args.append(fake)
                leaves.append(None)
                continue
            leaf = fake.requires_grad_(True)
            leaves.append(leaf)
            if value.is_leaf:
                args.append(leaf)
                continue
            # NOTE: not in the caller's grad mode: a graph that turns grad mode on itself
            # (called under no_grad) must still get a non-leaf input with a history.
            with torch.enable_grad():
                args.append(leaf.clone())
    return args, leaves


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}_{i + 1}" for i in range(count)]


def trace_forward(
    fn: Callable[..., Any],
    inputs: Sequence[object],
    fake_mode: FakeTensorMode,
    decompositions: Mapping[Any, Callable[..., Any]],
    *,
    grad_enabled: bool = False,
    entry_grad_mode: bool | None = None,
) -> tuple[FunctionalGraph, Any]:
    """Trace `fn` to ATen and functionalize it; returns (graph, pytree spec of fn's result).

    With `grad_enabled`, inputs keep their requires_grad and autograd runs (so the graph's
    `output_requires_grad` is known); the recorded graph is the forward only either way.
    `entry_grad_mode` (default: `grad_enabled`) is the grad mode the program starts in.
    """
    args = fresh_fakes(fake_mode, inputs)
    if not grad_enabled:
        args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    raw, spec = trace(fn, args, fake_mode=fake_mode, decompositions=decompositions,
                      arg_names=_names("primals", len(args)),
                      grad_enabled=grad_enabled if entry_grad_mode is None else entry_grad_mode)
    graph = functionalize(raw, fake_mode)
    graph.mutated_requires_grad = tuple(_has_history(args[i]) for i in graph.mutated_inputs)
    return graph, spec


def _has_history(value: object) -> bool:
    """A tensor whose value autograd tracks back to the inputs (not a leaf)."""
    return isinstance(value, torch.Tensor) and value.requires_grad and not value.is_leaf


def _differentiable(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def trace_joint(
    fn: Callable[..., Any],
    inputs: Sequence[object],
    forward: FunctionalGraph,
    fake_mode: FakeTensorMode,
    decompositions: Mapping[Any, Callable[..., Any]],
    *,
    entry_grad_mode: bool = True,
) -> JointGraph:
    """Trace `fn` and `torch.autograd.grad` of its outputs together, then functionalize.

    `entry_grad_mode` is the grad mode the program starts in (a captured graph may switch it:
    `torch.enable_grad()` inside a function called under `no_grad`).

    `forward` is `fn`'s functional forward traced with grad enabled: it says which user
    outputs the graph computes and which require grad (those get tangents).
    """
    primals, leaves = fresh_primals(fake_mode, inputs)
    requires_grad = [_differentiable(p) for p in primals]
    flat_examples = next(
        n.meta["example_value"] for n in forward.gm.graph.nodes if n.op == "output")
    num_mutated = len(forward.mutated_inputs)
    user_examples = list(flat_examples[num_mutated:])
    # NOTE: new values of mutated inputs that autograd tracks get tangents too: the wrapper
    # writes them into the inputs under grad mode, so gradients flow through them.
    mutated_tangent_for = [k for k, tracked in enumerate(forward.mutated_requires_grad)
                           if tracked]
    tangent_for = [j for j, spec in enumerate(forward.outputs)
                   if spec.kind == "graph" and forward.output_requires_grad[j]]
    # NOTE: an intermediate returned only through several views is a hidden graph output;
    # the views' gradients reach it through autograd, so it gets a tangent.
    hidden_for = [index for index, tracked in forward.hidden_bases if tracked]
    with fake_mode:
        tangents = []
        examples = ([flat_examples[k] for k in mutated_tangent_for]
                    + [user_examples[forward.outputs[j].index] for j in tangent_for]
                    + [user_examples[index] for index in hidden_for])
        for example in examples:
            tangents.append(torch.empty(tuple(example.shape), dtype=example.dtype,
                                        device=example.device))

    tracer = AtenTracer(fake_mode, decompositions)
    tracer.placeholders(_names("primals", len(primals)), primals)
    tracer.placeholders(_names("tangents", len(tangents)), tangents)
    with (fake_mode, tracer, torch.set_grad_enabled(entry_grad_mode),
          saved_tensor_hooks_deferred()):
        flat = tree_flatten(run_with_meta(fn, list(primals), tracer))[0]
        grads: list[object] = [None] * len(primals)
        diff_inputs = [leaf for leaf, rg in zip(leaves, requires_grad)
                       if rg and isinstance(leaf, torch.Tensor)]
        diff_outs = cast(list[torch.Tensor],
                         [primals[forward.mutated_inputs[k]] for k in mutated_tangent_for]
                         + [flat[j] for j in tangent_for]
                         + [_hidden_base(forward, flat, index) for index in hidden_for])
        if diff_inputs and diff_outs:
            tracer.start_backward()
            with torch.enable_grad():
                computed = torch.autograd.grad(diff_outs, diff_inputs, tangents,
                                               allow_unused=True)
            positions = [i for i, rg in enumerate(requires_grad) if rg]
            for position, grad in zip(positions, computed):
                grads[position] = grad
        tracer.output_flat([*flat, *grads])
    joint = functionalize(tracer.graph_module(), fake_mode, keep_tail=len(primals))
    drop_unread_arguments(joint.gm)  # NOTE: batch norm's backward reads no running stats
    eliminate_common_subexpressions(joint.gm)
    if joint.mutated_inputs != forward.mutated_inputs or [
        s.kind for s in joint.outputs] != [s.kind for s in forward.outputs]:
        raise RuntimeError("the joint trace disagrees with the forward trace on mutations or "
                           "output aliasing (the program is not deterministic under tracing)")
    joint.mutated_requires_grad = forward.mutated_requires_grad
    return JointGraph(
        gm=joint.gm,
        num_fwd_outputs=joint.num_graph_outputs,
        requires_grad=requires_grad,
        tangent_outputs=(mutated_tangent_for
                         + [num_mutated + joint.outputs[j].index for j in tangent_for]
                         + [num_mutated + index for index in hidden_for]),
        forward=joint,
        fake_mode=fake_mode,
    )


def _hidden_base(forward: FunctionalGraph, flat: Sequence[object], index: int) -> object:
    """The traced tensor behind the hidden base output `index`: the `_base` of a user output
    that is a view of it."""
    for j, spec in enumerate(forward.outputs):
        value = flat[j]
        if spec.kind == "view" and spec.index == index and isinstance(value, torch.Tensor):
            base = value._base
            if isinstance(base, torch.Tensor) and base.requires_grad:
                return base
    raise RuntimeError("cannot find the intermediate that several returned views share; "
                       "return it too, or return clones of the views")


def build_joint(
    gm: Callable[..., Any],
    example_inputs: Sequence[object],
    *,
    decompositions: str | Mapping[Any, Callable[..., Any]] | None = "core",
    fake_mode: FakeTensorMode | None = None,
) -> JointGraph:
    """Build the joint forward+backward graph of `gm` (a GraphModule or any callable).

    This is the entry point the partitioners use: `build_joint(gm, example_inputs).gm` is
    the joint graph of INTERFACES.md and `.num_fwd_outputs` its number of forward outputs.
    `example_inputs` may be real or fake tensors; their `requires_grad` decides which primals
    get gradients. `gm` may return a tensor, a tuple/list or any pytree of tensors.
    """
    mode = fake_mode or new_fake_mode()
    table = get_decompositions(decompositions)
    forward, _ = trace_forward(gm, example_inputs, mode, table, grad_enabled=True)
    return trace_joint(gm, example_inputs, forward, mode, table)
