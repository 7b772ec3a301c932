"""Half-precision matmuls whose operands or output rows are not 16-byte aligned, padded on
targets that want it.

cuBLAS picks its kernels by the alignment of the leading dimensions. A float16/bfloat16 `mm`
with a leading dimension that is not a multiple of 8 elements (GPT-2's language-model head:
50257 vocabulary columns) gets a slow fallback kernel: on an H100, 1.65 ms per call of GPT-2's
head in bfloat16 against 0.23 ms for the same product with 50264 columns. Here such an
`mm(a, b)` computes on aligned copies instead:
- an unaligned inner size `k`: `a`'s columns and `b`'s rows padded with zeros to a multiple
  of 8 (the padded terms are zero products, so the sums are the same products); each
  operand is padded in its own layout (a transposed weight stays transposed);
- an unaligned output width `n`: `b`'s columns padded with zeros, and the result cut back to
  `n` columns, copied out to the layout the graph had (a kernel of its own, or fused into a
  pointwise consumer);
- an operand whose own layout is unaligned (a transposed view of a matrix of odd width, as
  the backward of the head reads its gradient): copied to a contiguous one.
A target says whether it wants this (`Target.pads_matmuls`: Triton yes; the C++ target's
BLAS calls are left as measured).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import fx
from torch.fx.node import Argument

from inductor.graph_copy import copy_graph

aten = torch.ops.aten

ALIGN = 8  # NOTE: elements of a 2-byte dtype in 16 bytes
MIN_WORK = 1 << 24  # NOTE: m * n * k below this is not worth the copies


def _value(node: object) -> torch.Tensor | None:
    if not isinstance(node, fx.Node):
        return None
    val = node.meta.get("val", node.meta.get("example_value"))
    return val if isinstance(val, torch.Tensor) else None


def _unaligned(t: torch.Tensor) -> bool:
    """Whether cuBLAS would see `t` (2-D) with a leading dimension or start that is not a
    multiple of 8 elements (or not as a matrix with a unit stride at all)."""
    rows, cols = t.shape
    s0, s1 = t.stride()
    if s1 == 1 or cols == 1:
        lead = s0
    elif s0 == 1 or rows == 1:
        lead = s1
    else:
        return True
    return lead % ALIGN != 0 or t.storage_offset() % ALIGN != 0


def _plan(node: fx.Node, wanted: Callable[[torch.device], bool]) -> tuple[bool, ...] | None:
    """For a 2-D half-precision `mm` with enough work on a device whose target wants it:
    (pad k, pad n, copy a, copy b) when any is needed, else None."""
    if node.op != "call_function" or node.target is not aten.mm.default or node.kwargs:
        return None
    out, a, b = _value(node), *(_value(x) for x in node.args)
    if out is None or a is None or b is None:
        return None
    if out.dtype not in (torch.float16, torch.bfloat16) or out.dim() != 2:
        return None
    m, n = out.shape
    k = a.shape[1]
    if not all(isinstance(d, int) for d in (m, n, k)) or m * n * k < MIN_WORK:
        return None
    pad_k, pad_n = k % ALIGN != 0, n % ALIGN != 0
    plan = (pad_k, pad_n, not pad_k and _unaligned(a), not (pad_k or pad_n) and _unaligned(b))
    return plan if any(plan) and wanted(out.device) else None


def pad_matmuls(gm: fx.GraphModule, wanted: Callable[[torch.device], bool]) -> fx.GraphModule:
    """`gm` with each `mm(a, b)` that `_plan` picks computed on aligned copies of its
    operands (cut back to its own size): a copy of `gm` when any changed, else `gm`."""
    if not any(_plan(n, wanted) for n in gm.graph.nodes):
        return gm
    graph = copy_graph(gm)
    for node in list(graph.nodes):
        plan = _plan(node, wanted)
        if plan is None:
            continue
        pad_k, pad_n, copy_a, copy_b = plan
        a, b = node.args
        assert isinstance(a, fx.Node) and isinstance(b, fx.Node)
        val = _value(node)
        assert val is not None
        n = val.shape[1]
        k_extra = -_shape(a)[1] % ALIGN
        n_extra = -n % ALIGN
        with graph.inserting_before(node):
            if pad_k:
                a = _pad(graph, a, 0, k_extra)
            elif copy_a:
                a = _contiguous(graph, a)
            if pad_k or pad_n:
                b = _pad(graph, b, k_extra, n_extra)
            elif copy_b:
                b = _contiguous(graph, b)
            product = _call(graph, aten.mm.default, (a, b),
                            aten.mm.default(_value(a), _value(b)))
            result = product
            if pad_n:
                kept = _call(graph, aten.slice.Tensor, (product, 1, 0, n),
                             aten.slice.Tensor(_value(product), 1, 0, n))
                result = graph.call_function(aten.clone.default, (kept,),
                                             {"memory_format": torch.contiguous_format})
            result.meta = dict(node.meta)  # NOTE: the original product's size and strides
        node.replace_all_uses_with(result)
        graph.erase_node(node)
    return fx.GraphModule(gm, graph)


def _shape(node: fx.Node) -> tuple[int, ...]:
    val = _value(node)
    assert val is not None
    return tuple(val.shape)


def _pad(graph: fx.Graph, node: fx.Node, rows: int, cols: int) -> fx.Node:
    """The matrix `node` with `rows` and `cols` more rows and columns of zeros, padded in
    its own layout: a column-major operand (`w.t()` of a row-major `w`, the head's weight)
    is padded as `w` and transposed back, so the copy reads and writes rows in order (a
    transposing copy of GPT-2's 50257 x 768 embedding ran at 0.17 of copy bandwidth) and
    cuBLAS reads the result transposed, with an aligned leading dimension."""
    val = _value(node)
    assert val is not None
    if val.stride(0) == 1 and val.stride(1) != 1 and val.shape[0] > 1:
        flipped = _call(graph, aten.permute.default, (node, [1, 0]),
                        aten.permute.default(val, [1, 0]))
        padded = _pad(graph, flipped, cols, rows)
        return _call(graph, aten.permute.default, (padded, [1, 0]),
                     aten.permute.default(_value(padded), [1, 0]))
    pad = [0, cols, 0, rows]
    return _call(graph, aten.constant_pad_nd.default, (node, pad, 0.0),
                 aten.constant_pad_nd.default(val, pad, 0.0))


def _contiguous(graph: fx.Graph, node: fx.Node) -> fx.Node:
    val = _value(node)
    assert val is not None
    copy = graph.call_function(aten.clone.default, (node,),
                               {"memory_format": torch.contiguous_format})
    copy.meta["val"] = aten.clone.default(val, memory_format=torch.contiguous_format)
    return copy


def _call(graph: fx.Graph, target: torch._ops.OpOverload, args: tuple[Argument, ...],
          val: torch.Tensor) -> fx.Node:
    node = graph.call_function(target, args)
    node.meta["val"] = val
    return node
