"""min_cut: saves no more bytes than default, recomputes only cheap ops, never a banned op."""

from __future__ import annotations

import pytest
import torch
from aotgrad.partition import PartitionConfig, get_partitioner, saved_bytes
from aotgrad.partition.analysis import analyze, is_cheap
from aotgrad.partition.default import partition_default
from aotgrad.partition.mincut import banned_for_min_cut, partition_min_cut
from test_partition_correctness import CASES
from test_partition_support import trace_joint
from torch import fx


def _computed_targets(gm: fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_min_cut_saves_at_most_default(case_name: str) -> None:
    torch.manual_seed(0)
    fn, inputs = CASES[case_name]()
    joint, nfwd = trace_joint(fn, inputs)
    info = analyze(joint, nfwd)
    default, min_cut = partition_default(info), partition_min_cut(info)
    assert saved_bytes(min_cut.fw, nfwd) <= saved_bytes(default.fw, nfwd)
    assert default.recomputed == ()


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_min_cut_never_recomputes_a_banned_forward_op(case_name: str) -> None:
    torch.manual_seed(0)
    fn, inputs = CASES[case_name]()
    joint, nfwd = trace_joint(fn, inputs)
    info = analyze(joint, nfwd)
    result = partition_min_cut(info)
    for node in result.recomputed:
        assert is_cheap(node), f"min_cut recomputes {node.name} ({node.target})"
    # NOTE: the backward has its own matmuls (gradients); what must not happen is a forward
    # matmul/reduction/random op (one that reads no tangent) being computed again there.
    fw_names = set(_computed_targets(result.fw))
    for node in result.bw_forward_nodes:
        if banned_for_min_cut(node):
            assert node.name not in fw_names, f"{node.name} runs in both graphs"


def test_min_cut_recomputes_a_pointwise_chain_instead_of_saving_it() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return ((x.sin().cos() * 3.0).sum(),)

    joint, nfwd = trace_joint(fn, [torch.randn(64, requires_grad=True)])
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert fw.meta["saved_names"] == ["primals_1"]
    assert saved_bytes(fw, nfwd) == 0
    bw_ops = {str(n.target) for n in bw.graph.nodes if n.op == "call_function"}
    assert {"aten.sin.default", "aten.cos.default"} <= bw_ops


def test_min_cut_saves_a_result_eager_saves_instead_of_recomputing_its_chain() -> None:
    """exp's backward reads exp's own output (eager saves it): min_cut saves it, as
    torch.compile's partitioner does (saved: the input and exp's result), and recomputes
    only the chain the other gradients need; the backward runs no exp."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x.sin().cos().exp().sum(),)

    joint, nfwd = trace_joint(fn, [torch.randn(64, requires_grad=True)])
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert saved_bytes(fw, nfwd) == 64 * 4
    bw_ops = [str(n.target) for n in bw.graph.nodes if n.op == "call_function"]
    assert "aten.exp.default" not in bw_ops
    assert "aten.sin.default" in bw_ops
    dfw, _ = get_partitioner("default")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert saved_bytes(dfw, nfwd) > 0


def test_min_cut_saves_matmul_output_rather_than_recomputing_it() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.tanh(x @ w).sum(),)

    x, w = torch.randn(8, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)
    joint, nfwd = trace_joint(fn, [x, w])
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    fw_mms = [n for n in fw.graph.nodes if n.op == "call_function" and "mm" in str(n.target)]
    assert len(fw_mms) == 1
    # the backward's matmuls are exactly the joint's tangent-dependent ones: x @ w is not
    # among them
    info = analyze(joint, nfwd)
    joint_bw_mms = {
        n.name for n in info.tangent_dependent
        if n.op == "call_function" and "mm" in str(n.target)
    }
    bw_mms = {n.name for n in bw.graph.nodes if n.op == "call_function" and "mm" in str(n.target)}
    assert bw_mms == joint_bw_mms
    assert saved_bytes(fw, nfwd) == 8 * 16 * 4  # one activation: tanh's output or x @ w


def test_names_and_order_of_saved_values_match_between_graphs() -> None:
    fn, inputs = CASES["attention"]()
    joint, nfwd = trace_joint(fn, inputs)
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    fw_out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    saved_fw = [n.name for n in fw_out[nfwd:]]
    bw_in = [n.name for n in bw.graph.nodes if n.op == "placeholder"][: len(saved_fw)]
    assert saved_fw == bw_in == fw.meta["saved_names"]
    for graph in (fw, bw):
        for node in graph.graph.nodes:
            if node.op != "output":
                assert "example_value" in node.meta


def test_min_cut_saves_a_pointwise_value_a_matmul_reads_instead_of_recomputing_it() -> None:
    # GELU's output feeds the second matmul: the forward writes it to memory anyway and its
    # weight gradient reads it, so min_cut keeps it (as eager autograd does) rather than
    # running erf again in the backward. GELU's input is kept for GELU's own derivative.
    def fn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor]:
        return ((torch.nn.functional.gelu(x @ w1) @ w2).sum(),)

    x = torch.randn(8, 16)
    w1, w2 = torch.randn(16, 32, requires_grad=True), torch.randn(32, 4, requires_grad=True)
    joint, nfwd = trace_joint(fn, [x, w1, w2])
    result = partition_min_cut(analyze(joint, nfwd))
    assert not any("gelu" in str(n.target) for n in result.recomputed)
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert [n for n in bw.graph.nodes if str(n.target) == "aten.gelu.default"] == []
    # x @ w1 and its GELU (or the GELU's transpose, the same bytes)
    assert saved_bytes(fw, nfwd) == 2 * 8 * 32 * 4


def test_a_fusing_backend_recomputes_the_results_eager_saves() -> None:
    """With `fused_recompute` (inductor fuses the chain into the backward's kernel, as
    torch.compile's inductor recomputes it) only the input is saved."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x.sin().cos().exp().sum(),)

    joint, nfwd = trace_joint(fn, [torch.randn(64, requires_grad=True)])
    for name in ("min_cut", "memory_budget"):
        fw, bw = get_partitioner(name)(joint, num_fwd_outputs=nfwd,
                                       config=PartitionConfig(fused_recompute=True))
        assert saved_bytes(fw, nfwd) == 0
        bw_ops = {str(n.target) for n in bw.graph.nodes if n.op == "call_function"}
        assert "aten.exp.default" in bw_ops


def test_min_cut_still_recomputes_a_pointwise_value_only_a_reduction_reads() -> None:
    # a reduction fuses with the pointwise ops feeding it: nothing is materialized for it
    # NOTE: sin and cos read their input in the backward, not their result (which eager
    # does not save: `saved_as_result`); cos's value, which only the sum reads, is not saved
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return ((x @ w).sin().cos().sum(),)

    x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=True)
    joint, nfwd = trace_joint(fn, [x, w])
    fw, _ = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert saved_bytes(fw, nfwd) == 8 * 16 * 4  # x @ w or its sine
    assert not any("cos" in name for name in fw.meta["saved_names"])


def test_min_cut_saves_the_results_eager_saves_before_a_reduction() -> None:
    # sigmoid's and exp's backward read their own results: saved (torch.compile saves the
    # same two), not recomputed in the backward
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return ((x @ w).sigmoid().exp().sum(),)

    x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=True)
    joint, nfwd = trace_joint(fn, [x, w])
    fw, bw = get_partitioner("min_cut")(joint, num_fwd_outputs=nfwd, config=PartitionConfig())
    assert saved_bytes(fw, nfwd) == 2 * 8 * 16 * 4
    bw_ops = {str(n.target) for n in bw.graph.nodes if n.op == "call_function"}
    assert not bw_ops & {"aten.exp.default", "aten.sigmoid.default"}
