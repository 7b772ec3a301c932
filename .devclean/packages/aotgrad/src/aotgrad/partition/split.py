"""Cut a joint graph into a forward and a backward GraphModule, given the values to save.

IR in: the joint graph (through its `JointInfo`) and a set of saved joint nodes. IR out:
fw (primals -> forward outputs + saved values) and bw (saved values + tangents -> one gradient
per primal), with every forward-computable node the backward needs and does not receive
recomputed in the backward, right before its first reader (the gradient ops keep the joint
graph's order). Every partitioner only chooses the saved set and calls `split`.
A saved view of a much larger value that is not saved itself is returned by the forward as a
contiguous copy (compact.py), so that it does not keep the larger storage alive.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable

import torch
from torch import fx

from aotgrad.checked_ops import VALUE_CHECKS
from aotgrad.partition.analysis import (
    JointInfo,
    is_random,
    is_saveable,
    nodes_in,
)
from aotgrad.partition.checkpointed import recompute_checkpointed
from aotgrad.partition.compact import (
    compact_copies,
    contiguous_copy,
    contiguous_like,
    saved_storage_bytes,
)
from aotgrad.partition.recompute import copy_for_recompute, recompute_inputs


@dataclasses.dataclass(frozen=True, slots=True)
class Partition:
    """Both graphs plus what the split decided, in joint-graph terms."""

    fw: fx.GraphModule
    bw: fx.GraphModule
    saved: tuple[fx.Node, ...]
    # joint nodes the backward computes again although the forward computed them too
    recomputed: tuple[fx.Node, ...]
    # forward-computable joint nodes the backward computes (recomputed ones included)
    bw_forward_nodes: tuple[fx.Node, ...]


class PartitionError(RuntimeError):
    """The chosen saved values do not let the backward compute the gradients."""


_RUNTIME_CHECKS = (*VALUE_CHECKS, torch.ops.aten._assert_scalar.default)


def _copy_meta(src: fx.Node, dst: fx.Node) -> None:
    dst.meta = dict(src.meta)


def _needed_from(
    roots: Iterable[fx.Node],
    stop: set[fx.Node],
    inputs: Callable[[fx.Node], list[fx.Node]] = lambda n: n.all_input_nodes,
) -> set[fx.Node]:
    needed: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        if node in stop:
            continue
        stack.extend(inputs(node))
    return needed


def _forward_graph(
    info: JointInfo, saved: list[fx.Node], copies: set[fx.Node]
) -> tuple[fx.Graph, set[fx.Node]]:
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for primal in info.primals:
        env[primal] = graph.placeholder(primal.name)
        _copy_meta(primal, env[primal])
    # NOTE: runtime checks (`aten._assert_async` on data-dependent values) have no users;
    # the forward keeps them.
    checks = [n for n in info.gm.graph.nodes if n.target in _RUNTIME_CHECKS
              and info.is_forward_computable(n)]
    roots = nodes_in(info.fwd_outputs) + saved + checks
    needed = _needed_from(roots, stop=set(info.primals))
    computed: set[fx.Node] = set()
    for node in info.gm.graph.nodes:
        if node not in needed or node.op in ("placeholder", "output"):
            continue
        env[node] = graph.node_copy(node, env.__getitem__)
        computed.add(node)
    fwd = [fx.node.map_arg(v, env.__getitem__) for v in info.fwd_outputs]
    kept: list[fx.node.Argument] = [
        contiguous_copy(graph, env[s], s) if s in copies else env[s] for s in saved]
    graph.output(tuple(fwd + kept))
    return graph, computed


def _backward_graph(
    info: JointInfo, saved: list[fx.Node], copies: set[fx.Node]
) -> tuple[fx.Graph, list[fx.Node]]:
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in saved + info.tangents:
        env[node] = graph.placeholder(node.name)
        _copy_meta(node, env[node])
        if node in copies:
            example = env[node].meta["example_value"]
            env[node].meta["example_value"] = contiguous_like(example)
    needed = _needed_from(nodes_in(info.grad_outputs), stop=set(env),
                          inputs=lambda n: recompute_inputs(info, n))
    computed: list[fx.Node] = []

    def emit(root: fx.Node) -> None:
        """Copy `root` after the values it reads that are not copied yet (inputs first)."""
        stack = [root]
        while stack:
            node = stack[-1]
            if node in env:
                stack.pop()
                continue
            if node.op == "placeholder":
                raise PartitionError(
                    f"the backward needs {node.name} but it is not among the saved values"
                )
            missing = [a for a in recompute_inputs(info, node) if a not in env]
            if missing:
                stack.extend(reversed(missing))
                continue
            stack.pop()
            env[node] = copy_for_recompute(info, graph, node, env.__getitem__)
            computed.append(node)
            # NOTE: the elements of a multi-output op come right after it: the op's tuple
            # holds every element alive until its last element is taken (a recomputed batch
            # norm's mean, read late by its backward, kept the normalized output alive).
            for user in node.users:
                if (user.op == "call_function" and user.target is operator.getitem
                        and user in needed and user not in env):
                    env[user] = copy_for_recompute(info, graph, user, env.__getitem__)
                    computed.append(user)

    # NOTE: the gradient ops come in the joint graph's order; a forward value the backward
    # computes again comes right before its first reader, not all of them at the top (as the
    # forward's order would put them): each recomputed activation is alive only from there
    # to its last use. With every recomputation first, GPT-2 at budget 0.75 held every
    # layer's recomputed GELU from the backward's start to its end. Random ops keep their
    # joint order (the generator's state advances in that order).
    for node in info.gm.graph.nodes:
        if node in needed and node not in env and (
                not info.is_forward_computable(node) or is_random(node)):
            emit(node)
    for node in nodes_in(info.grad_outputs):
        emit(node)
    grads = [fx.node.map_arg(v, env.__getitem__) for v in info.grad_outputs]
    graph.output(tuple(grads))
    return graph, computed


def split(info: JointInfo, saved_nodes: Iterable[fx.Node]) -> Partition:
    """Build fw/bw for this saved set (ordered as in the joint graph, without duplicates).

    Values of checkpointed regions are not saved: their regions' inputs are, and the
    backward recomputes them (`checkpointed.recompute_checkpointed`).
    """
    saved = sorted(recompute_checkpointed(info, saved_nodes), key=info.order.__getitem__)
    for node in saved:
        if not info.is_forward_computable(node):
            raise PartitionError(f"cannot save {node.name}: it depends on a tangent")
        if not is_saveable(node):
            raise PartitionError(f"cannot save {node.name}: its value is not a tensor")
    copies = compact_copies(saved)
    fw_graph, fw_computed = _forward_graph(info, saved, copies)
    bw_graph, bw_computed = _backward_graph(info, saved, copies)
    fw_graph.lint()
    bw_graph.lint()
    fw = fx.GraphModule(info.gm, fw_graph, class_name="ForwardGraph")
    bw = fx.GraphModule(info.gm, bw_graph, class_name="BackwardGraph")
    fw.meta["saved_names"] = [n.name for n in saved]
    bw.meta["saved_names"] = [n.name for n in saved]
    bw_fw_nodes = tuple(n for n in bw_computed if info.is_forward_computable(n))
    recomputed = tuple(n for n in bw_fw_nodes if n in fw_computed)
    return Partition(
        fw=fw, bw=bw, saved=tuple(saved), recomputed=recomputed, bw_forward_nodes=bw_fw_nodes
    )


def saved_bytes(fw_graph: fx.GraphModule, num_fwd_outputs: int) -> int:
    """Bytes of the activations a forward graph saves for the backward.

    Counted as saved-tensor hooks count them: one storage once, however many saved values
    view it; saved primals (graph inputs such as parameters) and views of them are alive
    anyway and cost nothing extra.
    """
    outputs = [n for n in fw_graph.graph.nodes if n.op == "output"]
    flat = outputs[0].args[0]
    assert isinstance(flat, (tuple, list))
    return activation_bytes(v for v in flat[num_fwd_outputs:] if isinstance(v, fx.Node))


def activation_bytes(nodes: Iterable[fx.Node]) -> int:
    """`saved_bytes` for a saved set given as graph nodes: the bytes of their distinct
    storages (`storage_root`), primals' excluded, views `split` saves as compact copies
    at their own bytes (`compact.saved_storage_bytes`)."""
    return saved_storage_bytes(nodes)
