"""A tensor produced or read during tracing: an FX node plus its fake example value."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.fx
from guards.sources import Source

from capture.graph_break import GraphBreakKind, unsupported
from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder


class TensorValue(Value):
    """A tensor in the graph: `node` is its FX node, `fake` its FakeTensor."""

    __slots__ = ("cls", "fake", "node")

    def __init__(
        self,
        node: torch.fx.Node,
        fake: torch.Tensor,
        source: Source | None = None,
        cls: type = torch.Tensor,
    ) -> None:
        super().__init__(source)
        self.node = node
        self.fake = fake
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def unpack(self) -> list[Value]:
        # NOTE: `for row in x` is traced by `interp.builtins_table.iterate` (one getitem
        # per row); a tensor reaching `unpack` directly is not taken apart here.
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT,
            "iterating over a tensor (use an explicit range over tensor.shape[0])",
        )

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_graph_output(self)

    def describe(self) -> str:
        shape = tuple(self.fake.shape)
        return f"Tensor({self.node.name}, {shape}, {self.fake.dtype})"
