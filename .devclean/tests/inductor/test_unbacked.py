"""Graphs inductor does not lower run op by op in ATen: data-dependent sizes and values
(unbacked symbols from `nonzero`, `unique`, `item`) -- never refused, never wrong."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aotgrad
import torch
from inductor import CompiledGraph
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten


def _compile(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[CompiledGraph]]:
    graphs: list[CompiledGraph] = []

    def compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> CompiledGraph:
        compiled = compile_aten(gm, example_inputs)
        graphs.append(compiled)
        return compiled

    return aotgrad.aot_function(fn, compiler, compiler,
                                decompositions=decomposition_table()), graphs


def test_nonzero_and_masked_select_training() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nonzero(x > 0), torch.masked_select(x * 2.0, x > 0.5)

    x = torch.randn(6, 5, requires_grad=True)
    compiled, graphs = _compile(fn)
    got = compiled(x)
    expected = fn(x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    (gx,) = torch.autograd.grad(got[1].sum(), [x])
    (ex,) = torch.autograd.grad(expected[1].sum(), [x])
    torch.testing.assert_close(gx, ex)
    assert graphs and all(not g.kernels for g in graphs[:1])
    assert graphs[0].extern_calls.get("aten.nonzero.default") == 1
    assert "runs op by op in ATen" in graphs[0].output_code()


def test_item_and_unique() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, float]:
        return torch.unique(x.round()), (x.sum() * 3).item()

    x = torch.randn(40)
    compiled, _ = _compile(fn)
    got = compiled(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert isinstance(got[1], float) and abs(got[1] - expected[1]) < 1e-4


def test_static_graph_still_lowered() -> None:
    compiled, graphs = _compile(lambda x: (torch.relu(x) * 2,))
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x)[0], torch.relu(x) * 2)
    assert graphs[0].kernels
