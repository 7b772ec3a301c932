"""The runtime wrapper: runs compiled forward/backward graphs behind an `autograd.Function`,
copies mutated inputs back, regenerates outputs that alias inputs or other outputs.

IR in: a `FunctionalGraph` (inference) or a `JointGraph` split by a partitioner (training),
plus the ATen-graph compilers. IR out: callables taking the flat tensor inputs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from aotgrad.double_backward import Recompute, double_backward
from aotgrad.functionalize import FunctionalGraph, OutputSpec
from aotgrad.gradmode import needs_grad_mode, with_grad_mode
from aotgrad.saved_layout import compile_forward
from aotgrad.scalar_tangents import expanded_scalar, scalar_tangent_backward

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

    def record_bytes(self, size: int) -> None:
        """`record` for tensors whose bytes are known: `size`."""
        self.last = size
        self.peak = max(self.peak, size)
        self.total += size
        self.calls += 1


def example_inputs(gm: fx.GraphModule) -> list[Any]:
    """The example values (fake tensors) of a graph's placeholders, in order."""
    return [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]


def _apply_mutations(args: Sequence[Any], mutated: Sequence[int], values: Sequence[Any]) -> None:
    """Write the new values of mutated inputs into the inputs.

    A new value that autograd tracks (the runner's function output has a tangent) is
    written with its history, as the program's in-place op was recorded; never into a leaf
    that requires grad: the program could only write to it with grad mode off (the trace
    raises otherwise, as eager does). An input resized by the program (an `out=` argument
    of another shape) is resized first, as the op did in eager.
    """
    for index, value in zip(mutated, values):
        target = args[index]
        if target.shape != value.shape:
            with torch.no_grad():
                target.resize_(value.shape)
        if value.requires_grad and not (target.is_leaf and target.requires_grad):
            with torch.enable_grad():
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
    """The user outputs from the graph's outputs, the inputs (views of inputs), constants;
    then the views of other user outputs (a view may come before its base)."""
    results: list[Any] = []
    views = False
    for spec in specs:
        if spec.kind == "graph":
            results.append(graph_outputs[spec.index])
        elif spec.kind == "input":
            results.append(_replay(args[spec.index], spec))
        elif spec.kind == "view":
            results.append(_replay(graph_outputs[spec.index], spec))
        elif spec.kind == "output":
            results.append(None)
            views = True
        else:
            results.append(spec.value)
    if views:
        for i, spec in enumerate(specs):
            if spec.kind == "output":
                results[i] = _replay(results[spec.index], spec)
    return results


def _is_plain(forward: FunctionalGraph) -> bool:
    """No mutated inputs, and the user outputs are exactly the graph outputs, in order: the
    wrapper can hand the compiled outputs back as they are."""
    return not forward.mutated_inputs and all(
        spec.kind == "graph" and spec.index == i for i, spec in enumerate(forward.outputs))


def _static_bytes(examples: Sequence[Any]) -> int | None:
    """The bytes of `examples` when all are tensors of static shape, else None."""
    total = 0
    for example in examples:
        if not isinstance(example, torch.Tensor):
            return None
        numel: Any = example.numel()  # an int, or a SymInt under dynamic shapes
        if not isinstance(numel, int):
            return None
        total += numel * example.element_size()
    return total


def tangents_reaching_inputs(fw_gm: fx.GraphModule,
                             tangent_outputs: Sequence[int]) -> list[frozenset[int]]:
    """Per placeholder of the compiled forward `fw_gm`: the positions (in `tangent_outputs`,
    indices of `fw_gm`'s outputs) of the tangent outputs computed from it."""
    placeholders = [n for n in fw_gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in fw_gm.graph.nodes if n.op == "output")
    values = output.args[0]
    flat = list(values) if isinstance(values, (tuple, list)) else [values]
    reach: dict[fx.Node, set[int]] = {p: set() for p in placeholders}
    for k, index in enumerate(tangent_outputs):
        start = flat[index] if index < len(flat) else None
        if not isinstance(start, fx.Node):
            continue
        seen = {start}
        stack = [start]
        while stack:
            node = stack.pop()
            if node.op == "placeholder":
                reach[node].add(k)
            for parent in node.all_input_nodes:
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
    return [frozenset(reach[p]) for p in placeholders]


def _merged_saved(layout: Sequence[bool], tensors: Sequence[Any],
                  others: Sequence[Any]) -> list[Any]:
    """The saved values in the forward's order: `layout` says which are tensors.

    NOTE: a function of its own: its iterators, which hold `tensors` until they run past
    the end (never, here), die when it returns. Kept in the backward's frame, they kept every
    saved tensor alive to the backward's end, whatever the boxed backward freed (a CNN whose
    batch norms write their running statistics takes this path).
    """
    tensor_iter = iter(tensors)
    other_iter = iter(others)
    return [next(tensor_iter) if is_tensor else next(other_iter) for is_tensor in layout]


class InferenceRunner:
    """Runs the compiled functional forward alone (no input requires grad, or grad mode off)."""

    #: positions of the graph inputs among the flat call arguments when they are not the
    #: tensors alone (symbolic int arguments are inputs too: `aotgrad.dynamic`)
    leaf_inputs: list[int] | None = None

    def __init__(self, forward: FunctionalGraph, fw_compiler: Compiler) -> None:
        self.forward = forward
        self.compiled = fw_compiler(forward.gm, example_inputs(forward.gm))
        self.plain = _is_plain(forward)

    def __call__(self, args: Sequence[Any]) -> Sequence[Any]:
        outs = self.compiled(*args)
        if self.plain:
            return outs  # type: ignore[no-any-return]  # the compiled graph's tuple/list
        k = len(self.forward.mutated_inputs)
        _apply_mutations(args, self.forward.mutated_inputs, outs[:k])
        return user_outputs(self.forward.outputs, args, outs[k:])


class TrainingRunner:
    """Runs a partitioned joint graph through an `autograd.Function`.

    NOTE: everything that does not depend on the call (which outputs are differentiable,
    whether saved values are all tensors, their bytes under static shapes) is worked out here
    once; the forward of a graph without mutated inputs and non-differentiable outputs only
    runs the compiled graph and saves its tensors. `rebind(counter)` gives a runner sharing
    the compiled graphs (the backward is compiled once, lazily, for all of them) that records
    saved bytes in another counter (the compiled-graph cache hands runners out this way).
    """

    #: as `InferenceRunner.leaf_inputs`
    leaf_inputs: list[int] | None = None

    def __init__(self, forward: FunctionalGraph, fw_gm: fx.GraphModule, bw_gm: fx.GraphModule,
                 *, num_fwd_outputs: int, tangent_outputs: Sequence[int],
                 fw_compiler: Compiler, bw_compiler: Compiler,
                 counter: SavedBytesCounter, force_grad_mode: bool = False,
                 recompute: Recompute | str = "was compiled without its program") -> None:
        self.forward = forward
        self.num_fwd_outputs = num_fwd_outputs
        self.fw_gm = fw_gm
        self.plain = _is_plain(forward)
        # NOTE: the saved values take the layout the forward's compiler gives them; the
        # backward is compiled for that layout (`aotgrad.saved_layout`).
        fw, bw_gm = compile_forward(fw_compiler, fw_gm, bw_gm, num_fwd_outputs,
                                    example_inputs(fw_gm))
        self.bw_gm = bw_gm
        self._fw = with_grad_mode(fw) if needs_grad_mode(fw_gm) else fw
        self._bw_examples = example_inputs(bw_gm)
        self._bw_compiler = bw_compiler
        # NOTE: compiled backwards by the compiler's cache key when it was compiled, shared
        # by rebound runners; `_bw` is the one this runner uses, fixed at its first backward.
        self._bw_shared: dict[Any, Callable[..., Any]] = {}
        self._bw: Callable[..., Any] | None = None
        # NOTE: backwards for tangents that are broadcast scalars (`aotgrad.scalar_tangents`),
        # by compiler cache key and tangent positions; None: the variant cannot be made.
        self._bw_scalar: dict[Any, Callable[..., Any] | None] = {}
        #: this runner's picks from `_bw_scalar`, fixed at first use (as `_bw`)
        self._scalar_mine: dict[tuple[int, ...], Callable[..., Any] | None] = {}
        self._tangent_outputs = list(tangent_outputs)
        self._input_needs = tangents_reaching_inputs(fw_gm, self._tangent_outputs)
        # NOTE: the program turns grad mode on itself (called under no_grad): the function
        # is applied with grad mode on so that its differentiable outputs get a history.
        self._force_grad_mode = force_grad_mode
        self._recompute = recompute
        self._bind(counter)

    def rebind(self, counter: SavedBytesCounter) -> TrainingRunner:
        """This runner's compiled graphs, recording saved bytes in `counter`."""
        runner = copy.copy(self)
        runner._bw = None
        runner._scalar_mine = {}
        runner._bind(counter)
        return runner

    def compiled_bw(self) -> Callable[..., Any]:
        """The compiled backward, compiled on first use (inference-like training calls never
        run backward) with the compiler's options of that moment."""
        bw = self._bw
        if bw is None:
            key = self._compiler_key()
            bw = self._bw_shared.get(key)
            if bw is None:
                bw = self._compile_bw(self.bw_gm)
                self._bw_shared[key] = bw
            self._bw = bw
        return bw

    def scalar_bw(self, tangents: tuple[int, ...]) -> Callable[..., Any] | None:
        """The backward compiled for broadcast-scalar tangents at these tangent positions
        (`aotgrad.scalar_tangents`), compiled on first use; None when it cannot be made."""
        if tangents in self._scalar_mine:  # NOTE: the hot path: no compiler key computed
            return self._scalar_mine[tangents]
        key = (self._compiler_key(), tangents)
        if key not in self._bw_scalar:
            num_saved = len(self._bw_examples) - len(self._tangent_outputs)
            gm = scalar_tangent_backward(self.bw_gm, self._bw_examples,
                                         [num_saved + k for k in tangents])
            self._bw_scalar[key] = None if gm is None else self._compile_bw(gm)
        bw = self._scalar_mine[tangents] = self._bw_scalar[key]
        return bw

    def _compiler_key(self) -> Any:
        key_fn = getattr(self._bw_compiler, "cache_key", None)
        return key_fn() if key_fn is not None else None

    def _compile_bw(self, gm: fx.GraphModule) -> Callable[..., Any]:
        examples = example_inputs(gm)
        boxed = getattr(self._bw_compiler, "compile_boxed", None)
        if boxed is not None and not needs_grad_mode(gm):
            # NOTE: saved activations freed after their last use (`aotgrad.boxed`)
            return boxed(gm, examples)  # type: ignore[no-any-return]
        bw = self._bw_compiler(gm, examples)
        return with_grad_mode(bw) if needs_grad_mode(gm) else bw

    def _bind(self, counter: SavedBytesCounter) -> None:
        fw = self._fw
        compiled_bw = self.compiled_bw
        scalar_bw = self.scalar_bw
        bw_examples = self._bw_examples
        tangent_list = self._tangent_outputs
        tangent_set = set(tangent_list)
        num_outputs = self.num_fwd_outputs
        mutated_inputs = list(self.forward.mutated_inputs)
        non_differentiable = [i for i in range(num_outputs) if i not in tangent_set]
        num_saved = len(bw_examples) - len(tangent_list)
        saved_bytes = _static_bytes(bw_examples[:num_saved])
        # NOTE: saved values are all tensors of static shape: no layout to record, and their
        # bytes are known now (the graph's shapes are fixed for this compiled signature).
        fast = not mutated_inputs and not non_differentiable and saved_bytes is not None
        tangent_examples = bw_examples[num_saved:]
        # NOTE: a dynamic graph's tangent examples have symbolic sizes: the zeros that stand
        # for an output's missing gradient take the size that output had in this call.
        sized_tangents = [i for i, e in zip(tangent_list, tangent_examples)
                          if not all(isinstance(d, int) for d in e.shape)]
        is_grad_enabled = torch.is_grad_enabled
        recompute = self._recompute
        input_needs = self._input_needs

        class CompiledFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *args: Any) -> Any:
                # NOTE: for a backward with create_graph=True (`aotgrad.double_backward`)
                ctx.inputs = args
                # NOTE: a symbolic int argument has no version (`aotgrad.dynamic`)
                ctx.versions = [getattr(a, "_version", 0) for a in args]
                # NOTE: backward sees which outputs got no gradient (None, not zeros).
                ctx.set_materialize_grads(False)
                outs = fw(*args)
                if sized_tangents:
                    ctx.tangent_sizes = {i: outs[i].shape for i in sized_tangents}
                if fast:
                    ctx.save_for_backward(*outs[num_outputs:])
                    ctx.saved_layout = None
                    counter.record_bytes(saved_bytes)  # type: ignore[arg-type]  # fast: int
                    return tuple(outs[:num_outputs])
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
                no_grad = [fwd[i] for i in non_differentiable
                           if isinstance(fwd[i], torch.Tensor)]
                if no_grad:
                    ctx.mark_non_differentiable(*no_grad)
                return tuple(fwd)

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                if is_grad_enabled():
                    # NOTE: create_graph=True: the compiled backward is not differentiable;
                    # the program runs again eagerly and is differentiated instead.
                    return double_backward(recompute, ctx.inputs, ctx.versions, tangent_list,
                                           grads)
                return run_backward(ctx, *grads)

        def run_backward(ctx: Any, *grads: Any) -> Any:
            if ctx.saved_layout is None:
                saved = ctx.saved_tensors
            else:
                saved = _merged_saved(ctx.saved_layout, ctx.saved_tensors, ctx.saved_other)
            tangents: list[torch.Tensor] = []
            missing: set[int] = set()
            scalars: list[int] = []
            for k, (example, i) in enumerate(zip(tangent_examples, tangent_list)):
                grad = grads[i]
                if grad is None:
                    missing.add(k)
                    size = ctx.tangent_sizes[i] if sized_tangents else example.shape
                    grad = torch.zeros(size, dtype=example.dtype, device=example.device)
                elif expanded_scalar(grad) and not sized_tangents:
                    scalars.append(k)
                    tangents.append(grad)
                    continue
                tangents.append(grad.contiguous())
            bw = scalar_bw(tuple(scalars)) if scalars else None
            if bw is None:
                for k in scalars:
                    tangents[k] = tangents[k].contiguous()
                bw = compiled_bw()
            if getattr(bw, "boxed_call", False):
                # NOTE: the list holds the only references left (autograd's dropped unless
                # the graph is retained): the backward frees each input after its last use
                ctx.maybe_clear_saved_tensors()
                args = [*saved, *tangents]
                del saved, tangents
                result = tuple(bw(args))
            else:
                result = tuple(bw(*saved, *tangents))
            if not missing:
                return result
            # NOTE: an input whose every differentiable path ends in outputs that got no
            # gradient gets None, as in eager (where autograd never reaches it), not zeros.
            return tuple(None if needs <= missing else grad
                         for grad, needs in zip(result, input_needs))

        self.function = CompiledFunction
        # NOTE: the public `apply` (not its C base): it handles functorch transforms and
        # default-argument binding, at ~2 us per call.
        self._apply: Callable[..., Any] = CompiledFunction.apply

    def __call__(self, args: Sequence[Any]) -> Sequence[Any]:
        if self._force_grad_mode:
            with torch.enable_grad():
                return self._run(args)
        return self._run(args)

    def _run(self, args: Sequence[Any]) -> Sequence[Any]:
        outs = self._apply(*args)
        if self.plain:
            return outs  # type: ignore[no-any-return]  # the function's tuple
        k = len(self.forward.mutated_inputs)
        _apply_mutations(args, self.forward.mutated_inputs, outs[:k])
        return user_outputs(self.forward.outputs, args, outs[k:])

