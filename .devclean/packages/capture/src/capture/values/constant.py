"""A Python object known at trace time: literals, types, functions, modules, dtypes.

Treated as immutable. Calling one dispatches through `capture.policy`.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from guards.sources import Source

from capture.graph_break import GraphBreakKind, unsupported
from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder

_LITERAL_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis))


def is_literal(obj: object) -> bool:
    """Whether `obj` can be embedded as a code-object constant."""
    if isinstance(obj, _LITERAL_TYPES):
        return True
    if type(obj) in (tuple, frozenset):
        return all(is_literal(x) for x in obj)  # type: ignore[attr-defined]  # tuple/frozenset
    return False


class ConstantValue(Value):
    """A known Python object."""

    __slots__ = ("value",)

    def __init__(self, value: object, source: Source | None = None) -> None:
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> object:
        return self.value

    def unpack(self) -> list[Value]:
        value = self.value
        if isinstance(value, (tuple, list, range, str, frozenset, set, dict)):
            return [ConstantValue(x) for x in value]
        if isinstance(value, (types.GeneratorType, map, filter, zip)):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "iterating a real iterator")
        try:
            items = list(value)  # type: ignore[call-overload]  # any iterable constant
        except TypeError as e:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT, f"cannot iterate {self.describe()}: {e}"
            ) from None
        return [ConstantValue(x) for x in items]

    def reconstruct(self, cg: CodeBuilder) -> None:
        if is_literal(self.value):
            cg.load_const(self.value)
        elif self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_object(self.value)

    def describe(self) -> str:
        text = repr(self.value)
        if len(text) > 60:
            text = text[:57] + "..."
        return f"Constant({text})"
