"""The dispatch-level ATen tracer: op recording, metadata, constants, errors, RNG."""

from __future__ import annotations

import operator

import torch
from aotgrad.decompositions import get_decompositions
from aotgrad.trace import fake_inputs, new_fake_mode, trace
from torch import fx

aten = torch.ops.aten


def _trace(fn, *args, decompositions="none"):  # type: ignore[no-untyped-def]
    mode = new_fake_mode()
    gm, _ = trace(fn, fake_inputs(mode, args), fake_mode=mode,
                  decompositions=get_decompositions(decompositions))
    return gm


def _call_targets(gm: fx.GraphModule) -> list[object]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_records_aten_overloads_with_example_values() -> None:
    gm = _trace(lambda x, y: (x + y).relu().sum(dim=0), torch.randn(3, 4), torch.randn(4))
    assert _call_targets(gm) == [aten.add.Tensor, aten.relu.default, aten.sum.dim_IntList]
    for node in gm.graph.nodes:
        assert "example_value" in node.meta
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    assert out.meta["example_value"][0].shape == (4,)


def test_tuple_outputs_become_getitem_nodes() -> None:
    gm = _trace(lambda x: torch.max(x, dim=1), torch.randn(3, 4))
    targets = _call_targets(gm)
    assert targets.count(operator.getitem) == 2
    result = gm(torch.arange(12.0).view(3, 4))
    assert result[0].tolist() == [3.0, 7.0, 11.0] and result[1].tolist() == [3, 3, 3]


def test_scalar_args_and_closure_tensor_constants() -> None:
    weight = torch.randn(4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * weight + 2.5 + torch.tensor([1.0, 2.0, 3.0, 4.0])

    gm = _trace(fn, torch.randn(4))
    assert sum(1 for n in gm.graph.nodes if n.op == "get_attr") == 2
    x = torch.randn(4)
    torch.testing.assert_close(gm(x)[0], fn(x))


def test_decompositions_are_applied() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)

    plain = _trace(fn, torch.randn(4))
    decomposed = _trace(fn, torch.randn(4), decompositions="core")
    assert aten.silu.default in _call_targets(plain)
    assert aten.silu.default not in _call_targets(decomposed)
    x = torch.randn(4)
    torch.testing.assert_close(decomposed(x)[0], fn(x))


def test_item_and_data_dependent_shapes_are_recorded() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        scale = x.sum().item()
        return x * scale, x.nonzero(), scale

    gm = _trace(fn, torch.randn(3))
    targets = _call_targets(gm)
    assert aten._local_scalar_dense.default in targets and aten.nonzero.default in targets
    x = torch.tensor([1.0, 0.0, 2.0])
    product, nonzero, scale = gm(x)
    torch.testing.assert_close(product, x * 3.0)
    assert nonzero.tolist() == [[0], [2]] and scale == 3.0


def test_data_dependent_size_used_in_python_is_read_at_run_time() -> None:
    # The size of nonzero's result is an unbacked symbol: `sym_size` reads it in the graph.
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.nonzero().shape[0] + 1)

    gm = _trace(fn, torch.randn(3))
    assert aten.sym_size.int in _call_targets(gm)
    for x in (torch.tensor([1.0, 0.0, 2.0]), torch.zeros(3), torch.ones(3)):
        (result,) = gm(x)
        torch.testing.assert_close(result, fn(x))


def test_rng_ops_stay_in_the_graph() -> None:
    gm = _trace(lambda x: x + torch.rand(1000), torch.zeros(1000))
    assert aten.rand.default in _call_targets(gm)
    first, second = gm(torch.zeros(1000))[0], gm(torch.zeros(1000))[0]
    assert not torch.equal(first, second)
    assert 0.0 <= float(first.min()) and float(first.max()) < 1.0
    assert abs(float(first.mean()) - 0.5) < 0.05


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def test_node_metadata_is_copied_from_the_torch_level_node() -> None:
    gm = fx.symbolic_trace(_Block())
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_function"):
            node.meta["stack_trace"] = f'  File "user.py", line 1, in forward\n    {node.name}\n'
            node.meta["nn_module_stack"] = {"fc": ("L['self'].fc", torch.nn.Linear)}
            node.meta["source_fn"] = (node.name, node.target)
    aten_gm = _trace(gm, torch.randn(2, 4))
    ops = [n for n in aten_gm.graph.nodes if n.op == "call_function"]
    assert ops
    for node in ops:
        assert "stack_trace" in node.meta and "nn_module_stack" in node.meta
    relu = [n for n in ops if n.target is aten.relu.default]
    assert relu[0].meta["source_fn"][1] is torch.relu
    addmm = [n for n in ops if n.target is aten.addmm.default]
    assert addmm[0].meta["source_fn"][1] == "fc"


def test_python_arithmetic_on_item_results_is_recorded() -> None:
    def fn(x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        return x.narrow(0, start, 2)  # wraps a negative start: a sympy Piecewise of u0

    gm = _trace(fn, torch.randn(5), torch.tensor(1))
    x = torch.arange(5.0)
    for start in (1, -3, 0):
        torch.testing.assert_close(gm(x, torch.tensor(start))[0], fn(x, torch.tensor(start)))
