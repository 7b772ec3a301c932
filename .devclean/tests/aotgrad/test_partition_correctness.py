"""Every partitioner, on several joint graphs: fw then bw equals eager autograd."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
from aotgrad.partition import PartitionConfig
from test_partition_support import check_partition_matches_eager

Case = tuple[Callable[..., Sequence[torch.Tensor]], list[torch.Tensor]]


def _mlp() -> Case:
    def fn(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> tuple[
        torch.Tensor
    ]:
        h = torch.relu(x @ w1 + b1)
        return ((torch.tanh(h @ w2) ** 2).sum(),)

    return fn, [
        torch.randn(8, 16),
        torch.randn(16, 32, requires_grad=True),
        torch.randn(32, requires_grad=True),
        torch.randn(32, 4, requires_grad=True),
    ]


def _pointwise_chain() -> Case:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.sin(x) * y
        b = torch.exp(a).cos() + x.sigmoid()
        return b, (a * b).mean(dim=0)

    return fn, [torch.randn(6, 5, requires_grad=True), torch.randn(6, 5, requires_grad=True)]


def _attention() -> Case:
    def fn(
        x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor
    ) -> tuple[torch.Tensor]:
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = (q @ k.transpose(-2, -1)) / 4.0
        probs = torch.softmax(scores, dim=-1)
        out = torch.nn.functional.layer_norm(probs @ v + x, (16,))
        return (torch.nn.functional.gelu(out),)

    return fn, [
        torch.randn(2, 5, 16, requires_grad=True),
        torch.randn(16, 16, requires_grad=True),
        torch.randn(16, 16, requires_grad=True),
        torch.randn(16, 16, requires_grad=True),
    ]


def _none_grads() -> Case:
    def fn(
        x: torch.Tensor, unused: torch.Tensor, w: torch.Tensor, idx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        y = (x * w).relu()
        return y.sum(dim=1), (idx * 2).float()  # second output needs no grad

    return fn, [
        torch.randn(4, 3, requires_grad=True),
        torch.randn(2, requires_grad=True),
        torch.randn(4, 3, requires_grad=True),
        torch.arange(5),
    ]


def _output_is_saved() -> Case:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x @ w
        return h, torch.exp(h)  # exp's backward reads its own output

    return fn, [torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)]


def _views_and_reductions() -> Case:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        y = x.view(4, 6).t().contiguous()
        z = y[:, ::2].amax(dim=1, keepdim=True) - y.var(dim=1, keepdim=True)
        return ((z * y[:, :1]).sum(),)

    return fn, [torch.randn(24, requires_grad=True)]


CASES: dict[str, Callable[[], Case]] = {
    "mlp": _mlp,
    "pointwise_chain": _pointwise_chain,
    "attention": _attention,
    "none_grads": _none_grads,
    "output_is_saved": _output_is_saved,
    "views_and_reductions": _views_and_reductions,
}

CONFIGS: dict[str, tuple[str, PartitionConfig]] = {
    "default": ("default", PartitionConfig()),
    "min_cut": ("min_cut", PartitionConfig()),
    "budget_1.0": ("memory_budget", PartitionConfig(activation_memory_budget=1.0)),
    "budget_0.5_dp": ("memory_budget", PartitionConfig(activation_memory_budget=0.5)),
    "budget_0.3_greedy": (
        "memory_budget",
        PartitionConfig(activation_memory_budget=0.3, solver="greedy", estimator="testing"),
    ),
    "budget_0.0": ("memory_budget", PartitionConfig(activation_memory_budget=0.0)),
    "budget_0.6_profile": (
        "memory_budget",
        PartitionConfig(activation_memory_budget=0.6, estimator="profile"),
    ),
}


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_fw_then_bw_matches_eager(case_name: str, config_name: str) -> None:
    torch.manual_seed(0)
    fn, inputs = CASES[case_name]()
    name, config = CONFIGS[config_name]
    fw, bw = check_partition_matches_eager(name, fn, inputs, config)
    fw_inputs = [n.name for n in fw.graph.nodes if n.op == "placeholder"]
    assert fw_inputs == [f"primals_{i + 1}" for i in range(len(inputs))]
    saved_names = fw.meta["saved_names"]
    bw_inputs = [n.name for n in bw.graph.nodes if n.op == "placeholder"]
    assert bw_inputs[: len(saved_names)] == saved_names
    assert all(n.startswith("tangents_") for n in bw_inputs[len(saved_names) :])


def test_dropout_mask_is_not_recomputed() -> None:
    """A random op runs once: the backward must use the forward's mask (same numbers)."""

    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.nn.functional.dropout(torch.relu(x @ w), p=0.5, training=True),)

    from aotgrad.partition import get_partitioner
    from test_partition_support import run_split, trace_joint

    x = torch.randn(16, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)
    joint, nfwd = trace_joint(fn, [x, w])
    for name, config in CONFIGS.values():
        fw, bw = get_partitioner(name)(joint, num_fwd_outputs=nfwd, config=config)
        for node in bw.graph.nodes:
            if node.op == "call_function":
                assert torch.Tag.nondeterministic_seeded not in node.target.tags, node
        xs, ws = x.detach(), w.detach()
        tangent = torch.ones(16, 8)
        outs, grads = run_split(fw, bw, nfwd, [xs, ws], [tangent])
        # NOTE: with tangent 1, dL/d(pre-dropout) is exactly the dropout scale on kept
        # elements, so the output's zero pattern must match the gradient's.
        kept = outs[0] != 0
        h = torch.relu(xs @ ws)
        expected_w = xs.t() @ (kept.float() * 2.0 * (h > 0).float())
        assert grads[1] is not None
        torch.testing.assert_close(grads[1], expected_w)
