"""Half-precision matmuls with unaligned leading dimensions computed on aligned copies
(`inductor/mm_pad.py`): the graph rewrite (which products, what they become), and compiled
results equal eager's on the Triton target (Triton's interpreter on CPU tensors, or the
GPU), for the head of a language model and the two products of its backward."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from aten_trace import trace_aten
from inductor import config
from inductor.lowering.node_meta import example_value
from inductor.mm_pad import pad_matmuls
from triton_support import DEVICE, compile_triton

aten = torch.ops.aten


def _targets(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _head(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # NOTE: GPT-2's language-model head: hidden states times the embedding, transposed
    return (x @ w.t()).view(4, 64, -1)


def _inputs(n: int, dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 128, generator=g).to(DEVICE, dtype)
    w = torch.randn(n, 128, generator=g).to(DEVICE, dtype)
    return [x, w]


def test_unaligned_half_precision_products_are_padded_and_cut_back() -> None:
    gm = trace_aten(_head, _inputs(1001, torch.bfloat16))
    padded = pad_matmuls(gm, lambda device: True)
    assert padded is not gm
    targets = _targets(padded)
    assert aten.constant_pad_nd.default in targets and aten.slice.Tensor in targets
    (mm,) = [n for n in padded.graph.nodes if n.target is aten.mm.default]
    assert example_value(mm).shape == (256, 1008)
    (clone,) = [n for n in padded.graph.nodes if n.target is aten.clone.default]
    assert example_value(clone).shape == (256, 1001) and example_value(clone).is_contiguous()


@pytest.mark.parametrize("n, dtype, wanted", [
    (1008, torch.bfloat16, True),   # aligned already
    (1001, torch.float32, True),    # not half precision
    (1001, torch.float16, False),   # the target does not want it
])
def test_other_products_are_left_alone(n: int, dtype: torch.dtype, wanted: bool) -> None:
    gm = trace_aten(_head, _inputs(n, dtype))
    assert pad_matmuls(gm, lambda device: wanted) is gm


def test_small_products_are_left_alone() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x[:8] @ w.t()

    gm = trace_aten(f, _inputs(1001, torch.float16))
    assert pad_matmuls(gm, lambda device: True) is gm


def _grad_input(g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return g @ w  # NOTE: the inner size is the vocabulary's


def _grad_weight(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return g.t() @ x  # NOTE: a transposed view of a matrix of odd width


def test_backward_products_are_aligned() -> None:
    g = torch.randn(256, 1001, dtype=torch.bfloat16, device=DEVICE)
    w = torch.randn(1001, 128, dtype=torch.bfloat16, device=DEVICE)
    x = torch.randn(256, 128, dtype=torch.bfloat16, device=DEVICE)
    grad_input = pad_matmuls(trace_aten(_grad_input, [g, w]), lambda device: True)
    (mm,) = [n for n in grad_input.graph.nodes if n.target is aten.mm.default]
    assert [tuple(example_value(a).shape) for a in mm.args] == [(256, 1008), (1008, 128)]
    grad_weight = pad_matmuls(trace_aten(_grad_weight, [g, x]), lambda device: True)
    (mm,) = [n for n in grad_weight.graph.nodes if n.target is aten.mm.default]
    assert example_value(mm.args[0]).is_contiguous()
    assert aten.constant_pad_nd.default not in _targets(grad_weight)


@pytest.mark.parametrize("fn, shapes", [(_grad_input, [(256, 1001), (1001, 128)]),
                                        (_grad_weight, [(256, 1001), (256, 128)])])
def test_backward_products_equal_eager(fn: Any, shapes: list[tuple[int, int]]) -> None:
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(s, generator=g).to(DEVICE, torch.bfloat16) for s in shapes]
    (got,) = compile_triton(fn, inputs)(*inputs)
    want = fn(*inputs)
    ref = fn(*(t.double() for t in inputs))
    assert got.shape == want.shape and got.stride() == want.stride()
    bound = (want.double() - ref).abs().max().item()
    assert (got.double() - ref).abs().max().item() <= 1.5 * bound + 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_padded_head_equals_eager(dtype: torch.dtype) -> None:
    inputs = _inputs(1001, dtype)
    compiled = compile_triton(_head, inputs)
    # NOTE: the weight padded to 1008 rows in its own layout, read transposed by the product
    assert "((1008, 128), (128, 1)" in compiled.wrapper_source
    (got,) = compiled(*inputs)
    want = _head(*inputs)
    ref = _head(*(t.double() for t in inputs))
    assert got.shape == want.shape and got.stride() == want.stride()
    # NOTE: the same products; blocking may differ, so the bound is eager's own error
    bound = (want.double() - ref).abs().max().item()
    assert (got.double() - ref).abs().max().item() <= 1.5 * bound + 1e-6


def test_pointwise_consumer_of_a_padded_product() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w.t()) * 2

    inputs = _inputs(1001, torch.bfloat16)
    with config.patch(cpu_backend="triton"):
        (got,) = compile_triton(f, inputs)(*inputs)
    torch.testing.assert_close(got, f(*inputs), atol=6e-2, rtol=2e-2)


def test_a_transposed_weight_is_padded_in_its_own_layout() -> None:
    """The head's `w.t()` is padded as `w` (rows appended, read and written in order) and
    handed to the product transposed: no transposing copy."""
    gm = trace_aten(_head, _inputs(1001, torch.bfloat16))
    padded = pad_matmuls(gm, lambda device: True)
    (pad,) = [n for n in padded.graph.nodes if n.target is aten.constant_pad_nd.default]
    assert example_value(pad.args[0]).is_contiguous() and example_value(pad).shape == (1008, 128)
    (mm,) = [n for n in padded.graph.nodes if n.target is aten.mm.default]
    assert example_value(mm.args[1]).stride() == (1, 128)
