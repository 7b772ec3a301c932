"""Half-precision matmuls whose output rows are not 16-byte aligned, padded on targets that
want it.

cuBLAS picks its kernels by the alignment of the leading dimensions. A float16/bfloat16
`mm` whose output has a column count that is not a multiple of 8 (GPT-2's language-model
head: 50257 vocabulary columns) gets a slow fallback kernel: on an H100, 1.65 ms per call of
GPT-2's head in bfloat16 against 0.23 ms for the same product with 50264 columns. Here such an
`mm(a, b)` becomes `mm(a, pad(b))` with `b`'s columns padded with zeros to a multiple of 8,
and the result is the first `n` columns, copied out to the layout the graph had (a kernel of
its own, or fused into a pointwise consumer). The padded columns are zeros times `a`, so the
kept columns are the same products. A target says whether it wants this
(`Target.pads_matmuls`: Triton yes; the C++ target's BLAS calls are left as measured).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import fx
from torch.fx.node import Argument

aten = torch.ops.aten

ALIGN = 8  # NOTE: elements of a 2-byte dtype in 16 bytes
MIN_WORK = 1 << 24  # NOTE: m * n * k below this is not worth an extra copy


def _value(node: object) -> torch.Tensor | None:
    if not isinstance(node, fx.Node):
        return None
    val = node.meta.get("val", node.meta.get("example_value"))
    return val if isinstance(val, torch.Tensor) else None


def _candidate(node: fx.Node, wanted: Callable[[torch.device], bool]) -> bool:
    """A 2-D half-precision `mm` with enough work whose column count is not aligned, on a
    device whose target wants it padded; its operands' values are known."""
    if node.op != "call_function" or node.target is not aten.mm.default or node.kwargs:
        return False
    out, a, b = _value(node), *(_value(x) for x in node.args)
    if out is None or a is None or b is None:
        return False
    if out.dtype not in (torch.float16, torch.bfloat16) or out.dim() != 2:
        return False
    m, n = out.shape
    k = a.shape[1]
    if not all(isinstance(d, int) for d in (m, n, k)) or n % ALIGN == 0:
        return False
    return m * n * k >= MIN_WORK and wanted(out.device)


def pad_matmuls(gm: fx.GraphModule, wanted: Callable[[torch.device], bool]) -> fx.GraphModule:
    """`gm` with each candidate `mm(a, b)` (see `_candidate`) computed on `b` padded to a
    multiple of 8 columns and cut back: a copy of `gm` when any changed, else `gm` itself."""
    if not any(_candidate(n, wanted) for n in gm.graph.nodes):
        return gm
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    for old, new in env.items():
        new.meta = dict(old.meta)
    for node in list(graph.nodes):
        if not _candidate(node, wanted):
            continue
        a, b = node.args
        val, bval = _value(node), _value(b)
        assert val is not None and bval is not None
        n = val.shape[1]
        pad = -n % ALIGN
        with graph.inserting_before(node):
            padded_b = _call(graph, aten.constant_pad_nd.default, (b, [0, pad], 0.0),
                             aten.constant_pad_nd.default(bval, [0, pad], 0.0))
            product = _call(graph, aten.mm.default, (a, padded_b),
                            aten.mm.default(_value(a), padded_b.meta["val"]))
            kept = _call(graph, aten.slice.Tensor, (product, 1, 0, n),
                         aten.slice.Tensor(product.meta["val"], 1, 0, n))
            copied = graph.call_function(aten.clone.default, (kept,),
                                         {"memory_format": torch.contiguous_format})
            copied.meta = dict(node.meta)  # NOTE: the original product's size and strides
        node.replace_all_uses_with(copied)
        graph.erase_node(node)
    return fx.GraphModule(gm, graph)


def _call(graph: fx.Graph, target: torch._ops.OpOverload, args: tuple[Argument, ...],
          val: torch.Tensor) -> fx.Node:
    node = graph.call_function(target, args)
    node.meta["val"] = val
    return node
