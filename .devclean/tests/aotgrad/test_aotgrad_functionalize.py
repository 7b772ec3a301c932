"""Functionalization: every pattern is checked by `check_functionalized` (no mutable node,
results and final input state equal eager, output aliasing as in eager)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from _aotgrad_checks import check_functionalized

aten = torch.ops.aten


def setitem_column(x: torch.Tensor, y: torch.Tensor) -> Any:
    x[:, 0] = y
    return x * 2


def transpose_add_(x: torch.Tensor) -> Any:
    x.transpose(0, 1).add_(1)
    return x.sum()


def flat_view_setitem(x: torch.Tensor) -> Any:
    x.view(-1)[3] = 0
    return x + 1


def other_views_regenerated(x: torch.Tensor) -> Any:
    row = x[0]
    col = x[:, 1]
    diag = x.diagonal()
    row.mul_(2)
    return col + 0, diag * 1, row.clone()


def split_chunk_mul_(x: torch.Tensor) -> Any:
    a, b = x.split(2)
    a.mul_(2)
    return x + 1, b.clone()


def unbind_add_(x: torch.Tensor) -> Any:
    first, second = x.unbind(1)
    second.add_(10)
    return x.clone(), first + 1


def out_variant(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> Any:
    torch.add(a, b, out=c)
    return c * 2


def copy_into_input(x: torch.Tensor, y: torch.Tensor) -> Any:
    x.copy_(y.sin())
    return (x + 1,)


def view_outputs(x: torch.Tensor) -> Any:
    return x.view(-1), x, x.t()


def output_views_of_outputs(x: torch.Tensor) -> Any:
    y = x * 2
    return y, y.t(), y[1]


def diagonal_fill_(x: torch.Tensor) -> Any:
    x.diagonal().fill_(0)
    return x.exp()


def intermediate_slice_zero_(x: torch.Tensor) -> Any:
    y = x.clone()
    y[1:3].zero_()
    return y


def several_mutations(x: torch.Tensor, y: torch.Tensor) -> Any:
    x.add_(1)
    y.mul_(x)
    x.sub_(y[0])
    return x.sum() + y.sum()


def mutated_not_returned(x: torch.Tensor) -> Any:
    x.mul_(3)
    return (x.new_ones(2),)


def index_put_(x: torch.Tensor) -> Any:
    index = torch.tensor([0, 2])
    x[index] = 5.0
    return x.mean()


def as_strided_add_(x: torch.Tensor) -> Any:
    x.as_strided((2, 2), (1, 2)).add_(1)
    return x * 1


def unsqueeze_mul_(x: torch.Tensor) -> Any:
    x.unsqueeze(0).mul_(3)
    return x + 0


def permute_add_(x: torch.Tensor) -> Any:
    x.permute(1, 0, 2).add_(1)
    return x.sum(0)


def nested_views(x: torch.Tensor) -> Any:
    x[1][2:4].add_(5)
    return x.clone()


def view_then_read_after_base_write(x: torch.Tensor) -> Any:
    v = x.view(2, 6)
    x.add_(1)
    return v * 1


def batch_norm_training(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> Any:
    return torch.nn.functional.batch_norm(x, mean, var, training=True)


def inplace_relu_on_output(x: torch.Tensor) -> Any:
    y = x @ x.t()
    torch.relu_(y)
    return y


def return_mutated_input(x: torch.Tensor) -> Any:
    x.mul_(2)
    return x


def return_view_of_mutated_input(x: torch.Tensor) -> Any:
    x.add_(1)
    return x[0]


def inplace_view_ops(x: torch.Tensor) -> Any:
    y = x.clone()
    y.squeeze_(0)
    y.t_()
    y.mul_(2)
    return y, x + 0


def inplace_view_of_a_view(x: torch.Tensor) -> Any:
    row = x[1]
    row.unsqueeze_(0)
    row.add_(3)
    return row.sum(), x.clone()


def write_into_copying_reshape(x: torch.Tensor) -> Any:
    flat = torch.ops.aten.reshape.default(x.t(), [-1])  # a copy: x.t() is not viewable
    flat.add_(1)
    same = torch.ops.aten.reshape.default(x, [-1])  # a view
    same.mul_(2)
    return flat, x + 0


CASES: list[tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = [
    (setitem_column, lambda: (torch.randn(3, 4), torch.randn(3))),
    (transpose_add_, lambda: (torch.randn(3, 4),)),
    (flat_view_setitem, lambda: (torch.randn(3, 4),)),
    (other_views_regenerated, lambda: (torch.randn(4, 4),)),
    (split_chunk_mul_, lambda: (torch.randn(4, 3),)),
    (unbind_add_, lambda: (torch.randn(3, 2),)),
    (out_variant, lambda: (torch.randn(3), torch.randn(3), torch.empty(3))),
    (copy_into_input, lambda: (torch.randn(2, 3), torch.randn(2, 3))),
    (view_outputs, lambda: (torch.randn(2, 3),)),
    (output_views_of_outputs, lambda: (torch.randn(2, 3),)),
    (diagonal_fill_, lambda: (torch.randn(3, 3),)),
    (intermediate_slice_zero_, lambda: (torch.randn(4, 2),)),
    (several_mutations, lambda: (torch.randn(3), torch.randn(2, 3))),
    (mutated_not_returned, lambda: (torch.randn(3),)),
    (index_put_, lambda: (torch.randn(4, 2),)),
    (as_strided_add_, lambda: (torch.randn(4),)),
    (unsqueeze_mul_, lambda: (torch.randn(3),)),
    (permute_add_, lambda: (torch.randn(2, 3, 4),)),
    (nested_views, lambda: (torch.randn(3, 5),)),
    (view_then_read_after_base_write, lambda: (torch.randn(3, 4),)),
    (batch_norm_training, lambda: (torch.randn(4, 3), torch.zeros(3), torch.ones(3))),
    (inplace_relu_on_output, lambda: (torch.randn(3, 3),)),
    (return_mutated_input, lambda: (torch.randn(3),)),
    (return_view_of_mutated_input, lambda: (torch.randn(2, 3),)),
    (inplace_view_ops, lambda: (torch.randn(1, 3, 2),)),
    (inplace_view_of_a_view, lambda: (torch.randn(3, 4),)),
    (write_into_copying_reshape, lambda: (torch.randn(3, 4),)),
]


@pytest.mark.parametrize("decompositions", ["none", "core"])
@pytest.mark.parametrize("fn, make_args", CASES, ids=[c[0].__name__ for c in CASES])
def test_functionalized_matches_eager(fn: Callable[..., Any],
                                      make_args: Callable[[], tuple[torch.Tensor, ...]],
                                      decompositions: str) -> None:
    torch.manual_seed(0)
    check_functionalized(fn, *make_args(), decompositions=decompositions)


def test_writes_through_views_become_scatters() -> None:
    functional = check_functionalized(setitem_column, torch.randn(3, 4), torch.randn(3))
    targets = {n.target for n in functional.gm.graph.nodes}
    assert aten.select_scatter.default in targets
    functional = check_functionalized(split_chunk_mul_, torch.randn(4, 3))
    assert aten.slice_scatter.default in {n.target for n in functional.gm.graph.nodes}
    functional = check_functionalized(diagonal_fill_, torch.randn(3, 3))
    assert aten.diagonal_scatter.default in {n.target for n in functional.gm.graph.nodes}
    functional = check_functionalized(as_strided_add_, torch.randn(4))
    assert aten.as_strided_scatter.default in {n.target for n in functional.gm.graph.nodes}


def test_mutated_inputs_are_extra_outputs() -> None:
    functional = check_functionalized(several_mutations, torch.randn(3), torch.randn(2, 3))
    assert functional.mutated_inputs == [0, 1]
    assert functional.num_graph_outputs == 3


def test_input_aliasing_outputs_are_not_graph_outputs() -> None:
    functional = check_functionalized(view_outputs, torch.randn(2, 3))
    assert [s.kind for s in functional.outputs] == ["input", "input", "input"]
    functional = check_functionalized(output_views_of_outputs, torch.randn(2, 3))
    assert [s.kind for s in functional.outputs] == ["graph", "output", "output"]


def test_in_place_ops_become_out_of_place() -> None:
    functional = check_functionalized(transpose_add_, torch.randn(3, 4))
    targets = {n.target for n in functional.gm.graph.nodes}
    assert aten.add.Tensor in targets and aten.add_.Tensor not in targets


@pytest.mark.parametrize("op, functional", [
    (aten.add_.Tensor, aten.add.Tensor),
    (aten.pow_.Scalar, aten.pow.Tensor_Scalar),  # pow.Scalar is (Scalar self, Tensor exponent)
    (aten.transpose_.default, aten.transpose.int),
    (aten.copy_.default, aten.copy.default),
    (aten.add.out, aten.add.Tensor),
    (aten._native_batch_norm_legit.default, aten._native_batch_norm_legit_functional.default),
])
def test_functional_variant_lookup(op: Any, functional: Any) -> None:
    from aotgrad.functionalize.mutations import functional_variant

    assert functional_variant(op).op is functional
