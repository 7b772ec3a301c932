"""A data-dependent Python number: `t.item()`, a size of `nonzero(x)`, arithmetic on them.

Its example value is an unbacked `SymInt`/`SymFloat`/`SymBool` of the frame's ShapeEnv; the
number is computed by an FX node at run time. It is never turned into a constant or a guard:
branching on it is unsupported (see `capture.interp.operators.truth`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.fx

from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


class SymNodeValue(Value):
    """A Python number computed in the graph: `node` is its FX node, `fake` the symbolic
    example value (a `torch.SymInt`, `SymFloat` or `SymBool`)."""

    __slots__ = ("fake", "node")

    def __init__(self, node: torch.fx.Node, fake: torch.SymInt | torch.SymFloat | torch.SymBool
                 ) -> None:
        super().__init__(None)
        self.node = node
        self.fake = fake

    def python_type(self) -> type:
        if isinstance(self.fake, torch.SymInt):
            return int
        if isinstance(self.fake, torch.SymFloat):
            return float
        return bool

    def reconstruct(self, cg: CodeBuilder) -> None:
        cg.load_graph_output(self)

    def describe(self) -> str:
        return f"Symbolic({self.node.name}: {self.python_type().__name__} = {self.fake})"


def static_value(fake: object) -> tuple[bool, object]:
    """(True, number) when a symbolic value's expression is a constant (no symbol left)."""
    if not isinstance(fake, SYMBOLIC_TYPES):
        return True, fake
    value = fake.node.maybe_as_bool() if isinstance(fake, torch.SymBool) else (
        fake.node.maybe_as_int() if isinstance(fake, torch.SymInt) else
        fake.node.maybe_as_float())
    if value is None:
        return False, None
    return True, value


class SymSliceValue(Value):
    """A slice with a data-dependent bound (`x[:t.item()]`): `parts` are start, stop and step
    (constants or `SymNodeValue`s); only tensor indexing accepts it."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Value]) -> None:
        super().__init__(None)
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def describe(self) -> str:
        return f"slice({', '.join(p.describe() for p in self.parts)})"


def is_backed(fake: object) -> bool:
    """Whether a symbolic number depends only on input sizes and ints (backed symbols with
    an example value), not on tensor data: its value can be decided at trace time, with a
    guard."""
    if not isinstance(fake, SYMBOLIC_TYPES):
        return True
    node = fake.node
    symbols = node.expr.free_symbols
    backed = node.shape_env.backed_var_to_val
    return all(s in backed for s in symbols)


def specialize(value: SymNodeValue) -> object | None:
    """The Python number of a backed symbolic value (the ShapeEnv guards it equal to its
    example's), or None when it depends on tensor data."""
    if not is_backed(value.fake):
        return None
    kind = value.python_type()
    number: object = kind(value.fake)
    return number
