"""Channels-last activations for convolution graphs: on the GPU, and in training on the CPU.

cuDNN's convolutions run in NHWC: given NCHW activations it transposes each input and each
output around the convolution (in GPU ResNet-50 inference a quarter of the convolutions'
time). This pass converts the activation entering each convolution to channels-last; the
convolution then returns channels-last, and the pointwise and reduction work between
convolutions follows its input's layout (the FX nodes' example values are propagated again
on fake tensors, and lowering takes buffer layouts from them), so after the first one the
conversions are no-ops and are dropped. Graph outputs keep the strides they had.

The rewrite is kept only where it pays: at most one conversion (into the first convolution,
or back for an output) per two convolutions.

A training forward that aotgrad compiles (`aotgrad.saved_layout`) returns the values saved
for the backward after its user-visible outputs; those keep the layout the pass gives them
(the compiled graph reports its output strides, and the backward is compiled for them), so
the backward's convolutions get channels-last activations too. (Restoring them to NCHW made
the pass decline every GPU training forward: cuDNN then transposed activations around each
convolution, forward and backward, 15% of ResNet-50's training step on an H200.) On the CPU
(oneDNN) such a forward is rewritten too: an NCHW stride-2 convolution's backward
copies its input inside (16x32x64x64: 66 ms against 35 ms channels-last), and a 3-channel
NCHW input costs the forward convolution ~5x. There the pass is kept when the bytes it
converts are at most half the bytes of the convolutions' inputs. CPU inference keeps its
layout. In such a step's backward, a convolution whose saved input is the graph's own NCHW
input (the first one) gets a channels-last gradient; oneDNN would copy the larger gradient
to NCHW, and cuDNN copies it and transposes both around the convolution, so the input is
converted instead (`channels_last_backward_inputs`).

Weights: cuDNN given a channels-last activation and an NCHW weight of a non-1x1 convolution
converts the weight inside, in the forward and again in each backward (34 copies per GPU
ResNet-50 training step, ~9.5 us each in float32). On the GPU the pass converts such a weight
itself, once, beside the activations; a training forward saves the converted weight for the
backward in place of the parameter (one more copy of the convolution weights held between
forward and backward), so the backward's convolutions take it as it is. These conversions
do not count against the activations' rule above.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from aotgrad.saved_layout import propagate_layouts, restore_strides, saved_outputs_start
from torch import fx

log = logging.getLogger("inductor")

aten = torch.ops.aten
_CONV = aten.convolution.default
_CONV_BW = aten.convolution_backward.default
_CL = torch.channels_last
# NOTE: the dtypes oneDNN convolves on the CPU (others take ATen's own loops)
_ONEDNN_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _val(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, fx.Node) else node


def _candidate(node: fx.Node, devices: tuple[str, ...]) -> bool:
    """A 2-D convolution on a floating-point activation on one of `devices` that is not
    channels-last."""
    x = _val(node.args[0])
    return (isinstance(x, torch.Tensor) and x.dim() == 4 and x.device.type in devices
            and x.is_floating_point() and not x.is_contiguous(memory_format=_CL))


def _training_forward(gm: fx.GraphModule, convs: list[fx.Node],
                      devices: tuple[str, ...]) -> int | None:
    """The position of the first saved output of a training forward whose convolutions run
    on `devices` (cuDNN's), or on the CPU with oneDNN; None for any other graph."""
    start = saved_outputs_start(gm)
    if start is None:
        return None
    values = [_val(conv.args[0]) for conv in convs]
    if values and all(isinstance(x, torch.Tensor) and x.device.type in devices
                      for x in values):
        return start
    if not _onednn():
        return None
    for conv in convs:
        x = _val(conv.args[0])
        if not isinstance(x, torch.Tensor) or x.device.type != "cpu" \
                or x.dtype not in _ONEDNN_DTYPES:
            return None
    return start


def _onednn() -> bool:
    # NOTE: torch leaves `is_available` unannotated
    available: bool = torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]
    return available and bool(torch.backends.mkldnn.enabled)


def _bytes(value: Any) -> int:
    if not isinstance(value, torch.Tensor):
        return 0
    return int(value.numel()) * value.element_size()


def _is_cl(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 4 \
        and value.is_contiguous(memory_format=_CL) and not value.is_contiguous()


class _Rewrite:
    """A copy of a graph whose activations are converted to channels-last at some uses
    (`convert`), then re-derived on fake tensors (`finish`): conversions that became no-ops
    dropped, outputs given back the strides they had, except those from `free_from` on (a
    training forward's saved values)."""

    def __init__(self, gm: fx.GraphModule) -> None:
        self.gm = gm
        self.graph = fx.Graph()
        env: dict[fx.Node, fx.Node] = {}
        self.out = self.graph.graph_copy(gm.graph, env)
        for old, new in env.items():
            new.meta = dict(old.meta)
        self.outputs = list(self.out) if isinstance(self.out, (tuple, list)) else [self.out]
        self.before = [_val(o).stride() if isinstance(_val(o), torch.Tensor) else None
                       for o in self.outputs]
        #: the example values converted (into a convolution, or back for an output)
        self.conversions: list[Any] = []
        #: the weights converted (`convert(..., weight=True)`): value -> its conversion
        self.weights: dict[fx.Node, fx.Node] = {}
        #: the example values of the weights converted
        self.weight_conversions: list[Any] = []

    def convert(self, node: fx.Node, index: int, weight: bool = False) -> None:
        """Make argument `index` of `node` channels-last (a weight: counted apart, and a
        saved output that is the weight itself is replaced by its conversion)."""
        value = node.args[index]
        key = value if weight and isinstance(value, fx.Node) else None
        cl = self.weights.get(key) if key is not None else None
        if cl is None:
            with self.graph.inserting_before(node):
                cl = self.graph.call_function(aten.clone.default, (value,),
                                              {"memory_format": _CL})
            if key is not None:
                self.weights[key] = cl
        args = list(node.args)
        args[index] = cl
        node.args = tuple(args)

    def finish(self, free_from: int | None = None) -> bool:
        """Propagate the layouts and restore the outputs; False where it cannot be done."""
        graph = self.graph
        if not propagate_layouts(graph):
            return False
        weight_clones = {clone: w for w, clone in self.weights.items()}
        for node in list(graph.nodes):
            if node.op == "call_function" and node.target is aten.clone.default \
                    and node.kwargs.get("memory_format") is _CL:
                src = _val(node.args[0])
                if src.is_contiguous(memory_format=_CL):
                    node.replace_all_uses_with(node.args[0])
                    graph.erase_node(node)
                    if node in weight_clones:
                        del self.weights[weight_clones[node]]
                elif node in weight_clones:
                    self.weight_conversions.append(src)
                else:
                    self.conversions.append(src)
        restored: list[Any] = []
        for i, (o, stride) in enumerate(zip(self.outputs, self.before)):
            free = free_from is not None and i >= free_from  # NOTE: saved for the backward
            if free and isinstance(o, fx.Node) and o in self.weights:
                o = self.weights[o]  # NOTE: the backward's convolutions take it converted
            v = _val(o)
            if isinstance(o, fx.Node) and isinstance(v, torch.Tensor) and not free \
                    and stride is not None and tuple(v.stride()) != tuple(stride):
                # NOTE: only a contiguous output's strides are restored by a copy
                o = restore_strides(graph, o, tuple(stride))
                if o is None:
                    return False
                if o.target is aten.clone.default:
                    self.conversions.append(v)
            restored.append(o)
        out = self.out
        graph.output(type(out)(restored) if isinstance(out, (tuple, list)) else restored[0])
        graph.lint()
        return True

    def module(self) -> fx.GraphModule:
        new_gm = fx.GraphModule(self.gm, self.graph)
        new_gm.meta = dict(self.gm.meta)
        return new_gm


def _converts_weight(node: fx.Node, devices: tuple[str, ...]) -> bool:
    """A convolution on `devices` whose weight is a 4-D floating-point tensor that is not
    channels-last (a 1x1 or depthwise weight already is)."""
    w = _val(node.args[1])
    return (isinstance(w, torch.Tensor) and w.dim() == 4 and w.device.type in devices
            and w.is_floating_point() and not w.is_contiguous(memory_format=_CL))


def channels_last_convolutions(gm: fx.GraphModule, devices: tuple[str, ...] = ("cuda",),
                               weight_devices: tuple[str, ...] = ("cuda",)) -> fx.GraphModule:
    """`gm` with channels-last activations around its convolutions on `devices` (cuDNN's),
    or on the CPU in a training forward, or `gm` itself when the rewrite would not pay or
    cannot be made (module docstring). The weights of the convolutions whose activation is
    converted are converted too where they lie on `weight_devices` (cuDNN's)."""
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _CONV]
    free_from = _training_forward(gm, convs, devices)
    if free_from is not None and "cpu" not in devices:
        devices = (*devices, "cpu")
    if not convs or not any(_candidate(n, devices) for n in convs):
        return gm
    if free_from is None and len(convs) < 2:
        return gm
    rewrite = _Rewrite(gm)
    for node in list(rewrite.graph.nodes):
        if node.op == "call_function" and node.target is _CONV and _candidate(node, devices):
            rewrite.convert(node, 0)
            if _converts_weight(node, weight_devices):
                rewrite.convert(node, 1, weight=True)
    if not rewrite.finish(free_from):
        return gm
    if not _pays(convs, rewrite.conversions, training=free_from is not None):
        return gm
    log.info("inductor: channels-last activations around %d convolutions (%d conversions, "
             "%d weights)", len(convs), len(rewrite.conversions),
             len(rewrite.weight_conversions))
    return rewrite.module()


def _pays(convs: list[fx.Node], conversions: list[Any], *, training: bool) -> bool:
    """GPU: at most one conversion per two convolutions. CPU training: the bytes converted
    at most half the bytes entering the convolutions (what oneDNN reorders or copies around
    each NCHW convolution, forward and backward)."""
    if not training:
        return 2 * len(conversions) <= len(convs)
    converted = sum(_bytes(v) for v in conversions)
    entering = sum(_bytes(_val(c.args[0])) for c in convs)
    return 2 * converted <= entering


def _mixed_backward(node: fx.Node, devices: tuple[str, ...]) -> bool:
    """A convolution backward whose gradient is channels-last and whose input is not.

    On `devices` (cuDNN's): always. cuDNN picks the layout from the input and the weight;
    both NCHW, it copies the channels-last gradient to NCHW and transposes both inside
    (ResNet-50's first convolution, whose saved input is the graph's NCHW image: a 176 us
    copy and two 66 us transposes per training step on an H200); the input converted costs
    one copy of the image. On the CPU (oneDNN), where the weight is not channels-last and the
    input is smaller than the gradient: oneDNN would run it NCHW and copy the gradient."""
    if node.op != "call_function" or node.target is not _CONV_BW:
        return False
    grad, x, weight = (_val(a) for a in node.args[:3])
    if not (isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point()
            and _is_cl(grad) and not _is_cl(x)):
        return False
    if x.device.type in devices:
        return True
    return (x.device.type == "cpu" and _onednn() and x.dtype in _ONEDNN_DTYPES
            and not _is_cl(weight) and _bytes(x) < _bytes(grad))


def _recomputed(node: fx.Node) -> bool:
    """A forward convolution on the CPU (oneDNN) of an NCHW activation."""
    return node.op == "call_function" and node.target is _CONV \
        and _candidate(node, ("cpu",)) and _val(node.args[0]).dtype in _ONEDNN_DTYPES


def _recomputed_channels_last(gm: fx.GraphModule) -> fx.GraphModule:
    """A backward whose convolution backwards get channels-last gradients (its forward was
    rewritten) and which recomputes forward convolutions on NCHW activations (what a memory
    budget does), or which recomputes two or more of them (budget 0.0: nothing saved, every
    convolution recomputed from the NCHW input, all of it NCHW, and oneDNN copying around
    each one: cnn step 1.25x torch.compile's -> 1.06x): the recomputed convolutions' inputs
    converted, so the recomputed activations and the work after them are channels-last as
    the forward's saved ones are.
    oneDNN copied them to the gradient's layout inside each mixed convolution backward (cnn
    budget 0.5: backward peak 50.5 -> 34.6 MB, torch.compile's 30.8; backward time 1.16x ->
    1.02x torch.compile's, tools/bench/backward_peak.py)."""
    recomputed = sum(_recomputed(n) for n in gm.graph.nodes)
    backwards = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _CONV_BW]
    if not recomputed or not backwards:
        return gm
    if not any(_is_cl(_val(n.args[0])) for n in backwards) and recomputed < 2:
        return gm
    rewrite = _Rewrite(gm)
    for node in list(rewrite.graph.nodes):
        if _recomputed(node):
            rewrite.convert(node, 0)
    if not rewrite.finish():
        return gm
    log.info("inductor: channels-last inputs for %d recomputed convolutions",
             len(rewrite.conversions))
    return rewrite.module()


def channels_last_backward_inputs(gm: fx.GraphModule,
                                  devices: tuple[str, ...] = ("cuda",)) -> fx.GraphModule:
    """`gm` with the input of each convolution backward converted to channels-last where its
    gradient is channels-last (`_mixed_backward`: on `devices`, or on the CPU under oneDNN's
    rule): the backward of a training forward that `channels_last_convolutions` rewrote,
    whose first convolution saved the graph's own NCHW input; on the CPU, recomputed
    convolutions made channels-last first (`_recomputed_channels_last`). `gm` itself when
    there is none or the rewrite cannot be made; outputs keep their strides."""
    if _onednn():
        gm = _recomputed_channels_last(gm)
    if not any(_mixed_backward(n, devices) for n in gm.graph.nodes):
        return gm
    rewrite = _Rewrite(gm)
    count = 0
    for node in list(rewrite.graph.nodes):
        if _mixed_backward(node, devices):
            rewrite.convert(node, 1)
            count += 1
    if not rewrite.finish():
        return gm
    log.info("inductor: channels-last inputs for %d convolution backwards", count)
    return rewrite.module()


def output_strides(gm: fx.GraphModule) -> list[tuple[int, ...] | None]:
    """The strides of `gm`'s outputs as its example values have them (None: a non-tensor):
    what its compiled graph returns."""
    (result,) = next(n for n in gm.graph.nodes if n.op == "output").args
    values = result if isinstance(result, (tuple, list)) else [result]
    return [tuple(v.stride()) if isinstance(v, torch.Tensor) else None
            for v in (_val(o) for o in values)]
