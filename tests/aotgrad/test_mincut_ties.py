"""min_cut's ties between a value the forward computes in any case (a matmul's output) and a
cheap value of the same bytes computed from it: for a fusing compiler the matmul output is
saved and the cheap value recomputed inside the backward's kernel (the forward's fused
kernel then stores no extra output); without fusion a cheap value is saved, as a
recomputed op would be one more pass over memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aotgrad
import torch
from torch import fx


class _Recorder:
    def __init__(self, fuses_pointwise: bool) -> None:
        self.graphs: list[fx.GraphModule] = []
        self.fuses_pointwise = fuses_pointwise

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        del example_inputs
        self.graphs.append(gm)
        return gm.forward


def _step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.sin((x @ w) * 2 + 1).sum()


def _saved_targets(fuses_pointwise: bool) -> list[str]:
    record = _Recorder(fuses_pointwise)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=gen)
    w = torch.randn(16, 4, generator=gen).requires_grad_()
    with aotgrad.config.patch(graph_cache=False):
        compiled = aotgrad.aot_function(_step, record, record, partition_fn="min_cut",
                                        decompositions="none")
        compiled(x, w).backward()
    grad = w.grad
    w.grad = None
    _step(x, w).backward()
    torch.testing.assert_close(grad, w.grad)
    fw = record.graphs[0]
    out = next(n for n in fw.graph.nodes if n.op == "output")
    saved = out.args[0][1:]  # NOTE: after the loss: the values saved for the backward
    return [str(n.target) for n in saved if isinstance(n, fx.Node) and n.op != "placeholder"]


def test_a_fusing_compiler_saves_the_matmul_output() -> None:
    assert _saved_targets(True) == ["aten.mm.default"]


def test_without_fusion_a_cheap_value_is_saved() -> None:
    # NOTE: the cheap value nearest the backward (sin's derivative, cos of the argument)
    saved = _saved_targets(False)
    assert len(saved) == 1 and saved != ["aten.mm.default"], saved
