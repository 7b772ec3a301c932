"""`raise`, `try/except/finally` and `except E as e`: exceptions the traced program raises
and catches at trace time.

In: exception objects raised by handlers (`RaisedInTrace`) and the handler blocks the
exception table sends them to. Exceptions are real Python objects held as constants; the
translator (`Translator.unwind`) finds the handler, these opcodes run it.
"""

from __future__ import annotations

from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, RaisedInTrace, new_exception, unsupported
from capture.interp import operators
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.values import ConstantValue, Value


def real_exception(value: Value) -> BaseException:
    """The exception object `raise value` raises (a class is instantiated, as in Python)."""
    ok, obj = operators.real_object(value)
    if ok and isinstance(obj, BaseException):
        return obj
    if ok and isinstance(obj, type) and issubclass(obj, BaseException):
        return new_exception(obj, ())
    raise unsupported(
        GraphBreakKind.EXCEPTION, f"raising {value.describe()}, which is not a known exception"
    )


def current_exception(tx: Translator) -> Value | None:
    """The exception being handled in `tx` or the frames that called it."""
    frame: Translator | None = tx
    while frame is not None:
        if frame.exc_info is not None:
            return frame.exc_info
        frame = frame.parent
    return None


@handler("RAISE_VARARGS")
def raise_varargs(tx: Translator, ins: Instruction) -> None:
    if ins.arg == 0:
        active = current_exception(tx)
        if active is None:
            raise RaisedInTrace(RuntimeError("No active exception to reraise"))
        raise RaisedInTrace(real_exception(active))
    cause: BaseException | None = None
    has_cause = ins.arg == 2
    if has_cause:
        cause_value = tx.pop()
        if not (isinstance(cause_value, ConstantValue) and cause_value.value is None):
            cause = real_exception(cause_value)
    exc = real_exception(tx.pop())
    if has_cause:
        exc.__cause__ = cause
    raise RaisedInTrace(exc)


@handler("PUSH_EXC_INFO")
def push_exc_info(tx: Translator, ins: Instruction) -> None:
    exc = tx.pop()
    previous = tx.exc_info if tx.exc_info is not None else ConstantValue(None)
    tx.handled.append((len(tx.stack), previous, exc))
    tx.push(previous)
    tx.exc_info = exc
    tx.push(exc)


@handler("POP_EXCEPT")
def pop_except(tx: Translator, ins: Instruction) -> None:
    previous = tx.pop()
    none = isinstance(previous, ConstantValue) and previous.value is None
    tx.exc_info = None if none else previous
    tx.handled = [entry for entry in tx.handled if entry[1] is not previous]


@handler("CHECK_EXC_MATCH")
def check_exc_match(tx: Translator, ins: Instruction) -> None:
    ok, types_ = operators.python_constant(tx.pop())
    if not ok:
        raise unsupported(GraphBreakKind.EXCEPTION, "an except clause with a non-constant type")
    exc = real_exception(tx.stack[-1])
    tx.push(ConstantValue(isinstance(exc, types_)))


@handler("RERAISE")
def reraise(tx: Translator, ins: Instruction) -> None:
    exc = tx.pop()
    if ins.arg:
        tx.pop()  # the raising instruction's offset (f_lasti): nothing to restore here
    raise RaisedInTrace(real_exception(exc))
