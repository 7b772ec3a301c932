"""Joint forward+backward graphs: the INTERFACES.md convention, None gradients, outputs
and inputs that do not require grad, numerics against eager autograd."""

from __future__ import annotations

from typing import Any

import torch
from _aotgrad_checks import assert_no_mutable_ops
from aotgrad.joint import build_joint


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def _outputs(gm: torch.fx.GraphModule) -> tuple[Any, ...]:
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    return tuple(out.args[0])


def test_convention_and_none_gradients() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, unused: torch.Tensor) -> Any:
        return (x * y).sin(), (x > 0)

    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3)  # no grad
    unused = torch.randn(3, requires_grad=True)
    joint = build_joint(fn, [x, y, unused])
    assert_no_mutable_ops(joint.gm)
    assert _placeholders(joint.gm) == ["primals_1", "primals_2", "primals_3", "tangents_1"]
    assert joint.num_fwd_outputs == 2
    assert joint.tangent_outputs == [0]  # the bool output gets no tangent
    assert joint.requires_grad == [True, False, True]
    outputs = _outputs(joint.gm)
    assert len(outputs) == 2 + 3
    assert outputs[3] is None and outputs[4] is None  # y: no grad; unused: no gradient
    for node in joint.gm.graph.nodes:
        assert "example_value" in node.meta


def test_joint_values_equal_eager_autograd() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
        h = torch.tanh(x @ w + b)
        return (h * h).sum(dim=1), h.mean()

    args = [torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True),
            torch.randn(5, requires_grad=True)]
    joint = build_joint(fn, args)
    tangents = [torch.randn(4), torch.randn(())]
    results = joint.gm(*[a.detach() for a in args], *tangents)
    expected = fn(*args)
    grads = torch.autograd.grad(expected, args, tangents)
    for got, want in zip(results[:2], expected):
        torch.testing.assert_close(got, want)
    for got, want in zip(results[2:], grads):
        torch.testing.assert_close(got, want)


def test_mutated_inputs_are_forward_outputs() -> None:
    def fn(x: torch.Tensor, stats: torch.Tensor) -> Any:
        stats.add_(x.detach().mean())
        return (x * 2).sum(),

    x = torch.randn(3, requires_grad=True)
    joint = build_joint(fn, [x, torch.zeros(())])
    assert joint.mutated_inputs == [1]
    assert joint.num_fwd_outputs == 2
    results = joint.gm(x.detach(), torch.zeros(()), torch.ones(()))
    torch.testing.assert_close(results[0], x.detach().mean())
    torch.testing.assert_close(results[2], torch.full((3,), 2.0))
    assert results[3] is None


def test_backward_mutations_are_functionalized() -> None:
    def fn(x: torch.Tensor) -> Any:
        return (x[1:3] * 2, x.index_select(0, torch.tensor([0, 0, 2])))

    x = torch.randn(4, requires_grad=True)
    joint = build_joint(fn, [x])
    assert_no_mutable_ops(joint.gm)
    tangents = [torch.ones(2), torch.ones(3)]
    results = joint.gm(x.detach(), *tangents)
    torch.testing.assert_close(results[2], torch.tensor([2.0, 2.0, 3.0, 0.0]))


def test_backward_ops_carry_the_forward_nodes_metadata() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.fc(x)).sum()

    gm = torch.fx.symbolic_trace(Net())
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_function", "call_method"):
            node.meta["stack_trace"] = f"  File \"net.py\", line 1, in forward\n    {node.name}\n"
    from aotgrad.api import LiftedModule

    joint = build_joint(LiftedModule(gm), [*gm.parameters(), torch.randn(2, 3)],
                        decompositions="none")
    targets = {n.target: n for n in joint.gm.graph.nodes if n.op == "call_function"}
    tanh_backward = targets[torch.ops.aten.tanh_backward.default]
    assert "tanh" in tanh_backward.meta["stack_trace"]
    mm_nodes = [n for n in joint.gm.graph.nodes if n.target is torch.ops.aten.mm.default]
    assert mm_nodes and all("fc" in n.meta["stack_trace"] for n in mm_nodes)
