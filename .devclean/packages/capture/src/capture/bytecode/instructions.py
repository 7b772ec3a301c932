"""Decode a code object into a flat list of `Instruction`s with resolved jump targets.

In: a `types.CodeType`. Out: `list[Instruction]` (CACHE entries dropped, opnames
normalized by `versions`), which the interpreter walks by index.
"""

from __future__ import annotations

import bisect
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


@dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """One row of a code object's exception table, as instruction indices.

    An exception raised by an instruction in [start, end) unwinds the value stack to
    `depth` items, pushes the raising instruction's offset when `lasti`, pushes the
    exception and continues at `target`.
    """

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


_TABLE_CACHE: dict[types.CodeType, list[ExceptionEntry]] = {}


def _read_varint(table: bytes, pos: int) -> tuple[int, int]:
    # NOTE: CPython's format (Objects/exception_handling_notes.txt): 6-bit big-endian
    # chunks, bit 6 marks "more follows", bit 7 marks the first byte of an entry.
    byte = table[pos]
    value = byte & 63
    pos += 1
    while byte & 64:
        byte = table[pos]
        value = (value << 6) | (byte & 63)
        pos += 1
    return value, pos


def exception_table(code: types.CodeType) -> list[ExceptionEntry]:
    """The exception table of `code` with offsets mapped to `decode(code)` indices."""
    cached = _TABLE_CACHE.get(code)
    if cached is not None:
        return cached
    table: bytes = getattr(code, "co_exceptiontable", b"")
    instructions = decode(code)
    offsets = [ins.offset for ins in instructions]
    entries: list[ExceptionEntry] = []
    pos = 0
    while pos < len(table):
        start, pos = _read_varint(table, pos)
        length, pos = _read_varint(table, pos)
        target, pos = _read_varint(table, pos)
        depth_lasti, pos = _read_varint(table, pos)
        entries.append(
            ExceptionEntry(
                bisect.bisect_left(offsets, start * 2),
                bisect.bisect_left(offsets, (start + length) * 2),
                bisect.bisect_left(offsets, target * 2),
                depth_lasti >> 1,
                bool(depth_lasti & 1),
            )
        )
    _TABLE_CACHE[code] = entries
    return entries


def exception_handler(code: types.CodeType, index: int) -> ExceptionEntry | None:
    """The entry that catches an exception raised by instruction `index`, if any."""
    for entry in exception_table(code):
        if entry.start <= index < entry.end:
            return entry
    return None
