"""IR nodes: buffers (graph inputs, constants, computed by kernels, produced by extern ATen
calls) and the two lowering-time tensor values (a strided view of a buffer, or an
unrealized pointwise inner function that consumers inline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from inductor.ir.layout import Layout
from inductor.ir.loop_body import LoopBody
from inductor.ir.ops import Ref, ops
from inductor.sizevars import Expr

Loader = Callable[[Sequence[Expr]], Ref]


@dataclass(eq=False, slots=True)
class Buffer:
    name: str
    layout: Layout

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype


@dataclass(eq=False, slots=True)
class InputBuffer(Buffer):
    position: int = 0


@dataclass(eq=False, slots=True)
class ConstantBuffer(Buffer):
    value: torch.Tensor | None = None


@dataclass(eq=False, slots=True)
class ComputedBuffer(Buffer):
    """Written by one generated kernel; `body` stores into `self.name`."""

    body: LoopBody | None = None
    origin: str = ""


@dataclass(eq=False, slots=True)
class MatmulBuffer(ComputedBuffer):
    """A matmul (`mm`, `addmm`, `bmm`) that a target may generate as a template kernel.

    `body` is the matmul as a reduction over k (`alpha * sum(a * b) + beta * bias`, stored
    in the output's dtype), so any code generator computes it right; the operands are kept
    to build the template's tiled loads and the ATen call it is weighed against (`op`)."""

    a: BufferView | None = None
    b: BufferView | None = None
    bias: BufferView | None = None
    alpha: float = 1.0
    beta: float = 1.0
    op: object = None


@dataclass(eq=False, slots=True)
class ExternOutput(Buffer):
    kernel: ExternKernel | None = None
    path: tuple[int, ...] = ()


@dataclass(eq=False, slots=True)
class ExternKernel:
    """A call to an ATen op (matmul, convolution, or anything without a lowering)."""

    name: str
    op: object
    args: tuple[object, ...]
    kwargs: dict[str, object]
    example: object  # the FX node's example value (tensor / tuple structure)
    outputs: list[ExternOutput] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    aliases_inputs: bool = False
    origin: str = ""


@dataclass(eq=False, slots=True)
class BufferView:
    """A strided view of a realized buffer: loads compute the address from `layout`."""

    buffer: Buffer
    layout: Layout

    @property
    def size(self) -> tuple[int, ...]:
        return self.layout.size

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype

    @property
    def device(self) -> torch.device:
        return self.layout.device

    def load(self, index: Sequence[Expr]) -> Ref:
        return ops.load(self.buffer.name, self.layout.index(index))

    def is_whole_buffer(self) -> bool:
        return self.layout == self.buffer.layout


@dataclass(eq=False, slots=True)
class Pointwise:
    """An unrealized elementwise value; consumers inline `fn` into their own loops."""

    size: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    fn: Loader
    op_count: int = -1  # filled lazily by lowering's realization heuristic
    realized: BufferView | None = None  # once stored, consumers load the buffer
    source: BufferView | None = None  # set when the value is an exact copy of a view
    view_of: tuple[object, ...] | None = None  # (base, size, index map) for views
    layout_hint: Layout | None = None  # realized in this dense layout (channels-last values)

    def load(self, index: Sequence[Expr]) -> Ref:
        if self.realized is not None:
            return self.realized.load(index)
        return self.fn(index)


TensorValue = BufferView | Pointwise
