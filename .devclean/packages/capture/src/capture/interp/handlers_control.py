"""Jumps, loops and `with` blocks. Branches must be decidable at trace time."""

from __future__ import annotations

from capture.bytecode import versions
from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import operators
from capture.interp.builtins_table import iterate
from capture.interp.context_specials import enter_context
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.values import ConstantValue, IteratorValue


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE")
def jump(tx: Translator, ins: Instruction) -> None:
    tx.jump(ins)


@handler("POP_JUMP_IF_TRUE")
def pop_jump_if_true(tx: Translator, ins: Instruction) -> None:
    if operators.truth(tx, tx.pop()):
        tx.jump(ins)


@handler("POP_JUMP_IF_FALSE")
def pop_jump_if_false(tx: Translator, ins: Instruction) -> None:
    if not operators.truth(tx, tx.pop()):
        tx.jump(ins)


def _is_none(value: object) -> bool:
    return isinstance(value, ConstantValue) and value.value is None


@handler("POP_JUMP_IF_NONE")
def pop_jump_if_none(tx: Translator, ins: Instruction) -> None:
    if _is_none(tx.pop()):
        tx.jump(ins)


@handler("POP_JUMP_IF_NOT_NONE")
def pop_jump_if_not_none(tx: Translator, ins: Instruction) -> None:
    if not _is_none(tx.pop()):
        tx.jump(ins)


@handler("JUMP_IF_TRUE_OR_POP", until=(3, 12))
def jump_if_true_or_pop(tx: Translator, ins: Instruction) -> None:
    if operators.truth(tx, tx.stack[-1]):
        tx.jump(ins)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP", until=(3, 12))
def jump_if_false_or_pop(tx: Translator, ins: Instruction) -> None:
    if not operators.truth(tx, tx.stack[-1]):
        tx.jump(ins)
    else:
        tx.pop()


@handler("GET_ITER")
def get_iter(tx: Translator, ins: Instruction) -> None:
    tx.push(iterate(tx, tx.pop()))


@handler("FOR_ITER")
def for_iter(tx: Translator, ins: Instruction) -> None:
    it = tx.stack[-1]
    if not isinstance(it, IteratorValue):
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"iterating {it.describe()}")
    item = it.next_item()
    if item is None:
        tx.pop()
        tx.jump(ins)
        tx.ip += versions.for_iter_exhausted_skip()
    else:
        tx.push(item)


@handler("END_FOR", since=(3, 12))
def end_for(tx: Translator, ins: Instruction) -> None:
    tx.pop()
    if versions.VERSION < (3, 13):
        tx.pop()


@handler("BEFORE_WITH")
def before_with(tx: Translator, ins: Instruction) -> None:
    ctx = tx.pop()
    exit_fn, result = enter_context(tx, ctx)
    tx.push(exit_fn)
    tx.push(result)


def _never(tx: Translator, ins: Instruction) -> None:
    raise unsupported(
        GraphBreakKind.EXCEPTION,
        f"exception handling path ({ins.raw_opname}) reached while tracing",
    )


for _name in (
    "WITH_EXCEPT_START",
    "CLEANUP_THROW",
    "SEND",
    "GET_AWAITABLE",
    "SETUP_ANNOTATIONS",
    "LOAD_BUILD_CLASS",
):
    handler(_name)(_never)
