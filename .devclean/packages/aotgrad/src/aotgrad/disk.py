"""The on-disk layer of the compiled-graph cache: a compiled runner written as bytes under a
text key, read back in another process without tracing, partitioning or compiling.

aotgrad owns the format, not the storage: a package with a disk cache (inductor's
`runtime/graph_cache.py`) installs a `DiskStore` with `aotgrad.cache.set_disk_store`. The
key (`disk_key`) is the in-process key (`aotgrad.cache`: the captured graph, the call
signature with input aliasing, grad mode and train flags, compilers and their options,
partitioner, decompositions, aotgrad's options, torch's global modes) written as stable text
(`aotgrad.serialize.stable_text`), plus `serialize.environment()` (Python, torch, machine,
CPU features, the source of aotgrad and of the compilers' package) and the GPU architecture of the devices it names.

An entry holds what the runtime wrapper needs (`FunctionalGraph` without its graph, the
partition's bookkeeping, the examples of the backward's inputs as metadata, the double
backward's recipe) and each compiled graph in the form its compiler saves
(`compiler.save_compiled(compiled, gm)` / `compiler.load_compiled(state)`); a compiler
without those methods, a graph with data-dependent values, symbolic sizes or grad-mode-
dependent ops is not written. An entry that cannot be read back is a miss (discarded).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from aotgrad import cache as _cache
from aotgrad.double_backward import Recompute
from aotgrad.functionalize import FunctionalGraph
from aotgrad.gradmode import needs_grad_mode
from aotgrad.runtime import Compiler, InferenceRunner, SavedBytesCounter, TrainingRunner
from aotgrad.runtime import _is_plain as is_plain
from aotgrad.serialize import device_text, dumps, environment, loads, package_of, stable_text

__all__ = ["disk_key", "load_entry", "save_entry"]

log = logging.getLogger("aotgrad.cache")

FORMAT = "aotgrad-runner-v2"
Entry = tuple[InferenceRunner | TrainingRunner, Any, bool]

# NOTE: the attributes a TrainingRunner has after __init__; a runner with others (the class
# changed) is not written, so a restored runner never lacks one.
_TRAINING_FIELDS = frozenset({
    "forward", "num_fwd_outputs", "fw_gm", "bw_gm", "plain", "_fw", "_bw_examples",
    "_bw_compiler", "_bw_shared", "_bw", "_bw_scalar", "_scalar_mine", "_tangent_outputs",
    "_input_needs", "_force_grad_mode", "_recompute", "function", "_apply"})
_INFERENCE_FIELDS = frozenset({"forward", "compiled", "plain"})


def disk_key(shared_key: tuple[Any, ...], compilers: Sequence[Compiler]) -> str:
    """The on-disk key of an in-process key compiled by `compilers`; `Uncacheable` if a
    part has no stable text."""
    text = stable_text(shared_key)
    devices = {part.split(";")[0] for part in text.split("device:")[1:]}
    packages = {package_of(c) for c in compilers}
    env = stable_text(tuple(sorted(environment(packages).items())))
    material = "\0".join([FORMAT, text, env, device_text(devices)])
    return hashlib.sha256(material.encode()).hexdigest()


# --------------------------------------------------------------------------- saving


def _forward_state(forward: FunctionalGraph) -> dict[str, Any]:
    return {f.name: getattr(forward, f.name) for f in dataclasses.fields(forward)
            if f.name != "gm"}


def _tensor_meta(example: Any) -> tuple[Any, ...]:
    if not isinstance(example, torch.Tensor):
        raise _cache.Uncacheable("a non-tensor input of the backward")
    shape, stride = tuple(example.shape), tuple(example.stride())
    if not all(isinstance(s, int) for s in (*shape, *stride)):
        raise _cache.Uncacheable("symbolic sizes")
    return shape, stride, example.dtype, str(example.device), example.requires_grad


def _save_graph(compiler: Compiler, compiled: Any, gm: fx.GraphModule) -> Any:
    save = getattr(compiler, "save_compiled", None)
    if save is None or not callable(getattr(compiler, "load_compiled", None)):
        raise _cache.Uncacheable("a compiler without save_compiled/load_compiled")
    if needs_grad_mode(gm):
        raise _cache.Uncacheable("a graph with grad-mode dependent ops")
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) or (
                isinstance(value, torch.Tensor) and not all(
                    isinstance(s, int) for s in value.shape)):
            raise _cache.Uncacheable("symbolic or data-dependent values")
    return save(compiled, gm)


# NOTE: the bytes each restored runner was read from, by its compiled forward (which a
# rebound runner shares): a restored runner kept no graphs (`_no_graph`), so saving it again
# (a frame record, a precompiled artifact) writes the bytes it came from.
_restored: dict[int, tuple[Any, bytes]] = {}


def _compiled_forward(runner: InferenceRunner | TrainingRunner) -> Any:
    return runner.compiled if isinstance(runner, InferenceRunner) else runner._fw


def save_entry(entry: Entry, fw_compiler: Compiler, bw_compiler: Compiler) -> bytes:
    """The bytes of a compiled entry (runner, output spec, flat output flag); compiles the
    backward of a training runner first. `Uncacheable` when it cannot be written."""
    runner, out_spec, flat_output = entry
    fw = _compiled_forward(runner)
    known = _restored.get(id(fw))
    if known is not None and known[0] is fw:
        return known[1]
    if runner.forward.gm is _no_graph():
        raise _cache.Uncacheable("a restored runner whose bytes are not known")
    state: dict[str, Any] = {"format": FORMAT, "out_spec": out_spec,
                             "flat_output": flat_output,
                             "forward": _forward_state(runner.forward)}
    if isinstance(runner, InferenceRunner):
        if set(vars(runner)) != _INFERENCE_FIELDS:
            raise _cache.Uncacheable("an InferenceRunner with other fields than expected")
        state["kind"] = "inference"
        state["fw"] = _save_graph(fw_compiler, runner.compiled, runner.forward.gm)
    else:
        if set(vars(runner)) != _TRAINING_FIELDS:
            raise _cache.Uncacheable("a TrainingRunner with other fields than expected")
        bw = runner.compiled_bw()
        recompute = runner._recompute
        state.update(
            kind="training",
            fw=_save_graph(fw_compiler, runner._fw, runner.fw_gm),
            bw=_save_graph(bw_compiler, bw, runner.bw_gm),
            bw_examples=[_tensor_meta(e) for e in runner._bw_examples],
            num_fwd_outputs=runner.num_fwd_outputs,
            tangent_outputs=list(runner._tangent_outputs),
            input_needs=[sorted(needs) for needs in runner._input_needs],
            force_grad_mode=runner._force_grad_mode,
            recompute=recompute if isinstance(recompute, str) else list(recompute.sources))
    return dumps(state)


# --------------------------------------------------------------------------- loading

_placeholder: list[fx.GraphModule] = []


def _no_graph() -> fx.GraphModule:
    """The graph of a restored runner's `FunctionalGraph` (its graphs were not kept)."""
    if not _placeholder:
        graph = fx.Graph()
        graph.output(())
        _placeholder.append(fx.GraphModule(torch.nn.Module(), graph, "RestoredGraph"))
    return _placeholder[0]


def _examples(metas: Sequence[tuple[Any, ...]]) -> list[torch.Tensor]:
    """Stand-ins for the backward's example inputs: one element on the right device and of
    the right dtype, expanded to the shape (the runtime reads shape, dtype, device, numel
    and element size of them; a fake tensor mode costs more to set up)."""
    return [torch.empty((), dtype=dtype, device=device).expand(shape)
            for shape, _, dtype, device, _ in metas]


class _Fixed:
    """The backward compiler of a restored runner: its backward was compiled already."""

    def __init__(self, compiled: Callable[..., Any]) -> None:
        self.compiled = compiled

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return self.compiled


def _load_graph(compiler: Compiler, state: Any) -> Callable[..., Any]:
    load = getattr(compiler, "load_compiled", None)
    if load is None:
        raise _cache.Uncacheable("a compiler without load_compiled")
    return load(state)  # type: ignore[no-any-return]


def load_entry(data: bytes, fn: Callable[..., Any], counter: SavedBytesCounter,
               fw_compiler: Compiler, bw_compiler: Compiler) -> Entry:
    """The entry `save_entry` wrote, its runner recording saved bytes in `counter` and
    recomputing double backwards with `fn` (the flat function of the new caller)."""
    state = loads(data)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError("not an aotgrad runner entry")
    forward = FunctionalGraph(gm=_no_graph(), **state["forward"])
    runner: InferenceRunner | TrainingRunner
    if state["kind"] == "inference":
        inference = InferenceRunner.__new__(InferenceRunner)
        inference.forward = forward
        inference.compiled = _load_graph(fw_compiler, state["fw"])
        inference.plain = is_plain(forward)
        runner = inference
    else:
        training = TrainingRunner.__new__(TrainingRunner)
        bw = _load_graph(bw_compiler, state["bw"])
        training.forward = forward
        training.num_fwd_outputs = state["num_fwd_outputs"]
        training.fw_gm = training.bw_gm = _no_graph()
        training.plain = is_plain(forward)
        training._fw = _load_graph(fw_compiler, state["fw"])
        training._bw_examples = _examples(state["bw_examples"])
        training._bw_compiler = _Fixed(bw)
        training._bw_shared = {None: bw}
        training._bw = bw
        training._bw_scalar = {}  # NOTE: no graph to vary: broadcast tangents are copied
        training._scalar_mine = {}
        training._tangent_outputs = list(state["tangent_outputs"])
        training._input_needs = [frozenset(needs) for needs in state["input_needs"]]
        training._force_grad_mode = state["force_grad_mode"]
        recompute = state["recompute"]
        training._recompute = recompute if isinstance(recompute, str) else Recompute(
            fn, [tuple(s) for s in recompute])
        training._bind(counter)
        runner = training
    fw = _compiled_forward(runner)
    _restored[id(fw)] = (fw, data)
    return runner, state["out_spec"], state["flat_output"]
