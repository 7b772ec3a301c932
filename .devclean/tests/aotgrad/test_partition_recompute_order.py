"""Where the backward recomputes forward values: right before their first reader, so that a
recomputed activation is alive only from there to its last use (`partition.split`)."""

from __future__ import annotations

import operator
from typing import Any

import torch
from aotgrad.partition.analysis import analyze, bytes_of, example_value
from aotgrad.partition.split import split
from test_partition_support import eager_reference, run_split, trace_joint
from torch import fx

LAYERS = 6


def _chain(x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor]:
    """LAYERS layers of matmul then tanh: tanh's backward reads its output."""
    for w in weights:
        x = torch.tanh(x @ w)
    return (x.sum(),)


def _inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(64, 32, requires_grad=True)] + [
        (torch.randn(32, 32) / 6).requires_grad_() for _ in range(LAYERS)]


def _recomputed_peak(bw: fx.GraphModule, recomputed: set[str]) -> int:
    """The most bytes of recomputed values alive at once in `bw`, each alive from the node
    computing it to its last reader (aliases of it keep it alive too)."""
    nodes = list(bw.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    root: dict[fx.Node, fx.Node] = {}
    for node in nodes:
        if node.name in recomputed:
            root[node] = node
        elif node.op == "call_function" and node.all_input_nodes:
            first = node.all_input_nodes[0]
            value, base = example_value(node), example_value(first)
            # NOTE: a view (or a multi-output element) shares its input's storage
            if (isinstance(value, torch.Tensor) and isinstance(base, torch.Tensor)
                    and first in root
                    and value.untyped_storage()._cdata == base.untyped_storage()._cdata):
                root[node] = root[first]
    last: dict[fx.Node, int] = {}
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg in root:
                last[root[arg]] = max(last.get(root[arg], 0), position[node])
    peak = 0
    for i in range(len(nodes)):
        alive = sum(bytes_of(example_value(r)) for r in set(root.values())
                    if position[r] <= i <= last.get(r, position[r]))
        peak = max(peak, alive)
    return peak


def _saving_matmuls() -> tuple[list[torch.Tensor], Any, int, Any, Any, int]:
    """The chain's joint graph split saving every matmul output (the backward recomputes
    each layer's tanh from it): (inputs, joint, nfwd, info, partition, matmuls saved)."""
    inputs = _inputs()
    joint, nfwd = trace_joint(_chain, inputs)
    info = analyze(joint, nfwd)
    mms = [n for n in joint.graph.nodes if n.target is torch.ops.aten.mm.default
           and info.is_forward_computable(n)]
    return inputs, joint, nfwd, info, split(info, [*info.primals, *mms]), len(mms)


def test_recomputed_values_come_right_before_their_readers() -> None:
    inputs, _, nfwd, _, partition, saved = _saving_matmuls()
    assert saved == LAYERS
    tanhs = {n.name for n in partition.recomputed if n.target is torch.ops.aten.tanh.default}
    assert len(tanhs) == LAYERS

    one_layer = 64 * 32 * 4
    # NOTE: all recomputations at the top of the backward held every layer's tanh from its
    # start (LAYERS x one_layer); in place, one at a time (its tanh_backward reads it, then
    # the next layer's weight gradient).
    assert _recomputed_peak(partition.bw, tanhs) <= 2 * one_layer

    tangents = [torch.ones(())]
    outs, grads = run_split(partition.fw, partition.bw, nfwd, inputs, tangents)
    ref_outs, ref_grads = eager_reference(_chain, inputs, tangents)
    torch.testing.assert_close(outs, ref_outs)
    for got, want in zip(grads, ref_grads):
        assert got is not None and want is not None
        torch.testing.assert_close(got, want)


def test_the_order_keeps_every_gradient_op_in_its_joint_order() -> None:
    _, joint, _, info, partition, _ = _saving_matmuls()
    joint_order = [n.name for n in joint.graph.nodes
                   if n.op == "call_function" and not info.is_forward_computable(n)]
    bw_order = [n.name for n in partition.bw.graph.nodes if n.name in set(joint_order)]
    assert bw_order == [name for name in joint_order if name in set(bw_order)]


def _normalized_chain(x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor]:
    """Matmuls each followed by a normalization through `var_mean` (a multi-output op)."""
    for w in weights:
        h = x @ w
        var, mean = torch.var_mean(h, dim=-1, keepdim=True)
        x = torch.tanh((h - mean) * torch.rsqrt(var + 1e-5))
    return (x.sum(),)


def test_elements_of_a_recomputed_multi_output_op_follow_it() -> None:
    inputs = _inputs()
    joint, nfwd = trace_joint(_normalized_chain, inputs)
    info = analyze(joint, nfwd)
    mms = [n for n in joint.graph.nodes if n.target is torch.ops.aten.mm.default
           and info.is_forward_computable(n)]
    partition = split(info, [*info.primals, *mms])
    nodes = list(partition.bw.graph.nodes)
    multi = [n for n in nodes if n.target is torch.ops.aten.var_mean.correction]
    assert len(multi) == LAYERS
    for node in multi:
        # NOTE: the op's tuple holds every element until the last is taken
        elements = [u for u in node.users if u.target is operator.getitem]
        at = nodes.index(node)
        assert sorted(nodes.index(u) for u in elements) == list(
            range(at + 1, at + 1 + len(elements))), node.name
    tangents = [torch.ones(())]
    _, grads = run_split(partition.fw, partition.bw, nfwd, inputs, tangents)
    _, ref_grads = eager_reference(_normalized_chain, inputs, tangents)
    for got, want in zip(grads, ref_grads):
        assert got is not None and want is not None
        torch.testing.assert_close(got, want)
