"""The generated Python wrapper: allocate buffers, call kernels and extern ATen ops in
order, free or reuse buffers after their last use, and return the outputs.

In: lowered buffers, scheduled steps, generated kernels. Out: Python source of
`def call(arg0, arg1, ...)` and the namespace it runs in; boxed (`aotgrad.boxed`: a
backward's saved activations freed after their last use), `def call(args)`, which takes its
inputs out of the list `args`, clears it and frees each input as the plan says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.codegen.cpp import CppKernel
from inductor.ir.checks import ERR_PARAM, ErrorSlots, new_error_slots, raise_kernel_error
from inductor.ir.layout import Layout
from inductor.ir.nodes import Buffer, BufferView, ExternKernel
from inductor.scheduler.fusion import FusedGroup, Step
from inductor.scheduler.memory import FRESH_OUTPUT_OPS, Allocation, MemoryPlan
from inductor.symbols import pyexpr, pysizes
from inductor.targets import Kernel, Target


def _reinterpret(t: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...],
                 offset: int) -> torch.Tensor:
    return t.as_strided(size, stride, t.storage_offset() + offset)


def _take_over(t: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """A new tensor over the whole storage of the dead buffer `t`, in other sizes and strides
    (the memory plan's reuse of the same extent). Not a view of `t` (no `_base`): it may be
    returned. NOTE: `detach` then an in-place restride makes no allocator call, unlike an
    empty tensor `set_` to the storage (~0.6 us less per reuse on the CPU)."""
    return t.detach().as_strided_(size, stride, 0)


def _match_layout(t: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...],
                  op: str, strict: bool = True) -> torch.Tensor:
    """`t` in the layout the kernels were generated for (`size`, `stride`).

    NOTE: generated kernels index an extern op's output with the strides its meta function
    promised; some ATen meta functions disagree with their kernels (torch 2.11's
    `_fft_r2c`), so a differing output is copied into the promised layout. A different size
    cannot be repaired: it raises rather than computing on the wrong elements (`strict`),
    or, for an output this graph only returns, is given back as it is (the workspace of
    `mkldnn_rnn_layer`, whose meta size follows grad mode, goes whole to its backward op).
    """
    if tuple(t.shape) != size:
        if not strict:
            return t
        raise RuntimeError(
            f"inductor: the ATen op {op} returned a tensor of size {tuple(t.shape)}, but its "
            f"meta function gave {size} when the graph was compiled; the compiled kernels "
            "would read the wrong elements")
    if all(n <= 1 or a == b for n, a, b in zip(size, t.stride(), stride)):
        return t
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


_VF = torch._C._VariableFunctions
# NOTE: extern ops called through torch's own Python binding instead of the OpOverload: the
# binding parses arguments in C++ (~3 us less per call than `OpOverload.__call__`). Only ops
# whose binding cannot resolve to another overload for the arguments the graph passes.
_DIRECT_EXTERNS: dict[Any, Any] = {
    op: getattr(_VF, name) for op, name in (
        (torch.ops.aten.mm.default, "mm"),
        (torch.ops.aten.addmm.default, "addmm"),
        (torch.ops.aten.bmm.default, "bmm"),
        (torch.ops.aten.baddbmm.default, "baddbmm"),
        (torch.ops.aten.convolution.default, "convolution"),
    ) if hasattr(_VF, name)
}


def _permutation(view: Layout, base: Layout) -> list[int] | None:
    """The dims order `p` with `base.permute(p) == view` (same offset), else None."""
    if view.offset != base.offset or len(view.size) != len(base.size) or len(view.size) < 2:
        return None
    remaining = list(zip(base.size, base.stride))
    order: list[int] = []
    used: set[int] = set()
    for dim in zip(view.size, view.stride):
        match = next((i for i, d in enumerate(remaining) if d == dim and i not in used), None)
        if match is None:
            return None
        used.add(match)
        order.append(match)
    return order


def _cpp_launch(kernel: CppKernel, checks: str) -> list[str]:
    """The call of a C++ kernel that takes sizes: data pointers, the size symbols' values
    (bound at the top of the wrapper) and the error slots."""
    args = ", ".join("err" if p == ERR_PARAM else p if p in kernel.sizes else f"{p}.data_ptr()"
                     for p in kernel.params)
    lines = [f"{kernel.name}({args})"]
    if kernel.checks:
        lines.append(f"if err[0]: raise_kernel_error(err, {checks})")
    return lines


@dataclass
class WrapperCode:
    source: str
    namespace: dict[str, Any] = field(default_factory=dict)


class WrapperGen:
    """The wrapper of one graph: `kernels` and `targets` by step position, buffer
    allocation and freeing as `memory` (the scheduler's plan) says."""

    def __init__(self, buffers: dict[str, Buffer], input_names: list[str], steps: list[Step],
                 kernels: dict[int, Kernel], targets: dict[int, Target],
                 memory: MemoryPlan, outputs: list[object],
                 constants: dict[str, torch.Tensor], prologue: list[str] | None = None,
                 boxed: bool = False) -> None:
        self.buffers = buffers
        self.boxed = boxed
        # NOTE: lines run first (a graph with symbolic sizes binds its size symbols from
        # the inputs and checks them, `inductor.dynamic`)
        self.prologue = list(prologue or [])
        self.targets = targets
        self.memory = memory
        self.cpp_names = {k.name for k in kernels.values() if isinstance(k, CppKernel)}
        self.input_names = input_names
        self.steps = steps
        self.kernels = kernels
        self.outputs = outputs
        self.ns: dict[str, Any] = {"empty_strided": torch.empty_strided,
                                   "reinterpret": _reinterpret, "torch": torch,
                                   "take_over": _take_over,
                                   "match_layout": _match_layout, "ErrorSlots": ErrorSlots,
                                   "raise_kernel_error": raise_kernel_error,
                                   "new_error_slots": new_error_slots}
        self.ns.update(constants)
        self.lines: list[str] = []
        self._const_count = 0
        self.allocated = memory.allocated  # buffers allocated by the wrapper (offset 0)
        self.strided_reads = self._strided_reads()
        self.returned = {o.buffer.name for o in outputs if isinstance(o, BufferView)}

    # -- rendering values --------------------------------------------------------------
    def constant(self, value: object) -> str:
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                return f"float('{value}')"
            return repr(value)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, sympy.Expr):
            return pyexpr(value)  # NOTE: a size expression over the size symbols
        name = f"c{self._const_count}"
        self._const_count += 1
        self.ns[name] = value
        return name

    def view(self, v: BufferView) -> str:
        if v.is_whole_buffer():
            return v.buffer.name
        lay = v.layout
        name = v.buffer.name
        order = _permutation(lay, v.buffer.layout)
        if order is not None:
            # NOTE: the buffer's dims reordered (a transposed weight); a permutation keeps
            # the tensor's storage offset, whatever it is.
            return f"{name}.t()" if order == [1, 0] else f"{name}.permute({order!r})"
        if name in self.allocated:
            # NOTE: allocated here by empty_strided: storage offset 0.
            return (f"{name}.as_strided({pysizes(lay.size)}, {pysizes(lay.stride)}, "
                    f"{pyexpr(lay.offset)})")
        return (f"reinterpret({name}, {pysizes(lay.size)}, {pysizes(lay.stride)}, "
                f"{pyexpr(lay.offset)})")

    def arg(self, value: object) -> str:
        if isinstance(value, BufferView):
            return self.view(value)
        if isinstance(value, list):
            return "[" + ", ".join(self.arg(v) for v in value) + "]"
        if isinstance(value, tuple):
            inner = ", ".join(self.arg(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return self.constant(value)

    def _strided_reads(self) -> set[str]:
        """Buffers whose strides the generated code relies on: read by a kernel or viewed by
        a `reinterpret`/`as_strided` (a whole-buffer argument of another extern op, or an
        output, is not; see `returned`)."""
        names: set[str] = set()

        def walk(value: object) -> None:
            if isinstance(value, BufferView) and not value.is_whole_buffer():
                names.add(value.buffer.name)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    walk(v)

        for step in self.steps:
            if isinstance(step, FusedGroup):
                names |= step.reads() - step.local
            else:
                walk(step.args)
                walk(list(step.kwargs.values()))
        walk(self.outputs)
        return names

    # -- the source --------------------------------------------------------------------
    def head(self) -> list[str]:
        """The first lines: the signature, and for a boxed call the inputs taken out of the
        list, which is cleared (the caller's references go with it). A prologue goes after
        these lines (`inductor.pipeline`)."""
        params = ", ".join(self.input_names)
        if not self.boxed:
            return [f"def call({params}):"]
        if not self.input_names:
            return ["def call(args):", "    args.clear()"]
        return ["def call(args):", f"    {params}{',' if len(self.input_names) == 1 else ''} = args",
                "    args.clear()"]

    def generate(self) -> WrapperCode:
        emit = self.lines.append
        self.lines.extend(self.head())
        for line in self.prologue:
            emit(f"    {line}")
        for name in self.memory.free_first:
            emit(f"    del {name}")
        if any(k.checks and k.name in self.cpp_names for k in self.kernels.values()):
            emit("    err = ErrorSlots()")
        for pos, step in enumerate(self.steps):
            mem = self.memory.steps[pos]
            if isinstance(step, FusedGroup):
                kernel = self.kernels[pos]
                for a in mem.allocate:
                    self._allocate(a)
                checks = self.constant(kernel.checks) if kernel.checks else ""
                launch = (_cpp_launch(kernel, checks)
                          if isinstance(kernel, CppKernel) and kernel.sizes
                          else self.targets[pos].launch(kernel, checks))
                for line in launch:
                    emit(f"    {line}")
                self.ns[kernel.name] = None  # filled by the caller with the loaded kernel
            else:
                self._extern(step)
            for name in mem.free:
                emit(f"    del {name}")
        outs = [self.arg(o) for o in self.outputs]
        emit(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        return WrapperCode("\n".join(self.lines) + "\n", self.ns)

    def _allocate(self, a: Allocation) -> None:
        lay = self.buffers[a.name].layout
        if a.reuse is not None:
            old = self.buffers[a.reuse].layout
            if (old.size, old.stride) == (lay.size, lay.stride):
                self.lines.append(f"    {a.name} = {a.reuse}; del {a.reuse}  # reuse")
            else:  # NOTE: the same extent of memory in other sizes and strides
                self.lines.append(
                    f"    {a.name} = take_over({a.reuse}, {pysizes(lay.size)}, "
                    f"{pysizes(lay.stride)}); del {a.reuse}  # reuse")
            return
        dtype = self.constant(lay.dtype)
        device = "" if lay.device.type == "cpu" else f", device={self.constant(lay.device)}"
        self.lines.append(
            f"    {a.name} = empty_strided({pysizes(lay.size)}, {pysizes(lay.stride)}, "
            f"dtype={dtype}"
            f"{device})")

    def _extern(self, step: ExternKernel) -> None:
        fn = self.constant(_DIRECT_EXTERNS.get(step.op, step.op))
        args = [self.arg(a) for a in step.args]
        args += [f"{k}={self.arg(v)}" for k, v in step.kwargs.items()]
        call = f"{fn}({', '.join(args)})"
        outs = step.outputs
        if len(outs) == 1 and outs[0].path == ():
            self.lines.append(f"    {outs[0].name} = {call}")
        else:
            self.lines.append(f"    {step.name} = {call}")
            for o in outs:
                sub = "".join(f"[{i}]" for i in o.path)
                self.lines.append(f"    {o.name} = {step.name}{sub}")
            self.lines.append(f"    del {step.name}")
        if step.op in FRESH_OUTPUT_OPS:
            return  # matmuls: fresh row-major outputs, their meta layout
        # NOTE: a convolution's output follows its input's memory format, and an input that
        # eager keeps channels-last (relu of a channels-last x) may be stored contiguous here
        # (buffers are realized in their own order): its output then differs from the meta's
        for o in outs:
            # NOTE: returned outputs include the tensors saved for the backward graph, whose
            # kernels index them with the strides promised here.
            strict = o.name in self.strided_reads
            if strict or o.name in self.returned:
                size, stride = pysizes(o.layout.size), pysizes(o.layout.stride)
                self.lines.append(
                    f"    if {o.name}.stride() != {stride} or {o.name}.shape != {size}: "
                    f"{o.name} = match_layout({o.name}, {size}, {stride}, "
                    f"{str(step.op)!r}{'' if strict else ', False'})")

