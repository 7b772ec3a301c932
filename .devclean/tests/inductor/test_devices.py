"""Graphs with tensors on a device no target generates kernels for (meta; CUDA without
Triton) run op by op in ATen: a C++ kernel handed a GPU or meta pointer would crash the
process. CUDA graphs go to the Triton target where Triton is installed (the GPU test)."""

from __future__ import annotations

import aotgrad
import pytest
import torch
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten


def _compiled(fn: object) -> object:
    return aotgrad.aot_function(fn, compile_aten, compile_aten,
                                decompositions=decomposition_table())


def test_graph_creating_tensors_on_another_device_runs_in_aten() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, 2.0, device="meta") * 3

    out = _compiled(f)(torch.randn(5))  # type: ignore[operator]
    assert out.device.type == "meta"
    assert out.shape == (5,)


def test_graph_with_inputs_on_another_device_runs_in_aten() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum(0)

    out = _compiled(f)(torch.empty(4, 3, device="meta"))  # type: ignore[operator]
    assert out.device.type == "meta"
    assert out.shape == (3,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU box runs it)")
def test_cuda_graph_matches_eager() -> None:
    x = torch.randn(64, 32, device="cuda")

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.zeros_like(x) + x * 2, -1)

    torch.testing.assert_close(_compiled(f)(x), f(x))  # type: ignore[operator]
