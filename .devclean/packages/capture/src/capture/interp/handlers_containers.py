"""Building, extending and unpacking containers; stack shuffles."""

from __future__ import annotations

from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import operators
from capture.interp.builtins_table import dict_update, iterate
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.values import (
    ConstantValue,
    DictValue,
    ListValue,
    ObjectValue,
    SetValue,
    TupleValue,
    Value,
)


@handler("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PRECALL", "NOT_TAKEN", "END_SEND")
def nop(tx: Translator, ins: Instruction) -> None:
    pass


@handler("POP_TOP")
def pop_top(tx: Translator, ins: Instruction) -> None:
    tx.pop()


@handler("PUSH_NULL")
def push_null(tx: Translator, ins: Instruction) -> None:
    from capture.values import NULL

    tx.push(NULL)


@handler("COPY")
def copy(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    tx.push(tx.stack[-ins.arg])


@handler("SWAP")
def swap(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    stack = tx.stack
    stack[-1], stack[-ins.arg] = stack[-ins.arg], stack[-1]


@handler("BUILD_TUPLE")
def build_tuple(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    tx.push(TupleValue(tx.popn(ins.arg)))


@handler("BUILD_LIST")
def build_list(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    tx.push(ListValue(tx.popn(ins.arg)))


@handler("BUILD_SET")
def build_set(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    items = tx.popn(ins.arg)
    value = SetValue.new()
    for item in items:
        value.add(_key(item), item)
    tx.push(value)


def _key(value: Value) -> object:
    ok, key = operators.python_constant(value)
    if not ok:
        ok, key = operators.real_object(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"dict key {value.describe()}")
    return key


@handler("BUILD_MAP")
def build_map(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    flat = tx.popn(2 * ins.arg)
    value = DictValue({})
    for i in range(0, len(flat), 2):
        value.set_item(_key(flat[i]), (flat[i], flat[i + 1]))
    tx.push(value)


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    keys = tx.pop().as_constant()
    assert isinstance(keys, tuple)
    values = tx.popn(ins.arg)
    value = DictValue({})
    for k, v in zip(keys, values):
        value.set_item(k, (ConstantValue(k), v))
    tx.push(value)


@handler("LIST_APPEND")
def list_append(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    item = tx.pop()
    target = tx.stack[-ins.arg]
    assert isinstance(target, ListValue)
    target.items.append(item)


@handler("SET_ADD")
def set_add(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    item = tx.pop()
    target = tx.stack[-ins.arg]
    assert isinstance(target, SetValue)
    target.add(_key(item), item)


@handler("MAP_ADD")
def map_add(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    value = tx.pop()
    key = tx.pop()
    target = tx.stack[-ins.arg]
    assert isinstance(target, DictValue)
    target.set_item(_key(key), (key, value))


@handler("LIST_EXTEND")
def list_extend(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    items = iterate(tx, tx.pop()).unpack()
    target = tx.stack[-ins.arg]
    assert isinstance(target, ListValue)
    target.items.extend(items)


@handler("SET_UPDATE")
def set_update(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    other = tx.pop()
    items = iterate(tx, other).unpack()
    target = tx.stack[-ins.arg]
    assert isinstance(target, SetValue)
    target.update([(_key(item), item) for item in items], other)


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update_handler(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    other = tx.pop()
    target = tx.stack[-ins.arg]
    assert isinstance(target, DictValue)
    if isinstance(other, DictValue) or (isinstance(other, ObjectValue) and other.dict_items is not None):
        dict_update(tx, target, [other], {})
        return
    ok, obj = operators.python_constant(other)
    if ok and isinstance(obj, dict):
        for k, v in obj.items():
            target.set_item(k, (ConstantValue(k), ConstantValue(v)))
        return
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"** of {other.describe()}")


@handler("LIST_TO_TUPLE", until=(3, 12))
def list_to_tuple(tx: Translator, ins: Instruction) -> None:
    tx.push(TupleValue(tx.pop().unpack()))


@handler("UNPACK_SEQUENCE")
def unpack_sequence(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    items = iterate(tx, tx.pop()).unpack()
    if len(items) != ins.arg:
        raise unsupported(
            GraphBreakKind.EXCEPTION,
            f"ValueError: expected {ins.arg} values to unpack, got {len(items)}",
        )
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def unpack_ex(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    before = ins.arg & 0xFF
    after = ins.arg >> 8
    items = iterate(tx, tx.pop()).unpack()
    if len(items) < before + after:
        raise unsupported(GraphBreakKind.EXCEPTION, "ValueError: not enough values to unpack")
    middle = items[before : len(items) - after]
    out = items[:before] + [ListValue(middle)] + items[len(items) - after :]
    for item in reversed(out):
        tx.push(item)


@handler("GET_LEN")
def get_len(tx: Translator, ins: Instruction) -> None:
    tx.push(ConstantValue(len(tx.stack[-1].unpack())))


def _is_sequence(value: Value) -> bool:
    if isinstance(value, (ListValue, TupleValue)):
        return True
    if isinstance(value, ConstantValue):
        return isinstance(value.value, (tuple, list, range)) and not isinstance(
            value.value, (str, bytes)
        )
    return False


@handler("MATCH_SEQUENCE")
def match_sequence(tx: Translator, ins: Instruction) -> None:
    tx.push(ConstantValue(_is_sequence(tx.stack[-1])))


@handler("MATCH_MAPPING")
def match_mapping(tx: Translator, ins: Instruction) -> None:
    subject = tx.stack[-1]
    is_mapping = isinstance(subject, DictValue) or (
        isinstance(subject, ObjectValue) and subject.dict_items is not None
    )
    if isinstance(subject, ConstantValue):
        is_mapping = isinstance(subject.value, dict)
    tx.push(ConstantValue(is_mapping))


@handler("MATCH_KEYS")
def match_keys(tx: Translator, ins: Instruction) -> None:
    keys = tx.stack[-1].as_constant()
    subject = tx.stack[-2]
    if isinstance(subject, ObjectValue) and subject.dict_items is not None:
        subject = subject.dict_items
    assert isinstance(keys, tuple)
    if not isinstance(subject, DictValue):
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"match on {subject.describe()}")
    if all(k in subject.items for k in keys):
        tx.push(TupleValue([subject.items[k][1] for k in keys]))
    else:
        tx.push(ConstantValue(None))
