"""The aotgrad pipeline, pass by pass, top to bottom:

    trace (ATen, fake tensors, decompositions)  -> trace.py
    functionalize (mutations, views)           -> functionalize/
    [training] joint forward+backward         -> joint.py
    [training] common subexpressions once     -> cse.py (inside joint.py)
    [training] partition into fw / bw           -> partition/
    compile (fw_compiler / bw_compiler)         -> runtime.py wraps the results
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from aotgrad import config as _config
from aotgrad.decompositions import get_decompositions
from aotgrad.double_backward import make_recompute
from aotgrad.dynamic import fake_mode_of
from aotgrad.functionalize import assert_functional
from aotgrad.joint import trace_forward, trace_joint
from aotgrad.runtime import Compiler, InferenceRunner, SavedBytesCounter, TrainingRunner
from aotgrad.trace import new_fake_mode

__all__ = ["PartitionFnLike", "compile_inference", "compile_training", "resolve_partitioner"]

PartitionFnLike = str | Callable[..., Any]
Decomps = str | Mapping[Any, Callable[..., Any]] | None


def resolve_partitioner(partition_fn: PartitionFnLike | None) -> Callable[..., Any]:
    from aotgrad.partition import get_partitioner

    if partition_fn is None:
        partition_fn = _config.options.partitioner
    if isinstance(partition_fn, str):
        return get_partitioner(partition_fn)
    return partition_fn


def _fill_output_meta(gm: torch.fx.GraphModule) -> None:
    """Give the output node its `example_value` (the tuple of its values) if it lacks one."""
    for node in gm.graph.nodes:
        if node.op == "output" and "example_value" not in node.meta:
            node.meta["example_value"] = tuple(
                a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a
                for a in node.args[0])


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _has_unbacked_values(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph computes data-dependent numbers or sizes (unbacked symbols)."""
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, _SYMBOLIC):
            return True
        if isinstance(value, torch.Tensor) and any(
                isinstance(s, torch.SymInt) for s in value.shape):
            return True
    return False


def _checked_outputs(outs: Any) -> Any:
    for out in outs if isinstance(outs, (tuple, list)) else (outs,):
        if isinstance(out, _SYMBOLIC):
            raise RuntimeError(  # noqa: TRY004  # a backend limit, not a bad argument
                f"the backend's compiled graph returned the symbolic value {out} "
                "instead of computing it; it does not support data-dependent values")
    return outs


def _checked(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """`compiled`, raising where it returns a symbolic placeholder; boxed (`aotgrad.boxed`)
    where `compiled` is."""
    checked: Any
    if getattr(compiled, "boxed_call", False):

        def run_boxed(args: list[Any]) -> Any:
            return _checked_outputs(compiled(args))

        checked = run_boxed
        checked.boxed_call = True
    else:

        def run(*args: Any) -> Any:
            return _checked_outputs(compiled(*args))

        checked = run
    # NOTE: the strides the compiled graph reports (`aotgrad.saved_layout`) stay visible
    checked.output_strides = getattr(compiled, "output_strides", None)
    return checked  # type: ignore[no-any-return]  # a function


def checked_compiler(compiler: Compiler) -> Compiler:
    """`compiler`, but a compiled graph with data-dependent values whose run returns a
    symbolic placeholder (a SymInt/SymFloat of the trace) instead of a number raises: a
    backend that does not compute such values must fail, never return the placeholder."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled = compiler(gm, example_inputs)
        return _checked(compiled) if _has_unbacked_values(gm) else compiled

    checked_graph: Any = compile_graph
    key_fn = getattr(compiler, "cache_key", None)
    if key_fn is not None:
        # NOTE: the compiler's options now, which key the compiled backwards runners share
        # (`TrainingRunner.compiled_bw`: compiled again under other options)
        checked_graph.cache_key = key_fn
    boxed = getattr(compiler, "compile_boxed", None)
    if boxed is None:
        return checked_graph  # type: ignore[no-any-return]  # the function `compile_graph`

    def compile_boxed(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled = boxed(gm, example_inputs)
        return _checked(compiled) if _has_unbacked_values(gm) else compiled

    checked_graph.compile_boxed = compile_boxed  # NOTE: `aotgrad.boxed`
    return checked_graph  # type: ignore[no-any-return]  # the function `compile_graph`


def _estimates_only(mode: Any) -> contextlib.AbstractContextManager[Any]:
    """Partitioning reads symbolic sizes for cost estimates only (which values to save):
    their example values decide, and no guard is recorded (any choice is correct)."""
    shape_env = getattr(mode, "shape_env", None)
    if shape_env is None:
        return contextlib.nullcontext()
    suppress: contextlib.AbstractContextManager[Any] = shape_env.suppress_guards()
    return suppress


def compile_inference(fn: Callable[..., Any], tensors: Sequence[torch.Tensor],
                      fw_compiler: Compiler, decompositions: Decomps,
                      ) -> tuple[InferenceRunner, Any]:
    mode = fake_mode_of(tensors) or new_fake_mode()
    table = get_decompositions(decompositions)
    forward, out_spec = trace_forward(fn, tensors, mode, table)
    assert_functional(forward.gm)
    return InferenceRunner(forward, checked_compiler(fw_compiler)), out_spec


def compile_training(fn: Callable[..., Any], tensors: Sequence[torch.Tensor],
                     fw_compiler: Compiler, bw_compiler: Compiler,
                     partition_fn: PartitionFnLike | None, decompositions: Decomps,
                     counter: SavedBytesCounter, *, entry_grad_mode: bool = True,
                     ) -> tuple[TrainingRunner, Any]:
    """Trace, functionalize, build the joint graph, partition and compile a training call.

    `entry_grad_mode`: the grad mode the program starts in (off for a captured graph that
    enables grad inside a function called under `no_grad`).
    """
    mode = fake_mode_of(tensors) or new_fake_mode()
    table = get_decompositions(decompositions)
    forward, out_spec = trace_forward(fn, tensors, mode, table, grad_enabled=True,
                                      entry_grad_mode=entry_grad_mode)
    joint = trace_joint(fn, tensors, forward, mode, table, entry_grad_mode=entry_grad_mode)
    assert_functional(joint.gm)
    partition = resolve_partitioner(partition_fn)
    # NOTE: a compiler that fuses pointwise ops (inductor) recomputes them almost for free
    config = dataclasses.replace(_config.options.partition_config(),
                                 fused_recompute=bool(getattr(bw_compiler, "fuses_pointwise",
                                                              False)))
    with _estimates_only(mode):
        fw_gm, bw_gm = partition(joint.gm, num_fwd_outputs=joint.num_fwd_outputs,
                                 config=config)
    _fill_output_meta(fw_gm)
    _fill_output_meta(bw_gm)
    runner = TrainingRunner(joint.forward, fw_gm, bw_gm, num_fwd_outputs=joint.num_fwd_outputs,
                            tangent_outputs=joint.tangent_outputs,
                            fw_compiler=checked_compiler(fw_compiler),
                            bw_compiler=checked_compiler(bw_compiler), counter=counter,
                            force_grad_mode=not entry_grad_mode,
                            recompute=make_recompute(fn, forward, joint.tangent_outputs))
    return runner, out_spec
