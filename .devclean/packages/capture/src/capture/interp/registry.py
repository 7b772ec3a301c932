"""The opcode handler table: `@handler("CALL", since=(3, 11))` registers a function.

Handlers take `(tx, ins)`: the translator and the instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from capture.bytecode import versions

if TYPE_CHECKING:
    from capture.bytecode.instructions import Instruction
    from capture.interp.translator import Translator

Handler = Callable[["Translator", "Instruction"], None]
F = TypeVar("F", bound=Handler)

HANDLERS: dict[str, Handler] = {}


def handler(
    *names: str, since: tuple[int, int] = (3, 11), until: tuple[int, int] | None = None
) -> Callable[[F], F]:
    """Register the decorated function for opcode `names` on versions [since, until)."""

    def decorate(fn: F) -> F:
        if versions.VERSION >= since and (until is None or versions.VERSION < until):
            for name in names:
                HANDLERS[name] = fn
        return fn

    return decorate
