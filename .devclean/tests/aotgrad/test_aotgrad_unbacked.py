"""Graphs with data-dependent values (unbacked symbols) through aotgrad: `.item()` results
used as op arguments, tensors whose sizes depend on data (`nonzero`, `masked_select`,
`repeat_interleave`), sizes returned as Python ints; inference and training equal eager, and
bad data raises (the ShapeEnv's deferred runtime asserts become `aten._assert_async` nodes of
the forward graph) instead of giving other numbers.

The inputs are torch-level GraphModules as capture produces them (here from
`torch.fx.symbolic_trace`, so that the test needs aotgrad only).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import aotgrad
import pytest
import torch
from aotgrad.backend import aot_eager
from torch import fx


def narrow_at(x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    return x.narrow(0, start.item(), 2) * 3


def positive_rows(x: torch.Tensor) -> torch.Tensor:
    idx = torch.nonzero(x[:, 0] > 0).squeeze(1)
    return x[idx].tanh()


def selected(x: torch.Tensor) -> torch.Tensor:
    return torch.masked_select(x, x > 0).exp()


def repeated(x: torch.Tensor, repeats: torch.Tensor) -> torch.Tensor:
    return torch.repeat_interleave(x, repeats, dim=0) * 2


def count_plus_one(x: torch.Tensor) -> Any:
    return torch.nonzero(x > 0).shape[0] + 1


def gen(*shape: int, seed: int = 0, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


CASES: list[tuple[Callable[..., Any], list[tuple[Any, ...]]]] = [
    (narrow_at, [(gen(6), torch.tensor(1)), (gen(6, seed=1), torch.tensor(4))]),
    (positive_rows, [(gen(5, 3),), (gen(5, 3, seed=2),)]),
    (selected, [(gen(3, 4),), (gen(3, 4, seed=3),)]),
    (repeated, [(gen(3, 2), torch.tensor([2, 0, 1])), (gen(3, 2), torch.tensor([1, 3, 1]))]),
]


def _clone(args: tuple[Any, ...], grad: bool) -> tuple[Any, ...]:
    return tuple(a.detach().clone().requires_grad_(grad and a.is_floating_point())
                 for a in args)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize(("fn", "calls"), CASES, ids=[c[0].__name__ for c in CASES])
def test_unbacked_graph_matches_eager(fn: Callable[..., Any], calls: list[tuple[Any, ...]],
                                      training: bool) -> None:
    gm = fx.symbolic_trace(fn)
    compiled = aot_eager(gm, [])
    for args in calls:
        e_args, c_args = _clone(args, training), _clone(args, training)
        expected, actual = fn(*e_args), compiled(*c_args)
        (actual,) = actual if isinstance(actual, tuple) else (actual,)
        torch.testing.assert_close(actual, expected)
        if training:
            expected.sum().backward()
            actual.sum().backward()
            torch.testing.assert_close(c_args[0].grad, e_args[0].grad)


def test_size_of_unbacked_tensor_is_an_output() -> None:
    gm = fx.symbolic_trace(count_plus_one)
    compiled = aot_eager(gm, [])
    for seed in range(3):
        x = gen(7, seed=seed)
        result = compiled(x)
        assert result == count_plus_one(x), (result, count_plus_one(x))


def _forward_graphs(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[fx.GraphModule]:
    graphs: list[fx.GraphModule] = []

    def record(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(gm)
        return gm.forward  # type: ignore[no-any-return]  # fx: untyped

    compiled = aotgrad.aot_function(fx.symbolic_trace(fn), record, record,
                                    partition_fn="default", decompositions="none")
    compiled(*args)
    return graphs


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_bounds_of_item_are_checked_at_run_time(training: bool) -> None:
    x = gen(6, grad=training)
    graphs = _forward_graphs(narrow_at, (x, torch.tensor(1)))
    forward = graphs[0]
    targets = [n.target for n in forward.graph.nodes]
    assert torch.ops.aten._local_scalar_dense.default in targets  # the start is read, not baked
    assert torch.ops.aten._assert_async.msg in targets, forward.code
    compiled = aot_eager(fx.symbolic_trace(narrow_at), [])
    torch.testing.assert_close(compiled(x, torch.tensor(3)), narrow_at(x, torch.tensor(3)))
    for bad in (5, 9, -9):
        with pytest.raises((RuntimeError, IndexError)):
            narrow_at(x, torch.tensor(bad))
        with pytest.raises(RuntimeError):  # the graph's check (eager: IndexError for 9, -9)
            compiled(x, torch.tensor(bad))


def test_check_in_program_is_kept() -> None:
    def fn(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k > 0)
        return x * k

    # x * k with torch._check(k > 0) in between, as capture records it
    graph = fx.Graph()
    x_node, n_node = graph.placeholder("x"), graph.placeholder("n")
    k = graph.call_method("item", (n_node,))
    graph.call_function(torch._check, (graph.call_function(operator.gt, (k, 0)),))
    graph.output((graph.call_function(operator.mul, (x_node, k)),))
    compiled = aot_eager(fx.GraphModule(torch.nn.Module(), graph), [])
    x = gen(3)
    (result,) = compiled(x, torch.tensor(2))
    torch.testing.assert_close(result, fn(x, torch.tensor(2)))
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(-1))
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor(-1))
