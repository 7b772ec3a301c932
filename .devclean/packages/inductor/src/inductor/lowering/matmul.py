"""Matmuls a target generates itself: the extern `mm`/`addmm`/`bmm` calls of a lowered graph
that a target wants as template kernels become `MatmulBuffer`s (the matmul as a reduction
over k, with its operands), so the scheduler fuses their pointwise consumers into them.

In: the lowered kernels (program order) and buffers. Out: the same list with each accepted
extern matmul replaced, in place, by a `MatmulBuffer` of the same name and layout. A call
that does not fit (other dtypes, symbolic or tiny sizes, a non-dense output) stays extern.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import torch

from inductor.ir.layout import contiguous_strides
from inductor.ir.loop_body import record_reduction
from inductor.ir.nodes import Buffer, BufferView, ComputedBuffer, ExternKernel, MatmulBuffer
from inductor.ir.ops import ops
from inductor.lowering.common import broadcast_index
from inductor.sizevars import Expr, is_static

aten = torch.ops.aten

MATMUL_OPS = (aten.mm.default, aten.addmm.default, aten.bmm.default)
TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MIN_DIM = 16  # NOTE: smaller M, N or K: ATen's call (a tile would be mostly masked)

Kernels = list[ComputedBuffer | ExternKernel]


def _static_view(v: object) -> bool:
    if not isinstance(v, BufferView):
        return False
    lay = v.layout
    return all(is_static(s) for s in (*lay.size, *lay.stride, lay.offset))


def _operands(k: ExternKernel) -> tuple[BufferView, BufferView, BufferView | None,
                                         float, float] | None:
    """(a, b, bias, alpha, beta) of a matmul call we can generate, else None."""
    if k.op is aten.addmm.default:
        if len(k.args) != 3 or set(k.kwargs) - {"alpha", "beta"}:
            return None
        bias, a, b = k.args
        alpha, beta = k.kwargs.get("alpha", 1), k.kwargs.get("beta", 1)
        if not isinstance(alpha, (int, float)) or not isinstance(beta, (int, float)):
            return None
        if not _static_view(bias):
            return None
        assert isinstance(bias, BufferView)
        return (a, b, bias if beta != 0 else None, float(alpha),  # type: ignore[return-value]
                float(beta)) if _static_view(a) and _static_view(b) else None
    if len(k.args) != 2 or k.kwargs:
        return None
    a, b = k.args
    if not (_static_view(a) and _static_view(b)):
        return None
    assert isinstance(a, BufferView) and isinstance(b, BufferView)
    return a, b, None, 1.0, 1.0


def matmul_fits(k: ExternKernel) -> bool:
    """Whether `k` is a matmul a template computes exactly as ATen does (one dense output of
    static size, operands and bias of one floating dtype on one device, no dim below
    `MIN_DIM`)."""
    if k.op not in MATMUL_OPS or len(k.outputs) != 1 or k.outputs[0].path != ():
        return False
    found = _operands(k)
    if found is None:
        return False
    a, b, bias, _, _ = found
    out = k.outputs[0].layout
    if not all(is_static(s) for s in out.size) or out.offset != 0:
        return False
    if tuple(out.stride) != tuple(contiguous_strides(out.size)):
        return False
    views = [a, b] + ([bias] if bias is not None else [])
    if any(v.dtype != out.dtype or v.device != out.device for v in views):
        return False
    if out.dtype not in TEMPLATE_DTYPES:
        return False
    batched = k.op is aten.bmm.default
    if len(a.size) != 2 + batched or len(b.size) != 2 + batched:
        return False
    m, kk = a.size[-2:]
    n = b.size[-1]
    if bias is not None and (len(bias.size) > 2 or any(
            s not in (1, o) for s, o in zip(reversed(bias.size), reversed(out.size)))):
        return False
    return min(int(m), int(n), int(kk)) >= MIN_DIM


def matmul_buffer(k: ExternKernel, buffer_dtype: Callable[[str], torch.dtype]) -> MatmulBuffer:
    """The `MatmulBuffer` standing for the extern matmul `k` (which `matmul_fits`)."""
    found = _operands(k)
    assert found is not None
    a, b, bias, alpha, beta = found
    out = k.outputs[0]
    lay = out.layout
    name = out.name
    size = tuple(int(s) for s in lay.size)
    reduce_size = [int(a.size[-1])]

    def body(idx: list[Expr], ridx: list[Expr]) -> None:
        (r,) = ridx
        lead = idx[:-2]
        m, n = idx[-2:]
        av = ops.to_dtype(a.load([*lead, m, r]), torch.float32)
        bv = ops.to_dtype(b.load([*lead, r, n]), torch.float32)
        acc = ops.reduction("sum", ops.mul(av, bv))
        if alpha != 1.0:
            acc = ops.mul(acc, ops.constant(alpha, torch.float32))
        if bias is not None:
            cv = ops.to_dtype(bias.load(broadcast_index(bias.size, size, idx)), torch.float32)
            if beta != 1.0:
                cv = ops.mul(cv, ops.constant(beta, torch.float32))
            acc = ops.add(acc, cv)
        ops.store_reduction(name, lay.index(idx), acc)

    loop = record_reduction(size, reduce_size, body, buffer_dtype)
    return MatmulBuffer(name, lay, loop, k.origin, a=a, b=b, bias=bias, alpha=alpha,
                        beta=beta, op=k.op)


def matmul_templates(kernels: Sequence[ComputedBuffer | ExternKernel],
                     buffers: dict[str, Buffer], wants: Callable[[ExternKernel], bool],
                     extern_calls: Counter[str]) -> Kernels:
    """`kernels` with each extern matmul that fits and that `wants` (the target's and the
    options' say) replaced by its `MatmulBuffer` (also in `buffers`; no longer counted in
    `extern_calls`)."""
    out: Kernels = []
    for k in kernels:
        if isinstance(k, ExternKernel) and matmul_fits(k) and wants(k):
            mb = matmul_buffer(k, lambda n: buffers[n].layout.dtype)
            buffers[mb.name] = mb
            out.append(mb)
            extern_calls[str(k.op)] -= 1
            if extern_calls[str(k.op)] <= 0:
                del extern_calls[str(k.op)]
        else:
            out.append(k)
    return out


def matmul_dims(mb: MatmulBuffer) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a `MatmulBuffer` (batch 1 for mm/addmm)."""
    assert mb.a is not None and mb.b is not None
    batch = int(mb.a.size[0]) if len(mb.a.size) == 3 else 1
    m, k = (int(s) for s in mb.a.size[-2:])
    return batch, m, int(mb.b.size[-1]), k
