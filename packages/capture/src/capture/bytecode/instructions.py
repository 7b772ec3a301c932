"""Decode a code object into a flat list of `Instruction`s with resolved jump targets.

In: a `types.CodeType`. Out: `list[Instruction]` (CACHE entries dropped, opnames
normalized by `versions`), which the interpreter walks by index.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass

from capture.bytecode import versions

_JUMP_OPCODES = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction; `target` is the jump target's index (None if no jump)."""

    opname: str
    raw_opname: str
    arg: int | None
    argval: object
    offset: int
    lineno: int | None
    target: int | None
    starts_line: bool

    def __str__(self) -> str:
        arg = "" if self.arg is None else f" {self.argval!r}"
        return f"{self.offset:>4} {self.raw_opname}{arg}"


_DECODE_CACHE: dict[types.CodeType, list[Instruction]] = {}


def decode(code: types.CodeType) -> list[Instruction]:
    """The instructions of `code` (cached per code object)."""
    cached = _DECODE_CACHE.get(code)
    if cached is not None:
        return cached
    raw = list(dis.get_instructions(code))
    index_of = {ins.offset: i for i, ins in enumerate(raw)}
    out: list[Instruction] = []
    lineno: int | None = code.co_firstlineno
    for ins in raw:
        target = None
        if ins.opcode in _JUMP_OPCODES:
            target = index_of[int(ins.argval)]
        line = _line_of(ins)
        starts = line is not None and line != lineno
        if line is not None:
            lineno = line
        out.append(
            Instruction(
                opname=versions.normalize_opname(ins.opname),
                raw_opname=ins.opname,
                arg=ins.arg,
                argval=ins.argval,
                offset=ins.offset,
                lineno=lineno,
                target=target,
                starts_line=starts,
            )
        )
    _DECODE_CACHE[code] = out
    return out


def _line_of(ins: dis.Instruction) -> int | None:
    positions = getattr(ins, "positions", None)
    if positions is not None and positions.lineno is not None:
        return int(positions.lineno)
    starts = ins.starts_line
    if isinstance(starts, int) and not isinstance(starts, bool):
        return starts
    return None


def format_code(code: types.CodeType) -> str:
    """A `dis`-style listing of `code` (used by the bytecode logs)."""
    return dis.Bytecode(code).dis()
