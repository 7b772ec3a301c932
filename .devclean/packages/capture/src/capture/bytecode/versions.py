"""Every difference between CPython versions that `capture` cares about lives here.

In: the running interpreter's version. Out: small facts and instruction sequences
(`bytecode.Instr` lists) that the decoder, the handlers and the code generator use, so that
no other module looks at `sys.version_info`.
"""

from __future__ import annotations

import sys
from typing import Final

from bytecode import Compare, Instr

VERSION: Final = sys.version_info[:2]
PY311: Final = VERSION == (3, 11)
PY312_PLUS: Final = VERSION >= (3, 12)
PY313_PLUS: Final = VERSION >= (3, 13)

# Opcode aliases: several versions spell one operation in different ways; handlers are
# registered under the normalized name on the right.
_ALIASES: Final[dict[str, str]] = {
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP_BACKWARD",
    "JUMP_NO_INTERRUPT": "JUMP_FORWARD",
    "JUMP": "JUMP_FORWARD",
    "LOAD_FAST_CHECK": "LOAD_FAST",
    "LOAD_FAST_BORROW": "LOAD_FAST",
}


def normalize_opname(opname: str) -> str:
    """The handler-table name of `opname` on this Python version."""
    return _ALIASES.get(opname, opname)


def load_global_pushes_null(arg: int) -> bool:
    """Whether LOAD_GLOBAL with this raw oparg also pushes NULL (3.11+: low bit)."""
    return bool(arg & 1)


def load_attr_is_method(arg: int) -> bool:
    """Whether LOAD_ATTR with this raw oparg is a method load (3.12+: low bit)."""
    return PY312_PLUS and bool(arg & 1)


def for_iter_exhausted_skip() -> int:
    """Instructions to skip past FOR_ITER's target when the iterator is exhausted.

    3.12 jumps over the END_FOR at the target; 3.11 lands on the target itself.
    """
    return 1 if VERSION == (3, 12) else 0


def null_after_callable() -> bool:
    """3.13+ expects `callable, NULL|self, args`; 3.11/3.12 expect `NULL, callable, args`."""
    return PY313_PLUS


def prologue(num_freevars: int) -> list[Instr]:
    """The instructions a generated code object starts with."""
    out: list[Instr] = []
    if num_freevars:
        out.append(Instr("COPY_FREE_VARS", num_freevars))
    out.append(Instr("RESUME", 0))
    return out


def push_null() -> list[Instr]:
    """Push the NULL that precedes a plain (non-method) call."""
    return [Instr("PUSH_NULL")]


def call(nargs: int) -> list[Instr]:
    """Call `callable` with `nargs` positional args; the stack holds NULL/callable/args."""
    if PY311:
        return [Instr("PRECALL", nargs), Instr("CALL", nargs)]
    return [Instr("CALL", nargs)]


def call_kw(nargs: int, names: tuple[str, ...]) -> list[Instr]:
    """Call with `nargs` values on the stack, the last `len(names)` of them keywords."""
    if PY313_PLUS:
        return [Instr("LOAD_CONST", names), Instr("CALL_KW", nargs)]
    return [Instr("KW_NAMES", names), *call(nargs)]


def load_global(name: str, with_null: bool) -> list[Instr]:
    """LOAD_GLOBAL, optionally also pushing NULL for a following call."""
    return [Instr("LOAD_GLOBAL", (with_null, name))]


def load_attr(name: str) -> list[Instr]:
    """Plain attribute load (no method form)."""
    if PY312_PLUS:
        return [Instr("LOAD_ATTR", (False, name))]
    return [Instr("LOAD_ATTR", name)]


def is_identical() -> list[Instr]:
    """`a is b` on the top two stack items."""
    return [Instr("IS_OP", 0)]


def compare_eq() -> list[Instr]:
    """`a == b` on the top two stack items."""
    return [Instr("COMPARE_OP", Compare.EQ)]


def list_to_tuple() -> list[Instr]:
    """Convert the list on top of the stack into a tuple."""
    if PY312_PLUS:
        from bytecode.instr import Intrinsic1Op

        return [Instr("CALL_INTRINSIC_1", Intrinsic1Op.INTRINSIC_LIST_TO_TUPLE)]
    return [Instr("LIST_TO_TUPLE")]


def compare_op_name(argval: object) -> str:
    """The comparison operator string of a COMPARE_OP (`'<'`, `'=='`, ...)."""
    text = str(argval)
    if text.startswith("bool(") and text.endswith(")"):
        return text[5:-1]
    return text


def kw_names_from(argval: object, arg: int | None, consts: tuple[object, ...]) -> tuple[str, ...]:
    """KW_NAMES' tuple of names (dis gives the const index on 3.11)."""
    if isinstance(argval, tuple):
        return argval
    assert arg is not None
    names = consts[arg]
    assert isinstance(names, tuple)
    return names


def generator_flags() -> int:
    """Code flags that mark generators and coroutines (cleared on generated code)."""
    import inspect

    return (
        inspect.CO_GENERATOR
        | inspect.CO_COROUTINE
        | inspect.CO_ITERABLE_COROUTINE
        | inspect.CO_ASYNC_GENERATOR
    )


def intrinsic_name(arg: int) -> str:
    """CALL_INTRINSIC_1's function name (3.12+)."""
    names = {
        1: "INTRINSIC_PRINT",
        2: "INTRINSIC_IMPORT_STAR",
        3: "INTRINSIC_STOPITERATION_ERROR",
        4: "INTRINSIC_ASYNC_GEN_WRAP",
        5: "INTRINSIC_UNARY_POSITIVE",
        6: "INTRINSIC_LIST_TO_TUPLE",
        7: "INTRINSIC_TYPEVAR",
    }
    return names.get(arg, f"INTRINSIC_{arg}")
