"""Channels-last activations for convolution graphs on the GPU.

cuDNN's convolutions run in NHWC: given NCHW activations it transposes each input and each
output around the convolution (in GPU ResNet-50 inference a quarter of the convolutions'
time). This pass converts the activation entering each convolution to channels-last; the
convolution then returns channels-last, and the pointwise and reduction work between
convolutions follows its input's layout (the FX nodes' example values are propagated again
on fake tensors, and lowering takes buffer layouts from them), so after the first one the
conversions are no-ops and are dropped. Graph outputs keep the strides they had.

The rewrite is kept only where it pays: at most one conversion (into the first convolution,
or back for an output) per two convolutions. A training forward graph whose saved
activations are outputs would need a conversion per activation and keeps its layout.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_map

log = logging.getLogger("inductor")

aten = torch.ops.aten
_CONV = aten.convolution.default
_CL = torch.channels_last


def _val(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, fx.Node) else node


def _candidate(node: fx.Node, devices: tuple[str, ...]) -> bool:
    """A 2-D convolution on a floating-point activation on one of `devices` that is not
    channels-last."""
    x = _val(node.args[0])
    return (isinstance(x, torch.Tensor) and x.dim() == 4 and x.device.type in devices
            and x.is_floating_point() and not x.is_contiguous(memory_format=_CL))


def _repropagate(graph: fx.Graph) -> bool:
    """Recompute every call's example value on fake tensors; False if one cannot be."""
    mode = None
    for node in graph.nodes:
        v = _val(node)
        if isinstance(v, torch.Tensor) and hasattr(v, "fake_mode"):
            mode = v.fake_mode
            break
    if mode is None:
        return False
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        args = tree_map(_val, node.args)
        kwargs = tree_map(_val, dict(node.kwargs))
        try:
            with mode:
                value = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op fake tensors cannot run: keep the layout
            return False
        node.meta = {**node.meta, "example_value": value}
    return True


def channels_last_convolutions(gm: fx.GraphModule,
                               devices: tuple[str, ...] = ("cuda",)) -> fx.GraphModule:
    """`gm` with channels-last activations around its convolutions on `devices` (cuDNN's;
    the C++ target's CPU convolutions keep their layout), or `gm` itself when the rewrite
    would not pay or cannot be made (module docstring)."""
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _CONV]
    if len(convs) < 2 or not any(_candidate(n, devices) for n in convs):
        return gm
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    for old, new in env.items():
        new.meta = dict(old.meta)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is _CONV and _candidate(node, devices):
            with graph.inserting_before(node):
                cl = graph.call_function(aten.clone.default, (node.args[0],),
                                         {"memory_format": _CL})
            node.args = (cl, *node.args[1:])
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    before = [_val(o).stride() if isinstance(_val(o), torch.Tensor) else None for o in outputs]
    if not _repropagate(graph):
        return gm
    conversions = 0
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.clone.default \
                and node.kwargs.get("memory_format") is _CL:
            src = _val(node.args[0])
            if src.is_contiguous(memory_format=_CL):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
            else:
                conversions += 1
    restored: list[Any] = []
    for o, stride in zip(outputs, before):
        v = _val(o)
        if isinstance(v, torch.Tensor) and stride is not None and v.stride() != stride:
            if not _val_was_contiguous(v.shape, stride):
                return gm  # NOTE: only a contiguous output's strides are restored
            with graph.inserting_after(list(graph.nodes)[-1]):  # NOTE: no output node yet
                o = graph.call_function(aten.clone.default, (o,),
                                        {"memory_format": torch.contiguous_format})
            o.meta = {"example_value": v.clone(memory_format=torch.contiguous_format)}
            conversions += 1
        restored.append(o)
    if 2 * conversions > len(convs):
        return gm
    graph.output(type(out)(restored) if isinstance(out, (tuple, list)) else restored[0])
    graph.lint()
    log.info("inductor: channels-last activations around %d convolutions (%d conversions)",
             len(convs), conversions)
    return fx.GraphModule(gm, graph)


def _val_was_contiguous(shape: torch.Size, stride: tuple[int, ...]) -> bool:
    expected, acc = [], 1
    for size in reversed(shape):
        expected.append(acc)
        acc *= max(size, 1)
    return all(s == e or n == 1 for s, e, n in zip(stride, reversed(expected), shape))
