"""Calls, function creation and returns (including generator bodies)."""

from __future__ import annotations

from capture.bytecode import versions
from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp.builtins_table import iterate
from capture.interp.calls import call_value
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.values import (
    NULL,
    CellValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    TupleValue,
    Value,
)


@handler("KW_NAMES", until=(3, 13))
def kw_names(tx: Translator, ins: Instruction) -> None:
    tx.kw_names = versions.kw_names_from(ins.argval, ins.arg, tx.code.co_consts)


def _split_kwargs(tx: Translator, values: list[Value]) -> tuple[list[Value], dict[str, Value]]:
    names = tx.kw_names
    tx.kw_names = ()
    if not names:
        return values, {}
    split = len(values) - len(names)
    return values[:split], dict(zip(names, values[split:]))


def _do_call(tx: Translator, nargs: int, names: tuple[str, ...] | None = None) -> None:
    if names is not None:
        tx.kw_names = names
    values = tx.popn(nargs)
    b = tx.pop()
    a = tx.pop()
    if versions.null_after_callable():
        fn = a
        if b is not NULL:
            values = [b, *values]
    elif a is NULL:
        fn = b
    else:
        fn = a
        values = [b, *values]
    args, kwargs = _split_kwargs(tx, values)
    tx.push(call_value(tx, fn, args, kwargs))


@handler("CALL")
def call(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    _do_call(tx, ins.arg)


@handler("CALL_KW", since=(3, 13))
def call_kw(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    names = tx.pop().as_constant()
    assert isinstance(names, tuple)
    _do_call(tx, ins.arg, names)


@handler("CALL_FUNCTION_EX")
def call_function_ex(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    kwargs_value = tx.pop() if ins.arg & 1 else None
    args_value = tx.pop()
    if versions.null_after_callable():
        null = tx.pop()
        fn = tx.pop()
        del null
    else:
        fn = tx.pop()
        null = tx.pop()
        if null is not NULL:
            # 3.11/3.12 method form: `null` is the callable, `fn` its self.
            args_value = TupleValue([fn, *args_value.unpack()])
            fn = null

    args = iterate(tx, args_value).unpack()
    kwargs: dict[str, Value] = {}
    if kwargs_value is not None:
        if not isinstance(kwargs_value, DictValue):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "** of a non-dict")
        kwargs = {str(k): v for k, (_, v) in kwargs_value.items.items()}
    tx.push(call_value(tx, fn, args, kwargs))


@handler("MAKE_FUNCTION")
def make_function(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    flags = ins.arg
    code_value = tx.pop()
    if versions.VERSION < (3, 11):
        code_value = tx.pop()
    code = code_value.as_constant()
    closure: tuple[CellValue, ...] = ()
    kwdefaults: dict[str, Value] = {}
    defaults: tuple[Value, ...] = ()
    if flags & 0x08:
        cells = tx.pop().unpack()
        closure = tuple(c for c in cells if isinstance(c, CellValue))
    if flags & 0x04:
        tx.pop()
    if flags & 0x02:
        kw = tx.pop()
        assert isinstance(kw, DictValue)
        kwdefaults = {str(k): v for k, (_, v) in kw.items.items()}
    if flags & 0x01:
        defaults = tuple(tx.pop().unpack())
    import types

    assert isinstance(code, types.CodeType)
    tx.push(FunctionValue(code, tx.f_globals, code.co_name, defaults, kwdefaults, closure))


@handler("RETURN_VALUE")
def return_value(tx: Translator, ins: Instruction) -> None:
    tx.return_value = tx.pop()


@handler("RETURN_GENERATOR")
def return_generator(tx: Translator, ins: Instruction) -> None:
    if not tx.is_generator:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OPCODE, "generator outside an inlined call")
    tx.push(ConstantValue(None))


@handler("YIELD_VALUE")
def yield_value(tx: Translator, ins: Instruction) -> None:
    if not tx.is_generator:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OPCODE, "yield in the compiled frame")
    tx.yielded = tx.pop()
