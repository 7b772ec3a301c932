"""Generators of traced Python code, run lazily: each `next()` resumes the generator's
frame until its next `yield`, so the generator's effects interleave with its consumer's as
in CPython (a generator that is created but not consumed runs no code).

In: a `Translator` for the generator's code, created by an inlined call. Out: an iterator
value that the consumer's `for`, `next()` and unpacking drive.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from capture.bytecode.instructions import exception_handler
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
        if close_runs_code(self.frame):
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                f"generator {self.frame.code.co_name} left suspended inside try/with "
                "(its cleanup would run when it is collected)",
            )


# Instructions of exception bookkeeping: they run no user code.
_BOOKKEEPING = frozenset({"PUSH_EXC_INFO", "POP_EXCEPT", "POP_TOP", "COPY", "SWAP", "NOP"})


def close_runs_code(frame: Translator) -> bool:
    """Whether closing the suspended generator `frame` (GeneratorExit raised at its yield)
    would run any of its code: a `finally`, a `with` exit, or an `except` that matches.

    Follows the handlers from the suspended instruction; `except E:` clauses whose `E` is a
    known class GeneratorExit does not derive from are skipped, as CPython skips them.
    """
    index = frame.ip - 1
    seen: set[int] = set()
    while True:
        entry = exception_handler(frame.code, index)
        if entry is None:
            return False  # GeneratorExit leaves the frame: nothing ran
        pos = entry.target
        loaded: list[object] = []
        while True:
            if pos in seen or pos >= len(frame.instructions):
                return True
            seen.add(pos)
            ins = frame.instructions[pos]
            op = ins.opname
            if op in _BOOKKEEPING or (op == "CALL_INTRINSIC_1" and ins.arg == 3):
                pos += 1  # NOTE: 3.12's StopIteration -> RuntimeError leaves others alone
            elif op in ("LOAD_GLOBAL", "LOAD_NAME"):
                name = str(ins.argval)
                loaded.append(frame.f_globals.get(name, frame.f_builtins.get(name)))
                pos += 1
            elif op == "BUILD_TUPLE" and ins.arg is not None and len(loaded) >= ins.arg:
                items = tuple(loaded[len(loaded) - ins.arg :])
                del loaded[len(loaded) - ins.arg :]
                loaded.append(items)
                pos += 1
            elif op == "CHECK_EXC_MATCH":
                kinds = loaded[-1] if loaded else None
                if not _known_classes(kinds) or issubclass(GeneratorExit, kinds):  # type: ignore[arg-type]  # checked by _known_classes
                    return True
                nxt = frame.instructions[pos + 1]
                if nxt.opname != "POP_JUMP_IF_FALSE" or nxt.target is None:
                    return True
                pos = nxt.target
            elif op == "RERAISE":
                index = pos
                break
            else:
                return True


def _known_classes(value: object) -> bool:
    if isinstance(value, tuple):
        return all(isinstance(v, type) for v in value)
    return isinstance(value, type)
