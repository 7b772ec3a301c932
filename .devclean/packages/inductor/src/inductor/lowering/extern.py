"""Extern kernels: matmul, convolution and every op without a lowering run as ATen calls
from the wrapper, on realized inputs. Calls are counted (and logged) per op.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from inductor.ir.layout import Layout
from inductor.ir.nodes import BufferView, ExternKernel, ExternOutput, Pointwise
from inductor.lowering.context import LoweringContext
from inductor.lowering.node_meta import example_value
from inductor.lowering.registry import fallback_lowering, lowering

log = logging.getLogger("inductor.extern")
aten = torch.ops.aten


def _realize_args(ctx: LoweringContext, value: Any, reads: list[str]) -> Any:
    if isinstance(value, Pointwise):
        value = ctx.realize(value)
    if isinstance(value, BufferView):
        reads.append(value.buffer.name)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_realize_args(ctx, v, reads) for v in value)
    return value


def _storages(value: Any) -> set[int]:
    found: set[int] = set()
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.fx.Node):
            leaf = example_value(leaf)
        for t in pytree.tree_leaves(leaf):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                found.add(t.untyped_storage()._cdata)
    return found


def _aliases(op: object, node: torch.fx.Node, ev: Any) -> bool:
    """Whether an output of the call may share memory with an input.

    The schema's alias annotations say so for views; some ops return their input without
    one (`conj_physical`, `resolve_conj` and `resolve_neg` of a real tensor return `self`),
    which the example values show: the output's (fake) storage is an input's.
    """
    schema = getattr(op, "_schema", None)
    if schema is None or any(r.alias_info is not None for r in schema.returns):
        return True
    return bool(_storages(ev) & _storages((node.args, node.kwargs)))


@fallback_lowering
def fallback(ctx: LoweringContext, op: object, args: Any, kwargs: Any) -> Any:
    """Lower `op(*args, **kwargs)` to an extern ATen call whose outputs are buffers."""
    reads: list[str] = []
    rargs = _realize_args(ctx, tuple(args), reads)
    rkwargs = {k: _realize_args(ctx, v, reads) for k, v in kwargs.items()}
    assert ctx.node is not None
    ev = example_value(ctx.node)
    name = ctx.new_name("buf")
    kernel = ExternKernel(name, op, rargs, rkwargs, ev, reads=reads,
                          aliases_inputs=_aliases(op, ctx.node, ev), origin=ctx.node.name)
    ctx.extern_calls[str(op)] += 1
    log.debug("extern call %s for node %s", op, ctx.node.name)

    returns = getattr(getattr(op, "_schema", None), "returns", [])

    def wrap(value: Any, path: tuple[int, ...]) -> Any:
        if value is None and len(path) == 1 and path[0] < len(returns) and str(
                returns[path[0]].type) == "Tensor":
            # NOTE: the fake kernel gave no tensor where the real op returns one (e.g. the
            # mkldnn RNN workspace): keep the real one so extern consumers receive it.
            value = torch.empty((0,))
        if isinstance(value, torch.Tensor):
            lay = Layout.of(value)
            lay = Layout(lay.size, lay.stride, 0, lay.dtype, lay.device)
            out_name = name if not path else name + "_" + "_".join(map(str, path))
            out = ExternOutput(out_name, lay, kernel, path)
            ctx.register(out)
            kernel.outputs.append(out)
            return BufferView(out, lay)
        if isinstance(value, (list, tuple)):
            return type(value)(wrap(v, path + (i,)) for i, v in enumerate(value))
        return value

    result = wrap(ev, ())
    ctx.kernels.append(kernel)
    return result


@lowering(aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
          aten.convolution.default, aten.convolution_backward.default)
def _extern_always(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    assert ctx.node is not None
    return fallback(ctx, ctx.node.target, args, kwargs)


_SYMBOLIC = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)


def aten_only_reason(gm: torch.fx.GraphModule, example_inputs: Sequence[object],
                     has_target: Callable[[torch.device], bool] | None = None) -> str | None:
    """Why a whole graph runs op by op in ATen instead of being lowered, or None.

    Values with data-dependent sizes or contents (unbacked symbols: `nonzero`, `unique`,
    `item`, `masked_select`) have no static layout for buffers and loops, and sparse
    tensors have no strides; such graphs are run by their ATen ops (each one an extern
    call), never refused. So are graphs with tensors on a device no target generates
    kernels for (`has_target`, the device table's answer; without it, the CPU only): CUDA
    without Triton installed, meta, ...
    """
    values: list[object] = list(example_inputs)
    values += [node.meta.get("example_value", node.meta.get("val")) for node in gm.graph.nodes]
    for v in values:
        for leaf in pytree.tree_leaves(v):
            if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
                return f"a {leaf.layout} tensor"
            if isinstance(leaf, torch.Tensor) and not (
                    has_target(leaf.device) if has_target else leaf.device.type == "cpu"):
                # NOTE: handing a GPU pointer to a C++ kernel would crash.
                return f"a tensor on {leaf.device} (no kernels are generated for it here)"
            if isinstance(leaf, _SYMBOLIC) and free_unbacked_symbols(leaf):
                return "data-dependent sizes or values (unbacked symbols)"
    return None


def aten_op_counts(gm: torch.fx.GraphModule) -> dict[str, int]:
    """The ATen calls a graph run op by op makes (what `extern_calls` reports)."""
    counts: Counter[str] = Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            counts[str(node.target)] += 1
    return dict(counts)
