"""LoweringContext: walks an ATen FX graph, applies the lowering table, and collects the
buffers and kernels (in program order) that the scheduler consumes.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch
import torch.fx

from inductor import config
from inductor.ir.layout import Layout
from inductor.ir.loop_body import LoopBody, record_pointwise
from inductor.ir.nodes import (
    Buffer,
    BufferView,
    ComputedBuffer,
    ConstantBuffer,
    ExternKernel,
    ExternOutput,
    InputBuffer,
    Pointwise,
    TensorValue,
)
from inductor.ir.ops import ops
from inductor.lowering.node_meta import example_value
from inductor.lowering.registry import find_fallback, find_lowering
from inductor.lowering.view_maps import apply_view
from inductor.sizevars import Expr
from inductor.symbols import size_hint, sym_expr, sym_sizes

log = logging.getLogger("inductor.lowering")


class LoweringError(RuntimeError):
    pass


class LoweringContext:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> None:
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.buffers: dict[str, Buffer] = {}
        self.kernels: list[ComputedBuffer | ExternKernel] = []
        self.inputs: list[InputBuffer | None] = []
        self.input_names: list[str] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.outputs: list[object] = []
        self.extern_calls: Counter[str] = Counter()
        self.node: torch.fx.Node | None = None
        self._counter = 0
        self.seed: BufferView | None = None  # the per-call RNG seed (lowering/random.py)
        self.random_streams = 0
        self.env: dict[torch.fx.Node, Any] = {}

    # -- names and buffers -------------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        name = f"{prefix}{self._counter}"
        self._counter += 1
        return name

    def register(self, buf: Buffer) -> Buffer:
        self.buffers[buf.name] = buf
        return buf

    def buffer_dtype(self, name: str) -> torch.dtype:
        return self.buffers[name].layout.dtype

    # -- realization ---------------------------------------------------------------------
    def node_layout(self, value: Any, size: Sequence[int], dtype: torch.dtype,
                    device: torch.device) -> Layout:
        """Eager's strides when the current FX node's value has this size, else contiguous."""
        if isinstance(value, torch.Tensor) and sym_sizes(value.shape) == tuple(size):
            layout = Layout.of(value)
            if layout.is_dense():
                return Layout(layout.size, layout.stride, 0, dtype, device)
        return Layout.contiguous(size, dtype, device)

    def empty(self, layout: Layout) -> BufferView:
        """A buffer with no elements: allocated by the wrapper, never computed."""
        name = self.new_name()
        kernel = ExternKernel(name, torch.empty_strided, (layout.size, layout.stride),
                              {"dtype": layout.dtype, "device": layout.device},
                              None, aliases_inputs=False, origin="empty")
        out = ExternOutput(name, layout, kernel, ())
        kernel.outputs.append(out)
        self.register(out)
        self.kernels.append(kernel)
        return BufferView(out, layout)

    def realize(self, value: TensorValue, layout: Layout | None = None) -> BufferView:
        if isinstance(value, BufferView):
            return value
        if value.realized is not None and (layout is None or layout == value.realized.layout):
            return value.realized
        if layout is None and value.view_of is not None:
            # NOTE: store the base in its own order and view it, so an extern call gets
            # a strided view (e.g. a transpose) instead of a copy made in the view's order.
            base, size, mapping = value.view_of
            assert isinstance(base, (BufferView, Pointwise))
            viewed = apply_view(self.realize(base), size, mapping)  # type: ignore[arg-type]
            if isinstance(viewed, BufferView):
                value.realized = viewed
                return viewed
        if layout is None:
            layout = value.layout_hint or Layout.contiguous(value.size, value.dtype, value.device)
        if layout.numel() == 0:
            view = self.empty(layout)
            value.realized = view
            return view
        name = self.new_name()
        buf = ComputedBuffer(name, layout, None, self.node.name if self.node else "")
        # NOTE: iterate in the storage order of the output, so the innermost loop writes
        # contiguously (and vectorizes) even for permuted layouts.
        order = sorted(range(len(layout.size)), key=lambda d: -size_hint(layout.stride[d]))
        sizes = [layout.size[d] for d in order]

        def body(idx: list[Expr]) -> None:
            full: list[Expr] = [sympy.Integer(0)] * len(order)
            for j, d in enumerate(order):
                full[d] = idx[j]
            ops.store(name, layout.index(full), value.load(full))

        self.register(buf)
        buf.body = record_pointwise(sizes, body, self.buffer_dtype)
        self.kernels.append(buf)
        view = BufferView(buf, layout)
        if value.realized is None:
            value.realized = view
        return view

    def maybe_realize_shared(self, node: torch.fx.Node, value: Pointwise) -> TensorValue:
        """Realize a pointwise value with several users when inlining it would recompute
        too much (the inline-vs-store trade-off): more ops or reads than the thresholds, or
        a strided read along the dimension its stored layout keeps contiguous
        (`strided_inner_read`)."""
        users = len(node.users)
        if users <= 1:
            return value
        layout = self.node_layout(example_value(node), value.size, value.dtype, value.device)
        if value.op_count < 0:
            scratch = f"__probe{id(value)}"
            self.buffers[scratch] = Buffer(scratch, Layout.contiguous(
                value.size, value.dtype, value.device))
            dims: list[Expr] = []

            def probe(idx: list[Expr]) -> None:
                dims.extend(idx)
                ops.store(scratch, sympy.Integer(0), value.load(idx))

            body = record_pointwise(value.size, probe, self.buffer_dtype)
            dim = _contiguous_dim(layout)
            inner = dims[dim] if dim is not None else None
            del self.buffers[scratch]
            value.op_count = sum(1 for op in body.ops if op.kind not in ("constant",))
            loads = sum(1 for op in body.ops if op.kind == "load")
            # NOTE: a strided read (a transpose, a cat of a permuted piece, a clamped
            # index) inlined into several users is a gather in each of them, and in each
            # pass of a reduction (a layer norm's mean and variance, then its normalization):
            # ViT's patch embedding (the class token cat the transposed convolution output,
            # plus the position embedding) was gathered in 7 passes of 5 forward kernels.
            # Stored once, every user reads it contiguously. A read that is strided only in
            # the logical order (a channels-last input) is contiguous in the stored order too:
            # storing it would copy it unchanged.
            if (loads > config.options.realize_reads_threshold
                    or strided_inner_read(body, inner)):
                value.op_count = max(value.op_count, config.options.realize_opcount_threshold + 1)
        if value.op_count > config.options.realize_opcount_threshold or users > 8:
            return self.realize(value, layout)
        return value

    # -- the graph walk ------------------------------------------------------------------
    def run(self) -> None:
        placeholder_index = 0
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                ex = self.example_inputs[placeholder_index]
                placeholder_index += 1
                if isinstance(ex, torch.Tensor):
                    lay = Layout.of(ex)
                    lay = Layout(lay.size, lay.stride, 0, lay.dtype, lay.device)
                    inp = InputBuffer(f"arg{placeholder_index - 1}", lay, placeholder_index - 1)
                    self.register(inp)
                    self.inputs.append(inp)
                    self.input_names.append(inp.name)
                    self.env[node] = BufferView(inp, lay)
                else:
                    self.inputs.append(None)
                    self.input_names.append(f"arg{placeholder_index - 1}")
                    self.env[node] = sym_expr(ex)  # NOTE: a SymInt: its size expression
            elif node.op == "get_attr":
                t = getattr(self.gm, str(node.target))
                if isinstance(t, torch.Tensor):
                    name = self.new_name("const")
                    lay = Layout.of(t)
                    lay = Layout(lay.size, lay.stride, 0, lay.dtype, lay.device)
                    self.register(ConstantBuffer(name, lay, t))
                    self.constants[name] = t
                    self.env[node] = BufferView(self.buffers[name], lay)
                else:
                    self.env[node] = t
            elif node.op == "call_function":
                self.env[node] = value = self.lower_call(node)
                if isinstance(value, Pointwise) and value.layout_hint is None:
                    value.layout_hint = _channels_last_hint(example_value(node), value)
            elif node.op == "output":
                (result,) = node.args
                self.outputs = [
                    self.lower_output(self.env[n], example_value(n))
                    if isinstance(n, torch.fx.Node) else n
                    for n in _as_list(result)
                ]
            else:
                raise LoweringError(f"unsupported FX node kind {node.op}: {node.format_node()}")
        self.node = None

    def lower_call(self, node: torch.fx.Node) -> Any:
        args: Any = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs: Any = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        if node.target is operator.getitem:
            return args[0][args[1]]
        ev = example_value(node)
        if isinstance(ev, torch.SymInt):
            # NOTE: size arithmetic (sym_size, s0 * 4, ...): the value is its expression
            # over the size symbols, which the wrapper evaluates.
            return sym_expr(ev)
        fn = find_lowering(node.target)
        if fn is not None and not _supported_dtypes(node):
            fn = None
        result = None
        if fn is not None:
            result = fn(self, *args, **kwargs)
        if result is NotImplemented or fn is None:
            result = find_fallback()(self, node.target, args, kwargs)
        if isinstance(result, Pointwise):
            ev = example_value(node)
            if isinstance(ev, torch.Tensor) and ev.dtype != result.dtype:
                raise LoweringError(
                    f"lowering of {node.target} produced {result.dtype}, eager gives {ev.dtype}")
            result = self.maybe_realize_shared(node, result)
        return result

    def lower_output(self, value: Any, example: Any) -> object:
        if isinstance(value, Pointwise) and value.realized is None and value.source is not None:
            src = value.source
            want = self.node_layout(example, value.size, value.dtype, value.device)
            if (isinstance(src.buffer, ComputedBuffer) and src.layout.stride == want.stride
                    and src.dtype == value.dtype):
                # NOTE: an exact copy of an intermediate only the graph sees: return the
                # intermediate itself instead of copying it.
                return src
        if isinstance(value, Pointwise):
            return self.realize(value, self.node_layout(example, value.size, value.dtype,
                                                        value.device))
        return value

    def output_layouts(self) -> list[Any]:
        (result,) = next(n for n in self.gm.graph.nodes if n.op == "output").args
        return [example_value(n) if isinstance(n, torch.fx.Node) else n
                for n in _as_list(result)]


_KERNEL_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                  torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool}


def _supported_dtypes(node: torch.fx.Node) -> bool:
    """Kernels handle real dtypes only; anything else (complex, fp8, ...) runs in ATen."""
    values = [example_value(node)]
    for arg in node.all_input_nodes:
        values.append(example_value(arg))
    for v in values:
        for t in v if isinstance(v, (tuple, list)) else [v]:
            if isinstance(t, torch.Tensor) and t.dtype not in _KERNEL_DTYPES:
                return False
    return True


def _as_list(result: Any) -> list[Any]:
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def _channels_last_hint(meta: Any, value: Pointwise) -> Layout | None:
    """The channels-last layout eager gives this node's value, if it has one.

    NOTE: a value stored in its own (contiguous) order where eager has it channels-last
    makes the convolution that reads it return contiguous where its meta says
    channels-last, and every conversion between the two is a copy: channels-last values
    (the user's channels-last models, `layout_opt`'s graphs) are stored as eager stores
    them. Other permuted layouts keep the contiguous default."""
    if (not isinstance(meta, torch.Tensor) or meta.dim() != 4 or meta.is_contiguous()
            or not meta.is_contiguous(memory_format=torch.channels_last)):
        return None
    if not all(isinstance(n, int) for n in (*meta.shape, *meta.stride())):
        return None
    if tuple(meta.shape) != tuple(value.size) or meta.dtype != value.dtype:
        return None
    return Layout(tuple(meta.shape), tuple(meta.stride()), 0, value.dtype, value.device)


def _contiguous_dim(layout: Layout) -> int | None:
    """The dimension of `layout` whose stride is 1 (None: none of more than one element)."""
    for d, (size, stride) in enumerate(zip(layout.size, layout.stride)):
        if stride == 1 and size != 1:
            return d
    return None


def strided_inner_read(body: LoopBody, inner: Expr | None) -> bool:
    """Whether a load of `body` steps by other than 0 or 1 elements (or by an amount that
    depends on the index, as a clamp or a modulo does) along loop variable `inner` (that of
    the dimension the value's stored layout keeps contiguous): a read that inlining repeats
    as a gather in every user of the value, and that storing the value makes contiguous."""
    if not isinstance(inner, sympy.Symbol):
        return False
    for _, index in body.reads():
        if inner not in index.free_symbols:
            continue
        step = sympy.expand(index.subs(inner, inner + 1) - index)
        if not step.is_Integer or abs(int(step)) > 1:
            return True
    return False
