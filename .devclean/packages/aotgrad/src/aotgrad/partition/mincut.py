"""The `min_cut` partitioner: save the cheapest set of values (in bytes) that separates the
primals and the values the forward must compute from the backward, recomputing cheap ops.
Cheap values an expensive forward op reads (a matmul's input) are not recomputed either:
the forward writes them to memory anyway (`feeds_expensive_op`).

Flow graph (networkx): every forward-computable node becomes `name_in -> name_out` with the
capacity of its bytes; consumers are reached through infinite edges; primals and banned
nodes (never recomputed) hang off the source; values the backward reads go to
the sink. The saved values are the nodes whose in/out edge the minimum cut crosses.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx  # type: ignore[import-untyped]  # NOTE: networkx ships no stubs
import torch
from torch import fx

from aotgrad.partition.analysis import (
    JointInfo,
    analyze,
    example_value,
    is_cheap,
    is_random,
    is_reduction,
    is_saveable,
    is_view,
    nodes_in,
    storage_root,
    value_bytes,
)
from aotgrad.partition.options import PartitionConfig
from aotgrad.partition.recompute import recompute_inputs
from aotgrad.partition.split import Partition, PartitionError, split

_SOURCE = "__source__"
_SINK = "__sink__"


def _capacity(node: fx.Node, computed_anyway: bool) -> int:
    # NOTE: primals are alive whether saved or not, so saving one is free. Every other value
    # costs twice its bytes plus one, which breaks ties toward saving primals and toward
    # fewer saved values without changing which byte total is smallest.
    # A view of a primal (a weight's transpose) lives in the primal's storage: free too.
    # For a fusing compiler, a value the forward computes in any case (`computed_anyway`: a
    # convolution's output) costs twice its bytes: where saving it ties with saving a cheap
    # value computed from it (batch norm's `x - mean`, a bias added to a matmul), it is saved
    # and the cheap value recomputed inside the backward's kernel, so the forward's fused
    # kernel does not write it as one more output (ResNet-50: a 100 MB store per block on a
    # GPU). Without fusion every value is written anyway and a recomputed op is one more
    # pass over memory: the tie goes to the later value as before.
    if storage_root(node).op == "placeholder":
        return 0
    return 2 * value_bytes(node) + (0 if computed_anyway else 1)


def banned_for_min_cut(node: fx.Node) -> bool:
    """min_cut never recomputes anything but cheap (pointwise, view, copy-like) ops."""
    return node.op == "call_function" and not is_cheap(node)


def _opaque(node: fx.Node) -> bool:
    # NOTE: reductions are excluded: a backend fuses a reduction with the pointwise ops
    # feeding it, so their values need not reach memory.
    return not is_cheap(node) and not is_reduction(node)


def feeds_expensive_op(info: JointInfo, node: fx.Node) -> bool:
    """A computed pointwise or copied value that an opaque forward op (a matmul, a
    convolution: not cheap and not a reduction) reads, directly or through views.

    NOTE: the forward writes such a value to memory anyway (the expensive op is a separate
    call), and eager autograd keeps it for that op's backward; saving it costs memory eager
    spends too and no forward work, while recomputing it costs a backward pass over its
    inputs (the attention block's GELU: an erf per element, redone for fc2's weight grad).
    """
    if node.op != "call_function" or not node.all_input_nodes or is_view(node):
        return False
    if not is_cheap(node) or not isinstance(example_value(node), torch.Tensor):
        return False
    stack = list(node.users)
    while stack:
        user = stack.pop()
        if user.op != "call_function" or user in info.tangent_dependent:
            continue
        if is_view(user):
            stack.extend(user.users)
        elif _opaque(user):
            return True
    return False


_DETACH = torch.ops.aten.detach.default


def saved_as_result(info: JointInfo, node: fx.Node) -> bool:
    """A value eager autograd saves as its own op's result (the output of tanh, sigmoid,
    exp, a softmax, attention), which the backward reads: autograd detaches an output it
    saves (traced with saved-tensor hooks deferred, only outputs get that detach), so the
    value has a `detach` user that the forward outputs do not need.

    NOTE: the backward reads such a value as an operand of another op (tanh_backward,
    not the tanh chain), so recomputing it is never free: without fusion (aot_eager) it
    runs again op by op, and a fusing backend still evaluates the whole chain in the
    backward's kernel (GPT-2's GELU: pow, mul, add, mul, tanh per element). torch's
    partitioner saves it too (its "materialized in backward" rule: detach is not fusible);
    a budget below 1.0 may still recompute it (it is a knapsack candidate).
    """
    if node.op != "call_function" or is_view(node) or node in info.tangent_dependent:
        return False
    if not isinstance(example_value(node), torch.Tensor):
        return False
    return any(user.target is _DETACH and user not in info.required_fw
               for user in node.users)


def materialized_values(info: JointInfo, *, fused_recompute: bool = False) -> set[fx.Node]:
    """Every node of the joint the forward materializes for the backward to read:
    `feeds_expensive_op` holds, or (without `fused_recompute`, see `PartitionConfig`)
    `saved_as_result`."""
    return {n for n in info.gm.graph.nodes
            if feeds_expensive_op(info, n)
            or (not fused_recompute and saved_as_result(info, n))}


def min_cut_banned(info: JointInfo, *, fused_recompute: bool = False,
                   ) -> Callable[[fx.Node], bool]:
    """min_cut's ban: expensive ops, and the values they read that the forward materializes."""
    materialized = materialized_values(info, fused_recompute=fused_recompute)

    def banned(node: fx.Node) -> bool:
        return banned_for_min_cut(node) or node in materialized

    return banned


def _runs_in_forward(info: JointInfo, node: fx.Node) -> bool:
    """Whether the forward computes `node` whatever is saved: the forward outputs need it,
    or it draws random numbers (which must happen once, in eager's order).

    NOTE: a banned node only the backward needs (a scatter of the targets for nll_loss's
    gradient, a matmul of two inputs) is not pinned: computing it in the backward is not
    recomputation, it runs once either way, and saving its inputs may be far cheaper.
    """
    return node in info.required_fw or is_random(node)


def min_cut_saved_values(info: JointInfo, banned: Callable[[fx.Node], bool], *,
                         fused_recompute: bool = False) -> set[fx.Node]:
    """Saved values of the minimum cut when the nodes for which `banned` holds must run in
    the forward (they are never recomputed); `fused_recompute` (see `PartitionConfig`):
    ties go to values the forward computes in any case (`_capacity`)."""
    flow = nx.DiGraph()
    flow.add_node(_SOURCE)
    flow.add_node(_SINK)
    for node in info.gm.graph.nodes:
        if node.op == "output" or not info.is_forward_computable(node):
            continue
        node_in, node_out = node.name + ".in", node.name + ".out"
        # NOTE: only primals and banned nodes are pinned to the source side: a node the
        # forward outputs need still runs in the forward, but the backward may recompute it.
        pinned = node.op == "placeholder" or (banned(node) and _runs_in_forward(info, node))
        if is_saveable(node):
            flow.add_edge(node_in, node_out,
                          capacity=_capacity(node, pinned and fused_recompute))
        else:
            flow.add_edge(node_in, node_out)  # no capacity attribute: infinite
        if pinned:
            flow.add_edge(_SOURCE, node_in)
        for user in node.users:
            if user.op == "output":
                continue
            if user in info.tangent_dependent:
                flow.add_edge(node_out, _SINK)
            elif node in recompute_inputs(info, user):
                # NOTE: recomputing `user` needs `node` (not a running-stat buffer a batch
                # norm only updates: `recompute.recompute_inputs`)
                flow.add_edge(node_out, user.name + ".in")
    for node in nodes_in(info.grad_outputs):
        if info.is_forward_computable(node):
            flow.add_edge(node.name + ".out", _SINK)
    try:
        _, (reachable, _) = nx.minimum_cut(flow, _SOURCE, _SINK)
    except nx.NetworkXUnbounded:
        raise PartitionError(
            "min_cut: the backward reads a value that can neither be saved nor recomputed "
            "(a tuple-valued op used without getitem?)"
        ) from None
    saved: set[fx.Node] = set()
    for node in info.gm.graph.nodes:
        if node.op == "output" or not info.is_forward_computable(node):
            continue
        if node.name + ".in" in reachable and node.name + ".out" not in reachable:
            saved.add(_primal_for_view(node))
    return saved


def _primal_for_view(node: fx.Node) -> fx.Node:
    """The primal itself for a value that lives in a primal's storage (a weight's
    transpose, `to` an input's own dtype), whose views the backward then redoes.

    NOTE: the cut prices such a value at 0 bytes (the primal is alive anyway), but a backend
    may return it from the forward as a new tensor (inductor copies an identity `to`), and
    a saved view escapes the copy the runtime makes of a saved input it overwrites (a
    mutated buffer): saving the primal is free on every backend and reads the right value.
    """
    root = storage_root(node)
    return root if root.op == "placeholder" and is_saveable(root) else node


def partition_min_cut(info: JointInfo, *, fused_recompute: bool = False) -> Partition:
    """The min_cut split of a joint graph (`fused_recompute`: see `PartitionConfig`)."""
    banned = min_cut_banned(info, fused_recompute=fused_recompute)
    return split(info, min_cut_saved_values(info, banned, fused_recompute=fused_recompute))


def min_cut_partition(
    joint: fx.GraphModule, *, num_fwd_outputs: int, config: PartitionConfig | None = None
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Save a minimum-bytes set of values; recompute cheap ops in the backward."""
    fused = config.fused_recompute if config is not None else False
    result = partition_min_cut(analyze(joint, num_fwd_outputs), fused_recompute=fused)
    return result.fw, result.bw
