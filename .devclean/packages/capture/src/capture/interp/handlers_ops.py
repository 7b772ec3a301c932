"""Operators: BINARY_OP, unary ops, comparisons, identity, membership, subscripts,
formatting."""

from __future__ import annotations

import dis
import operator
from collections.abc import Callable
from typing import Any

from capture.bytecode import versions
from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import operators
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.values import ConstantValue, SymNodeValue, TensorValue, Value
from capture.values.symbolic import SymSliceValue

_NB_NAMES = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "@=": operator.imatmul,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
_BINARY_OPS: list[Callable[..., Any]] = [
    _NB_NAMES[symbol] for _, symbol in getattr(dis, "_nb_ops", []) if symbol in _NB_NAMES
]
_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}


@handler("BINARY_OP")
def binary_op(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    b = tx.pop()
    a = tx.pop()
    tx.push(operators.apply_operator(tx, _BINARY_OPS[ins.arg], [a, b]))


def _unary(op: Callable[..., Any]) -> Callable[[Translator, Instruction], None]:
    def run(tx: Translator, ins: Instruction) -> None:
        tx.push(operators.apply_operator(tx, op, [tx.pop()]))

    return run


handler("UNARY_NEGATIVE")(_unary(operator.neg))
handler("UNARY_POSITIVE")(_unary(operator.pos))
handler("UNARY_INVERT")(_unary(operator.invert))


@handler("UNARY_NOT")
def unary_not(tx: Translator, ins: Instruction) -> None:
    tx.push(ConstantValue(not operators.truth(tx, tx.pop())))


@handler("TO_BOOL", since=(3, 13))
def to_bool(tx: Translator, ins: Instruction) -> None:
    value = tx.pop()
    tx.push(ConstantValue(operators.truth(tx, value)))


@handler("COMPARE_OP")
def compare_op(tx: Translator, ins: Instruction) -> None:
    b = tx.pop()
    a = tx.pop()
    op = _COMPARE[versions.compare_op_name(ins.argval)]
    tx.push(operators.apply_operator(tx, op, [a, b]))


@handler("IS_OP")
def is_op(tx: Translator, ins: Instruction) -> None:
    b = tx.pop()
    a = tx.pop()
    same = operators.is_same(a, b)
    if same is None:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT, f"`is` between {a.describe()} and {b.describe()}"
        )
    tx.push(ConstantValue(same != bool(ins.arg)))


@handler("CONTAINS_OP")
def contains_op(tx: Translator, ins: Instruction) -> None:
    container = tx.pop()
    item = tx.pop()
    tx.push(ConstantValue(operators.contains(tx, item, container) != bool(ins.arg)))


@handler("BINARY_SUBSCR")
def binary_subscr(tx: Translator, ins: Instruction) -> None:
    key = tx.pop()
    container = tx.pop()
    tx.push(operators.get_item(tx, container, key))


@handler("STORE_SUBSCR")
def store_subscr(tx: Translator, ins: Instruction) -> None:
    key = tx.pop()
    container = tx.pop()
    value = tx.pop()
    operators.set_item(tx, container, key, value)


@handler("DELETE_SUBSCR")
def delete_subscr(tx: Translator, ins: Instruction) -> None:
    key = tx.pop()
    container = tx.pop()
    operators.del_item(tx, container, key)


def _slice(tx: Translator, values: list[Value]) -> Value:
    if any(isinstance(v, SymNodeValue) for v in values) and all(
            isinstance(v, (SymNodeValue, ConstantValue)) for v in values):
        # NOTE: a bound computed from sizes or symbolic int arguments (`x[:, :n]`) stays
        # symbolic: tensor indexing records it as it is (the slice's size follows it); a
        # list or tuple sliced by it specializes it then (`operators.python_constant`).
        return SymSliceValue(list(values))
    parts = []
    for v in values:
        ok, obj = operators.python_constant(v)
        if not ok:
            if all(isinstance(p, (SymNodeValue, ConstantValue)) for p in values):
                return SymSliceValue(list(values))  # a bound read from a tensor
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "slice with non-constant bounds")
        parts.append(obj)
    return ConstantValue(slice(*parts))


@handler("BUILD_SLICE")
def build_slice(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    tx.push(_slice(tx, tx.popn(ins.arg)))


@handler("BINARY_SLICE", since=(3, 12))
def binary_slice(tx: Translator, ins: Instruction) -> None:
    end = tx.pop()
    start = tx.pop()
    container = tx.pop()
    tx.push(operators.get_item(tx, container, _slice(tx, [start, end])))


@handler("STORE_SLICE", since=(3, 12))
def store_slice(tx: Translator, ins: Instruction) -> None:
    end = tx.pop()
    start = tx.pop()
    container = tx.pop()
    value = tx.pop()
    operators.set_item(tx, container, _slice(tx, [start, end]), value)


@handler("FORMAT_VALUE")
def format_value(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    spec = tx.pop().as_constant() if ins.arg & 0x04 else ""
    value = tx.pop()
    if isinstance(value, TensorValue):
        raise unsupported(GraphBreakKind.DATA_DEPENDENT, "formatting a tensor into a string")
    ok, obj = operators.python_constant(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"formatting {value.describe()}")
    conversion = ins.arg & 0x03
    if conversion == 1:
        obj = str(obj)
    elif conversion == 2:
        obj = repr(obj)
    elif conversion == 3:
        obj = ascii(obj)
    tx.push(ConstantValue(format(obj, str(spec))))


@handler("BUILD_STRING")
def build_string(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    parts = tx.popn(ins.arg)
    tx.push(ConstantValue("".join(str(p.as_constant()) for p in parts)))


@handler("CALL_INTRINSIC_1", since=(3, 12))
def call_intrinsic_1(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    name = versions.intrinsic_name(ins.arg)
    if name == "INTRINSIC_LIST_TO_TUPLE":
        from capture.values import TupleValue

        tx.push(TupleValue(tx.pop().unpack()))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        tx.push(operators.apply_operator(tx, operator.pos, [tx.pop()]))
    elif name == "INTRINSIC_STOPITERATION_ERROR":
        exc = tx.pop()
        ok, real = operators.real_object(exc)
        if not ok or not isinstance(real, BaseException):
            raise unsupported(GraphBreakKind.EXCEPTION, "StopIteration inside a generator")
        if isinstance(real, StopIteration):
            error = RuntimeError("generator raised StopIteration")
            error.__cause__ = real
            exc = ConstantValue(error)
        tx.push(exc)
    else:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OPCODE, f"CALL_INTRINSIC_1 {name}")
