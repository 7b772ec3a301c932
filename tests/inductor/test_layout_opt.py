"""The channels-last pass (`inductor.layout_opt`) on ATen graphs from aotgrad: the rewritten
graph computes what the original computes, its activations between convolutions are
channels-last, its outputs keep their strides, and it declines where conversions would not
pay. Run on the CPU by naming the CPU among the pass's devices (on the GPU it is cuDNN's)."""

from __future__ import annotations

from typing import Any

import aotgrad
import torch
import torch.nn.functional as F
from inductor.decompositions import decomposition_table
from inductor.layout_opt import channels_last_convolutions
from torch import fx


def _graph(fn: Any, *args: torch.Tensor) -> fx.GraphModule:
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm

    with torch.no_grad():
        aotgrad.aot_function(fn, keep, decompositions=decomposition_table())(*args)
    return graphs[0]


def _net(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor,
         s: torch.Tensor) -> torch.Tensor:
    y = F.relu(F.conv2d(x, w1, padding=1) * s.view(1, -1, 1, 1))
    z = F.relu(F.conv2d(y, w2, padding=1) + y)
    z = F.conv2d(z, w3, padding=1)
    return z.mean((2, 3))


def _args() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return (torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3),
            torch.randn(8, 8, 3, 3), torch.randn(8))


def test_rewrite_matches_original_and_is_channels_last() -> None:
    args = _args()
    gm = _graph(_net, *args)
    new = channels_last_convolutions(gm, devices=("cpu",))
    assert new is not gm
    convs = [n for n in new.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert len(convs) == 3
    for conv in convs:
        assert conv.meta["example_value"].is_contiguous(memory_format=torch.channels_last)
    clones = [n for n in new.graph.nodes if n.target is torch.ops.aten.clone.default]
    assert len(clones) == 1  # into the first convolution only
    want, got = gm(*args), new(*args)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_outputs_keep_their_strides() -> None:
    def two(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor,
            s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu(F.conv2d(x, w1, padding=1))
        z = F.conv2d(F.conv2d(F.conv2d(y, w2, padding=1), w3, padding=1), w3, padding=1)
        return z, z.sum()  # 4 convolutions, 2 conversions (in, and z back)

    args = _args()
    gm = _graph(two, *args)
    new = channels_last_convolutions(gm, devices=("cpu",))
    assert new is not gm
    got, want = new(*args), gm(*args)
    assert got[0].stride() == want[0].stride()
    assert got[0].is_contiguous()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_declines_off_its_devices_and_when_conversions_do_not_pay() -> None:
    args = _args()
    gm = _graph(_net, *args)
    assert channels_last_convolutions(gm) is gm  # CPU tensors, CUDA-only by default

    def many_outputs(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                     w3: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = F.conv2d(x, w1, padding=1)
        b = F.conv2d(a, w2, padding=1)
        return a, b, F.conv2d(b, w3, padding=1)

    gm2 = _graph(many_outputs, *args)
    assert channels_last_convolutions(gm2, devices=("cpu",)) is gm2
