"""Generators of traced Python code, run lazily: each `next()` resumes the generator's
frame until its next `yield`, so the generator's effects interleave with its consumer's as
in CPython (a generator that is created but not consumed runs no code).

In: a `Translator` for the generator's code, created by an inlined call. Out: an iterator
value that the consumer's `for`, `next()` and unpacking drive.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from capture.graph_break import GraphBreakKind, unsupported
from capture.values import IteratorValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator


class GeneratorValue(IteratorValue):
    """A generator object whose frame is a suspended `Translator`."""

    __slots__ = ("done", "frame")

    def __init__(self, frame: Translator) -> None:
        super().__init__([])
        self.frame = frame
        self.done = False

    def python_type(self) -> type:
        return types.GeneratorType

    def next_item(self) -> Value | None:
        """Resume the frame; the yielded value, or None once it has returned."""
        if self.done:
            return None
        try:
            item = self.frame.resume()
        except BaseException:
            self.done = True
            raise
        if item is None:
            self.done = True
        return item

    def unpack(self) -> list[Value]:
        items: list[Value] = []
        while True:
            item = self.next_item()
            if item is None:
                return items
            items.append(item)

    def describe(self) -> str:
        return f"generator {self.frame.code.co_name}"

    def check_abandoned(self) -> None:
        """Raise when the generator stopped inside a `try`/`with` before finishing.

        CPython closes such a generator when it is collected, running its `finally` and
        `__exit__` code at that moment; the trace does not model that, so it gives up.
        """
        if self.done or not self.frame.started:
            return
        if self.frame.suspended_in_handler_block():
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                f"generator {self.frame.code.co_name} left suspended inside try/with "
                "(its cleanup would run when it is collected)",
            )
