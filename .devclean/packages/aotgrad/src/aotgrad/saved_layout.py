"""Saved activations in the layout the compiler picks: the seam between a training forward's
compiler and the backward's example inputs.

A partitioned training forward returns the user-visible outputs first (new values of mutated
inputs, the program's outputs), then the values saved for the backward. Only the backward
reads the saved ones, so their layout is the compiler's choice (channels-last activations
around CPU convolutions: `inductor.layout_opt`). The contract, both ways:

- aotgrad marks the forward graph before compiling it: `saved_outputs_start(gm)` is the
  position of its first saved output (None for any other graph: every output keeps the
  strides of its example value).
- A compiler that returns a saved output with other strides than its example value says so:
  the compiled callable's `output_strides`, one entry per graph output (a stride tuple, or
  None for a non-tensor). A callable without it returns the example values' strides.
- aotgrad then compiles the backward for those strides (`restride_backward`): its saved
  inputs get them, its other values are derived again on fake tensors as eager would compute
  them from such inputs, and its outputs (the gradients) keep the strides they had.

IR in: the partitioned forward and backward graphs. IR out: the compiled forward and the
backward graph to compile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_map

__all__ = ["compile_forward", "propagate_layouts", "restore_strides", "restride_backward",
           "same_strides", "saved_outputs_start"]

log = logging.getLogger("aotgrad")

#: `GraphModule.meta` key: the position of a training forward's first saved output.
SAVED_OUTPUTS_START = "aotgrad.saved_outputs_start"

Strides = Sequence[tuple[int, ...] | None]


def saved_outputs_start(gm: fx.GraphModule) -> int | None:
    """The position of the first output of `gm` saved for the backward, whose strides a
    compiler may choose (it then reports them: module docstring); None when `gm` is not a
    training forward aotgrad compiles (every output keeps its example value's strides)."""
    start = gm.meta.get(SAVED_OUTPUTS_START)
    return start if isinstance(start, int) else None


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, fx.Node) else node


def _strides(value: Any) -> tuple[int, ...] | None:
    return tuple(value.stride()) if isinstance(value, torch.Tensor) else None


def same_strides(shape: Sequence[int], a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether two stride tuples lay out a tensor of `shape` alike (a dimension of size 1
    may have any stride)."""
    return len(a) == len(b) and all(x == y or n == 1 for x, y, n in zip(a, b, shape))


def _is_contiguous(shape: Sequence[int], stride: Sequence[int]) -> bool:
    expected: list[int] = []
    acc = 1
    for size in reversed(shape):
        expected.append(acc)
        acc *= max(size, 1)
    return same_strides(shape, stride, list(reversed(expected)))


def restore_strides(graph: fx.Graph, node: fx.Node,
                    stride: tuple[int, ...]) -> fx.Node | None:
    """A node appended to `graph` giving `node`'s value with `stride`, the strides it had
    before a layout changed: a view where the two lay it out alike (they differ in
    dimensions of size 1), a copy where `stride` is contiguous; None otherwise."""
    value = _value(node)
    aten = torch.ops.aten
    if same_strides(value.shape, value.stride(), stride):
        out = graph.call_function(aten.as_strided.default,
                                  (node, list(value.shape), list(stride),
                                   value.storage_offset()))
        out.meta = {"example_value": value.as_strided(value.shape, stride,
                                                      value.storage_offset())}
        return out
    if not _is_contiguous(value.shape, stride):
        return None
    out = graph.call_function(aten.clone.default, (node,),
                              {"memory_format": torch.contiguous_format})
    out.meta = {"example_value": value.clone(memory_format=torch.contiguous_format)}
    return out


def _fake_mode(graph: fx.Graph) -> Any:
    for node in graph.nodes:
        value = _value(node)
        if isinstance(value, torch.Tensor) and hasattr(value, "fake_mode"):
            return value.fake_mode
    return None


# NOTE: ops that read their input through explicit strides: the same strides on an input
# laid out otherwise are other elements, which fake tensors cannot tell.
_STRIDED_READS = frozenset({torch.ops.aten.as_strided.default,
                            torch.ops.aten.as_strided_scatter.default,
                            torch.ops.aten.as_strided_copy.default})


def propagate_layouts(graph: fx.Graph, values: Mapping[fx.Node, Any] | None = None) -> bool:
    """Give the nodes in `values` those example values (fake tensors of another layout), and
    compute every call's example value again on fake tensors from its inputs'; False,
    leaving some values half-updated, when an op cannot run on fake tensors or reads an
    input whose strides changed through explicit strides."""
    mode = _fake_mode(graph)
    if mode is None:
        return False
    before = {node: _strides(_value(node)) for node in graph.nodes}
    for node, value in (values or {}).items():
        node.meta = {**node.meta, "example_value": value}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in _STRIDED_READS:
            base = node.args[0]
            if not isinstance(base, fx.Node) or before.get(base) is None \
                    or _strides(_value(base)) != before[base]:
                return False
        args = tree_map(_value, node.args)
        kwargs = tree_map(_value, dict(node.kwargs))
        try:
            with mode:
                value = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op fake tensors cannot run: keep the layout
            return False
        node.meta = {**node.meta, "example_value": value}
    return True


def restride_backward(bw_gm: fx.GraphModule, saved: Strides) -> fx.GraphModule | None:
    """`bw_gm` compiled for saved inputs with strides `saved` (its first placeholders, in
    order; None: a non-tensor): a new graph whose example values follow them and whose
    outputs keep their strides (a copy where a gradient came out otherwise); `bw_gm` itself
    when nothing changes; None when it cannot be made (an op fake tensors cannot run, a read
    through explicit strides, an output whose strides cannot be restored by a copy)."""
    placeholders = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    changed = {}
    for node, stride in zip(placeholders, saved):
        value = _value(node)
        if (stride is not None and isinstance(value, torch.Tensor)
                and not same_strides(value.shape, value.stride(), stride)):
            changed[node.name] = stride
    if not changed:
        return bw_gm
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(bw_gm.graph, env)
    for old, new in env.items():
        new.meta = dict(old.meta)
    mode = _fake_mode(graph)
    if mode is None:
        return None
    inputs: dict[fx.Node, Any] = {}
    for node in graph.nodes:
        if node.op == "placeholder" and node.name in changed:
            value = _value(node)
            with mode:
                inputs[node] = torch.empty_strided(value.shape, changed[node.name],
                                                   dtype=value.dtype, device=value.device)
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    before = [_strides(_value(o)) for o in outputs]
    if not propagate_layouts(graph, inputs):
        return None
    restored: list[Any] = []
    for o, stride in zip(outputs, before):
        if isinstance(o, fx.Node) and stride is not None and _strides(_value(o)) != stride:
            o = restore_strides(graph, o, stride)
            if o is None:
                return None
        restored.append(o)
    graph.output(type(out)(restored) if isinstance(out, (tuple, list)) else restored[0])
    graph.lint()
    new_gm = fx.GraphModule(bw_gm, graph)
    new_gm.meta = dict(bw_gm.meta)
    return new_gm


def compile_forward(compiler: Callable[[fx.GraphModule, list[Any]], Callable[..., Any]],
                    fw_gm: fx.GraphModule, bw_gm: fx.GraphModule, num_fwd_outputs: int,
                    examples: list[Any]) -> tuple[Callable[..., Any], fx.GraphModule]:
    """The compiled training forward (its saved outputs' layouts left to `compiler`) and the
    backward graph to compile for what it returns (`restride_backward`). Where the backward
    cannot follow, the forward is compiled again with every output's strides fixed."""
    fw_gm.meta[SAVED_OUTPUTS_START] = num_fwd_outputs
    compiled = compiler(fw_gm, examples)
    strides = getattr(compiled, "output_strides", None)
    if strides is None:
        return compiled, bw_gm
    restrided = restride_backward(bw_gm, list(strides)[num_fwd_outputs:])
    if restrided is not None:
        if restrided is not bw_gm:
            log.debug("aotgrad: backward compiled for the saved layouts of the forward")
        return compiled, restrided
    log.info("aotgrad: the backward cannot take the forward's saved layouts; the forward "
             "is compiled again with every output's strides fixed")
    del fw_gm.meta[SAVED_OUTPUTS_START]
    compiled = compiler(fw_gm, examples)
    strides = getattr(compiled, "output_strides", None)
    if strides is not None and restride_backward(
            bw_gm, list(strides)[num_fwd_outputs:]) is not bw_gm:
        raise RuntimeError("aotgrad: the forward compiler returned saved values with other "
                           "strides than their example values though none was left to it")
    return compiled, bw_gm
