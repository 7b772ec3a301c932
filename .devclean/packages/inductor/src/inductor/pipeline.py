"""compile_aten: the whole pipeline, one pass per line.

ATen FX graph -> lower (LoweringContext) -> dead-code removal -> fusion -> local buffers
-> C++ per fused group -> build/load (cached) -> Python wrapper -> callable.

`compile_aten(..., boxed=True)` (a backward, `aotgrad.boxed`): the wrapper takes its inputs
as one list, clears it and frees each input after its last use; its result has
`boxed_call = True`. Under CUDA graphs the recording runs the unboxed wrapper (it reads its
inputs in place): the boxed call unpacks the list, clears it and calls the runner.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from inductor import config
from inductor.bias_unfuse import unfuse_matmul_bias
from inductor.codegen.cpp import CppKernel
from inductor.codegen.wrapper import WrapperGen
from inductor.dynamic import (
    FALLBACK,
    BoxedPerSize,
    PerSize,
    guard_count,
    is_symbolic_graph,
    scalar_inputs,
    shape_env_of,
    size_prologue,
    symbols_in,
)
from inductor.ir.nodes import BufferView, ComputedBuffer, ExternKernel
from inductor.ir.verify import verify
from inductor.layout_opt import (
    channels_last_backward_inputs,
    channels_last_convolutions,
    output_strides,
)
from inductor.lowering import load_rules
from inductor.lowering.context import LoweringContext
from inductor.lowering.extern import aten_only_reason, aten_op_counts
from inductor.lowering.matmul import matmul_templates
from inductor.mm_pad import pad_matmuls
from inductor.runtime.build_errors import CompilerUnusable
from inductor.runtime.cudagraphs import cudagraph_call, runs_on_cpu, unsupported_reason
from inductor.runtime.process_caches import register_clear
from inductor.scheduler.fusion import FusedGroup, Step, assign_locals, fuse, remove_dead
from inductor.scheduler.memory import plan_memory
from inductor.symbols import SymbolicUnsupported, hints_of, size_hints
from inductor.targets import Kernel, Target, has_target, target_for

log = logging.getLogger("inductor")
output_code_log = logging.getLogger("inductor.output_code")


@dataclass
class CompiledGraph:
    """The result of compile_aten: call it like the graph module."""

    call: Callable[..., tuple[Any, ...]]
    wrapper_source: str
    kernels: list[Kernel]
    steps: list[Step]
    extern_calls: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    #: the strides of the outputs (None: a non-tensor), where a pass chose other strides
    #: than the graph's example values have (`aotgrad.saved_layout`); None: theirs.
    output_strides: list[tuple[int, ...] | None] | None = None
    #: the plan cache's key of the graph compiled (after the graph passes), if cacheable
    plan_key: str | None = None
    #: `call` takes one list of inputs and clears it (`aotgrad.boxed`)
    boxed_call: bool = False

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        return self.call(*args)

    def output_code(self) -> str:
        parts = ["# wrapper", self.wrapper_source]
        for k in self.kernels:
            parts += [f"// {k.name}" if k.source.startswith("extern") else f"# {k.name}",
                      k.source]
        return "\n".join(parts)


@dataclass
class Planned:
    """Everything up to (not including) building: what golden tests print."""

    ctx: LoweringContext
    steps: list[Step]
    kernels: dict[int, Kernel]
    targets: dict[int, Target]
    wrapper_source: str
    namespace: dict[str, Any]
    #: the wrapper is boxed: `def call(args)`, inputs freed after their last use
    boxed: bool = False


def plan(gm: torch.fx.GraphModule, example_inputs: Sequence[object],
         symbolic: bool = False, boxed: bool = False) -> Planned:
    load_rules()
    ctx = LoweringContext(gm, example_inputs)
    ctx.run()
    live = {o.buffer.name for o in ctx.outputs if isinstance(o, BufferView)}
    kernels = remove_dead(ctx.kernels, live)
    if not symbolic and config.options.max_autotune:
        kernels = matmul_templates(kernels, ctx.buffers, _wants_template, ctx.extern_calls)
    if config.options.verify_ir:
        verify(ctx, kernels)
    steps = fuse(kernels, enabled=config.options.fusion, can_fuse=_can_fuse)
    users = _users(steps)
    assign_locals(steps, users, live)
    generated: dict[int, Kernel] = {}
    targets: dict[int, Target] = {}
    for pos, step in enumerate(steps):
        if isinstance(step, FusedGroup):
            targets[pos] = target_for(step.nodes[0].layout.device)
            generated[pos] = targets[pos].generate(step, ctx.buffers)
    memory = plan_memory(steps, ctx.buffers, ctx.input_names, ctx.outputs, free_inputs=boxed)
    gen = WrapperGen(ctx.buffers, ctx.input_names, steps, generated, targets, memory,
                     ctx.outputs, ctx.constants, boxed=boxed)
    wrapper = gen.generate()
    source = wrapper.source
    head_lines = len(gen.head())
    if symbolic:
        # NOTE: sizes as arguments: bind the size symbols the wrapper and the kernels use
        # from the inputs, and check the inputs are what the code indexes.
        used = symbols_in(source.split("\n", head_lines)[-1])
        for kernel in generated.values():
            used |= set(getattr(kernel, "sizes", ()))
            if not isinstance(kernel, CppKernel):
                used |= symbols_in(kernel.source)
        scalars = scalar_inputs([ctx.env.get(n) for n in gm.graph.nodes if n.op == "placeholder"])
        prologue = size_prologue(ctx.inputs, ctx.input_names, scalars, used, boxed)
        *head, body = source.split("\n", head_lines)
        source = "\n".join([*head, *(f"    {line}" for line in prologue), body])
    return Planned(ctx, steps, generated, targets, source, wrapper.namespace, boxed)


def _wants_template(kernel: ExternKernel) -> bool:
    """Whether the target of a matmul's device generates it (`mm_template` allowing)."""
    setting = config.options.mm_template
    if setting not in ("auto", "always", "never"):
        raise ValueError(f"inductor: unknown mm_template {setting!r}; one of 'auto', "
                         "'always', 'never'")
    device = kernel.outputs[0].layout.device
    return setting != "never" and has_target(device) and target_for(device).matmul_templates


def _unfuses_bias(device: torch.device) -> bool:
    return has_target(device) and target_for(device).unfuses_matmul_bias


def _pads_matmuls(device: torch.device) -> bool:
    return has_target(device) and target_for(device).pads_matmuls


def _can_fuse(group: FusedGroup, node: ComputedBuffer, outer: tuple[int, ...]) -> bool:
    return target_for(node.layout.device).can_fuse(group, node, outer)


def load_planned(planned: Planned) -> dict[str, Any]:
    """Kernel name -> what the wrapper calls, each target loading its own kernels."""
    by_target: dict[str, tuple[Target, list[Kernel]]] = {}
    for pos, kernel in planned.kernels.items():
        target = planned.targets[pos]
        by_target.setdefault(target.name, (target, []))[1].append(kernel)
    functions: dict[str, Any] = {}
    for target, kernels in by_target.values():
        functions.update(target.load(kernels))
    return functions


def _users(steps: list[Step]) -> dict[str, set[int]]:
    users: dict[str, set[int]] = {}
    for pos, step in enumerate(steps):
        if isinstance(step, FusedGroup):
            for n in step.nodes:
                assert n.body is not None
                for b, _ in n.body.reads():
                    users.setdefault(b, set()).add(pos)
        else:
            for b in step.reads:
                users.setdefault(b, set()).add(pos)
    return users


_plans: dict[str, Planned] = {}


def clear_plan_cache() -> None:
    """Forget the compiled plans of this process (`runtime/process_caches.clear_all` too)."""
    _plans.clear()


register_clear("pipeline.plans", clear_plan_cache)


def graph_key(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> str | None:
    """A key for the in-process plan cache: the graph's code, every value's metadata, the
    constants' contents and the options that change codegen; None when not cacheable."""
    parts = [gm.code, repr(config.codegen_key())]
    for x in example_inputs:
        parts.append(_meta_text(x))
    for node in gm.graph.nodes:
        parts.append(_meta_text(node.meta.get("example_value")))
        if node.op == "get_attr":
            t = getattr(gm, str(node.target), None)
            if not isinstance(t, torch.Tensor) or t.numel() > 4096 or t.is_sparse:
                return None
            parts.append(repr(t.detach().cpu().flatten().tolist()))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _meta_text(v: object) -> str:
    if isinstance(v, torch.Tensor):
        return f"T{tuple(v.shape)}{v.stride()}{v.storage_offset()}{v.dtype}{v.device}"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_meta_text(x) for x in v) + ")"
    return repr(v) if isinstance(v, (int, float, bool, type(None))) else type(v).__name__


def compile_aten(gm: torch.fx.GraphModule, example_inputs: Sequence[object],
                 boxed: bool = False) -> CompiledGraph:
    """Compile an ATen FX graph (the ATen-graph compiler contract in INTERFACES.md).

    `boxed`: the result takes its inputs as one list, which it clears, and frees each input
    after its last use (`boxed_call` says so; a graph that runs op by op in ATen is not
    boxed).
    """
    reason = aten_only_reason(gm, example_inputs, has_target)
    if reason is not None:
        return _aten_only(gm, reason)
    if is_symbolic_graph(gm, example_inputs):
        return _compile_symbolic(gm, example_inputs, boxed)
    laid_out = channels_last_backward_inputs(channels_last_convolutions(gm))
    strides = output_strides(laid_out) if laid_out is not gm else None
    gm = pad_matmuls(unfuse_matmul_bias(laid_out, _unfuses_bias), _pads_matmuls)
    t0 = time.perf_counter()
    graph_text = graph_key(gm, example_inputs)
    plan_boxed = boxed
    if boxed and config.options.cudagraphs:
        # NOTE: the CUDA graph runner calls an unboxed wrapper; where it cannot run, the
        # boxed plan is made instead
        planned, key = _cached_plan(gm, example_inputs, graph_text, False)
        plan_boxed = unsupported_reason(planned.wrapper_source, example_inputs,
                                        runs_on_cpu(planned.steps)) is not None
    if plan_boxed or not boxed:
        planned, key = _cached_plan(gm, example_inputs, graph_text, plan_boxed)
    t1 = time.perf_counter()
    kernels = list(planned.kernels.values())
    functions = load_planned(planned)
    t2 = time.perf_counter()
    ns = dict(planned.namespace)
    ns.update(functions)
    code = compile(planned.wrapper_source, "<inductor wrapper>", "exec")
    exec(code, ns)  # noqa: S102 - the wrapper is source we generated
    call = ns["call"]
    if config.options.cudagraphs and not planned.boxed:
        call = cudagraph_call(call, gm, planned.wrapper_source, example_inputs,
                              runs_on_cpu(planned.steps))
        if boxed:
            call = _unboxing(call)
    compiled = CompiledGraph(call, planned.wrapper_source, kernels, planned.steps,
                             dict(planned.ctx.extern_calls),
                             {"plan": t1 - t0, "build": t2 - t1}, strides, key, boxed)
    if planned.ctx.extern_calls:
        log.info("extern calls: %s", dict(planned.ctx.extern_calls))
    if output_code_log.isEnabledFor(logging.DEBUG) or config.options.debug:
        output_code_log.log(logging.DEBUG if not config.options.debug else logging.WARNING,
                            "%s", compiled.output_code())
    return compiled


def _cached_plan(gm: torch.fx.GraphModule, example_inputs: Sequence[object],
                 graph_text: str | None, boxed: bool) -> tuple[Planned, str | None]:
    """The graph's plan from the plan cache (planned now if missing) and its key there:
    `graph_key`'s text, marked for a boxed wrapper."""
    key = graph_text + "/boxed" if graph_text is not None and boxed else graph_text
    cached = _plans.get(key) if key is not None else None
    if cached is not None:
        planned = cached
    else:
        planned = plan(gm, example_inputs, boxed=True) if boxed else plan(gm, example_inputs)
    if key is not None and cached is None:
        _plans[key] = planned
    return planned, key


def _unboxing(call: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """`call` (a CUDA graph runner) behind the boxed convention: the list is cleared and
    its inputs passed as arguments."""

    def boxed(args: list[Any]) -> Any:
        inputs = tuple(args)
        args.clear()
        return call(*inputs)

    return boxed


def _compile_symbolic(gm: torch.fx.GraphModule, example_inputs: Sequence[object],
                      boxed: bool = False) -> CompiledGraph:
    """A graph traced for symbolic sizes: kernels that take the sizes as arguments, one
    compiled graph for every size its guards admit; else (a lowering or a choice that
    needs concrete sizes) compiled for each call's concrete sizes (`PerSize`)."""
    per_size = (BoxedPerSize(gm, functools.partial(compile_aten, boxed=True)) if boxed
                else PerSize(gm, compile_aten))
    env = shape_env_of(example_inputs)
    before = guard_count(env)
    t0 = time.perf_counter()
    values: list[object] = list(example_inputs)
    values += [n.meta.get("example_value") for n in gm.graph.nodes]
    try:
        with size_hints(hints_of(values)):
            planned = plan(gm, example_inputs, symbolic=True, boxed=boxed)
        if guard_count(env) != before:
            raise SymbolicUnsupported("compiling specialized a symbolic size")
        t1 = time.perf_counter()
        functions = load_planned(planned)
    except CompilerUnusable:
        raise  # no strategy builds without a compiler: the user's configuration error
    except Exception as error:  # compiled per size instead, never wrong
        log.info("inductor: symbolic sizes not compiled (%s: %s); compiling for the sizes "
                 "of each call", type(error).__name__, error,
                 exc_info=log.isEnabledFor(logging.DEBUG))
        return CompiledGraph(per_size, "# compiled for the sizes of each call", [], [], {},
                             boxed_call=boxed)
    t2 = time.perf_counter()
    ns = dict(planned.namespace)
    ns.update(functions)
    ns[FALLBACK] = per_size
    exec(compile(planned.wrapper_source, "<inductor wrapper>", "exec"), ns)  # noqa: S102
    compiled = CompiledGraph(ns["call"], planned.wrapper_source,
                             list(planned.kernels.values()), planned.steps,
                             dict(planned.ctx.extern_calls), {"plan": t1 - t0, "build": t2 - t1},
                             boxed_call=boxed)
    if output_code_log.isEnabledFor(logging.DEBUG) or config.options.debug:
        output_code_log.log(logging.DEBUG if not config.options.debug else logging.WARNING,
                            "%s", compiled.output_code())
    return compiled


def _aten_only(gm: torch.fx.GraphModule, reason: str) -> CompiledGraph:
    """A graph that cannot be lowered (`aten_only_reason`) runs op by op in ATen."""
    calls = aten_op_counts(gm)
    log.info("graph runs in ATen (%s); extern calls: %s", reason, calls)

    def call(*args: Any) -> Any:
        return gm(*args)

    return CompiledGraph(call, f"# runs op by op in ATen: {reason}\n{gm.code}", [], [], calls)


def _count(kernels: list[ComputedBuffer | ExternKernel]) -> int:
    return len(kernels)
