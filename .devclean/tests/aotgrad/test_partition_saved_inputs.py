"""What the partitioners save in place of graph inputs (issue 16): a value living in an
input's storage is saved as the input itself, and batch norm's backward in training mode
does not read the running statistics (so their new values are not saved)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from aotgrad.joint import build_joint
from aotgrad.partition import PartitionConfig, get_partitioner
from aotgrad.partition.analysis import analyze, storage_root
from aotgrad.partition.mincut import min_cut_banned, min_cut_saved_values
from test_partition_support import check_partition_matches_eager

aten = torch.ops.aten


def _bn_fn(training: bool) -> Any:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, rm: torch.Tensor,
           rv: torch.Tensor) -> Any:
        y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=training)
        return (torch.relu(y).pow(2).sum(),)
    return fn


def _bn_inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(8, 4, 5, 5, requires_grad=True), torch.rand(4, requires_grad=True),
            torch.randn(4, requires_grad=True), torch.randn(4), torch.rand(4) + 0.5]


def _backward_calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.target is aten.native_batch_norm_backward.default]


def test_training_batch_norm_backward_reads_no_running_stats() -> None:
    inputs = _bn_inputs()
    joint = build_joint(_bn_fn(True), inputs, decompositions=None)
    calls = _backward_calls(joint.gm)
    assert calls, "the test would check nothing: no batch norm backward in the joint"
    for node in calls:
        assert node.args[3] is None and node.args[4] is None
    # NOTE: the new running statistics are still the forward's outputs (mutated inputs)
    results = joint.gm(*[i.detach().clone() for i in inputs], torch.ones(()))
    rm, rv = inputs[3].clone(), inputs[4].clone()
    x = inputs[0].detach().clone().requires_grad_()
    w = inputs[1].detach().clone().requires_grad_()
    b = inputs[2].detach().clone().requires_grad_()
    loss = _bn_fn(True)(x, w, b, rm, rv)[0]
    grads = torch.autograd.grad(loss, [x, w, b])
    torch.testing.assert_close(results[0], rm)
    torch.testing.assert_close(results[1], rv)
    for got, want in zip(results[-5:-2], grads):
        torch.testing.assert_close(got, want)


def test_eval_batch_norm_backward_keeps_running_stats() -> None:
    joint = build_joint(_bn_fn(False), _bn_inputs(), decompositions=None)
    calls = _backward_calls(joint.gm)
    assert calls, "the test would check nothing: no batch norm backward in the joint"
    # NOTE: eval mode normalizes with the running statistics: the backward needs them
    for node in calls:
        assert node.args[3] is not None and node.args[4] is not None


@pytest.mark.parametrize("budget", [1.0, 0.5, 0.0])
def test_batch_norm_partitions_match_eager(budget: float) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
        rm, rv = torch.zeros(4), torch.ones(4)
        y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True)
        return (torch.relu(y).pow(2).sum(),)

    check_partition_matches_eager("memory_budget", fn, _bn_inputs()[:3],
                                  PartitionConfig(activation_memory_budget=budget))


def test_a_view_of_an_input_is_saved_as_the_input() -> None:
    """`to` an input's own dtype and a weight's transpose live in the input's storage:
    the cut saves the input and the backward redoes the view (a backend could otherwise
    return the view as a copy)."""

    def fn(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> Any:
        pred = torch.tanh(x @ w.t())
        return (torch.nn.functional.mse_loss(pred, y.to(torch.float32)),)

    inputs = [torch.randn(6, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True),
              torch.randn(6, 3)]
    joint = build_joint(fn, inputs)
    info = analyze(joint.gm, joint.num_fwd_outputs)
    saved = min_cut_saved_values(info, min_cut_banned(info))
    for node in saved:
        root = storage_root(node)
        assert root.op != "placeholder" or node is root, (node, root)
    fw, _ = get_partitioner("min_cut")(joint.gm, num_fwd_outputs=joint.num_fwd_outputs,
                                       config=PartitionConfig())
    (out,) = [n for n in fw.graph.nodes if n.op == "output"]
    returned = [a for a in out.args[0] if isinstance(a, torch.fx.Node)]
    assert not any(n.op == "call_function" and storage_root(n).op == "placeholder"
                   for n in returned[joint.num_fwd_outputs:])
    check_partition_matches_eager("min_cut", fn, inputs)


def test_batch_norm_recomputed_without_running_stats_at_budget_zero() -> None:
    """Budget 0.0 recomputes a training-mode batch norm in the backward from its input,
    weight and bias (`_native_batch_norm_legit.no_stats`): the running statistics, which
    the forward overwrites, are not saved; the split still runs like eager autograd."""
    inputs = _bn_inputs()
    joint = build_joint(_bn_fn(True), inputs, decompositions=None)
    nfwd = joint.num_fwd_outputs
    assert any(n.target is aten._native_batch_norm_legit_functional.default
               for n in joint.gm.graph.nodes), "no whole batch norm: the test checks nothing"
    fw, bw = get_partitioner("memory_budget")(
        joint.gm, num_fwd_outputs=nfwd, config=PartitionConfig(activation_memory_budget=0.0))
    (out,) = [n for n in fw.graph.nodes if n.op == "output"]
    saved = {n.name for n in out.args[0][nfwd:] if isinstance(n, torch.fx.Node)}
    stats = [n.name for n in joint.gm.graph.nodes if n.op == "placeholder"][3:5]
    assert not saved & set(stats), (saved, stats)
    assert any(n.target is aten._native_batch_norm_legit.no_stats for n in bw.graph.nodes)
    # run the split on real tensors and compare with eager autograd
    x, w, b, rm, rv = (i.detach().clone() for i in inputs)
    fw_out = fw(x, w, b, rm.clone(), rv.clone())
    grads = bw(*fw_out[nfwd:], torch.ones(()))
    xe, we, be = (t.clone().requires_grad_() for t in (x, w, b))
    rme, rve = rm.clone(), rv.clone()
    loss = _bn_fn(True)(xe, we, be, rme, rve)[0]
    want = torch.autograd.grad(loss, [xe, we, be])
    torch.testing.assert_close(fw_out[0], rme)
    torch.testing.assert_close(fw_out[1], rve)
    for got, expected in zip(grads[:3], want):
        torch.testing.assert_close(got, expected)
