"""A matmul's bias added in the kernel that consumes its output, on targets that prefer it.

`addmm(bias, a, b)` is one BLAS call, but on a GPU cuBLAS picks other (often slower) kernels
for a GEMM with a bias epilogue than for the plain product: in ViT-small inference on an
H200 the bias GEMMs took 73 ms per 10 steps against 67 ms for the same products as `mm`. When
every user of the result is a pointwise op, and so fuses into a generated kernel anyway,
`add(mm(a, b), bias)` costs no extra kernel: the bias add joins that kernel. A target says
whether it wants this (`Target.unfuses_matmul_bias`: Triton yes; the C++ target's BLAS calls
keep their bias, as its numbers were measured).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import fx

from inductor.graph_copy import copy_graph

aten = torch.ops.aten


_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _pointwise_users(node: fx.Node) -> bool:
    """Whether every use of `node` is a pointwise op, seen through reshapes (a linear layer
    on a batch of sequences reshapes its product back)."""
    for user in node.users:
        target = user.target
        if user.op != "call_function":
            return False
        if target in _VIEWS:
            if not _pointwise_users(user):
                return False
        elif not (isinstance(target, torch._ops.OpOverload)
                  and torch.Tag.pointwise in target.tags):
            return False
    return True


def _candidate(node: fx.Node, wanted: Callable[[torch.device], bool]) -> bool:
    """An `addmm` with the default scales whose users are all pointwise (through reshapes),
    on a device whose target wants the bias unfused."""
    if node.op != "call_function" or node.target is not aten.addmm.default:
        return False
    if node.kwargs or len(node.args) != 3 or not node.users:
        return False
    val = node.meta.get("example_value", node.meta.get("val"))
    if not isinstance(val, torch.Tensor) or not val.is_floating_point():
        return False
    return wanted(val.device) and _pointwise_users(node)


def unfuse_matmul_bias(gm: fx.GraphModule,
                       wanted: Callable[[torch.device], bool]) -> fx.GraphModule:
    """`gm` with each candidate `addmm(bias, a, b)` (see `_candidate`) as
    `add(mm(a, b), bias)`: a copy of `gm` when any changed, else `gm` itself."""
    if not any(_candidate(n, wanted) for n in gm.graph.nodes):
        return gm
    graph = copy_graph(gm)
    for node in list(graph.nodes):
        if not _candidate(node, wanted):
            continue
        bias, a, b = node.args
        with graph.inserting_before(node):
            mm = graph.call_function(aten.mm.default, (a, b))
            mm.meta = dict(node.meta)  # NOTE: the product has the sum's size, dtype, strides
            add = graph.call_function(aten.add.Tensor, (mm, bias))
            add.meta = dict(node.meta)
        node.replace_all_uses_with(add)
        graph.erase_node(node)
    return fx.GraphModule(gm, graph)
