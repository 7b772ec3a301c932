"""Real objects that only the trace knows (deep copies of plain objects made at capture):
attributes are read and written on them for real, without guards, and they cannot leave
the frame, since eager makes a new one on every call.
"""

from __future__ import annotations

import copyreg
import enum
import types
from typing import TYPE_CHECKING

import torch

from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import operators
from capture.values import ConstantValue, DictValue, ListValue, MethodValue, ObjectValue, Value
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder
    from capture.interp.translator import Translator

ATOMIC = (
    type(None), bool, int, float, complex, str, bytes, type, types.FunctionType,
    types.BuiltinFunctionType, torch.dtype, torch.device, enum.Enum, range,
)


class PrivateObjectValue(ObjectValue):
    """A real object the trace made (a deep copy of a plain object): attributes are read and
    written on it for real, without guards; it cannot leave the frame."""

    __slots__ = ()

    def reconstruct(self, cg: CodeBuilder) -> None:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT,
            f"a copy of a {self.cls.__name__} made while tracing leaves the frame "
            "(returned or stored); eager makes a new one on every call",
        )

    def describe(self) -> str:
        return f"{self.cls.__name__} object (a copy made while tracing)"


def private_attr(tx: Translator, value: PrivateObjectValue, name: str) -> Value | None:
    """`value.name` on a private copy, read for real (its class's `__getattribute__` too);
    None when it has no such attribute."""
    assert value.obj is not None
    try:
        result = getattr(value.obj, name)
    except AttributeError:
        return None
    if isinstance(result, types.MethodType) and result.__self__ is value.obj:
        return MethodValue(value, ConstantValue(result.__func__))
    return private_wrap(tx, result)


def private_wrap(tx: Translator, obj: object) -> Value:
    """A value for an object inside a private copy (itself private: no guards). Lists and
    dicts become values of their own, changed in the trace only (one per real container)."""
    if isinstance(obj, ATOMIC):
        return ConstantValue(obj)
    if plain(type(obj)):
        return PrivateObjectValue(obj, type(obj))
    if type(obj) in (list, dict):
        known = private_containers(tx).get(id(obj))
        if known is not None:
            return known[0]
        value: Value
        if isinstance(obj, list):
            value = ListValue([private_wrap(tx, item) for item in obj])
        else:
            assert isinstance(obj, dict)
            value = DictValue({k: (ConstantValue(k), private_wrap(tx, v)) for k, v in obj.items()})
        private_containers(tx)[id(obj)] = (value, obj)
        return value
    return wrap(tx.output, obj, None)


def private_containers(tx: Translator) -> dict[int, tuple[Value, object]]:
    """The trace's values for the lists and dicts inside private copies, by real id."""
    table: dict[int, tuple[Value, object]] = vars(tx.output).setdefault("private_containers", {})
    return table


def unchanged(tx: Translator) -> bool:
    """Whether no list or dict inside a private copy was changed by the trace (so a real
    copy of a private object is what eager would copy)."""
    for value, real in private_containers(tx).values():
        ok, now = operators.python_constant(value)
        if not ok or now != real:
            return False
    return True


def private_store(owner: PrivateObjectValue, name: str, value: Value) -> None:
    """`owner.name = value` on a private copy: done for real (its `__setattr__` too)."""
    ok, obj = operators.python_constant(value)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          f"storing {value.describe()} on {owner.describe()}")
    setattr(owner.obj, name, obj)


def plain(cls: type) -> bool:
    """A class whose instances copy plainly: `__dict__` state, the default reduce protocol."""
    if cls.__module__ == "builtins" or issubclass(cls, (torch.Tensor, torch.nn.Module)):
        return False
    if "__slots__" in vars(cls) or cls in copyreg.dispatch_table:
        return False
    try:
        return (
            getattr(cls, "__deepcopy__", None) is None
            and getattr(cls, "__copy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
            and getattr(cls, "__setstate__", None) is None
            and getattr(cls, "__getnewargs_ex__", None) is None
            and getattr(cls, "__getnewargs__", None) is None
            and cls.__new__ is object.__new__
        )
    except Exception:  # noqa: BLE001  # a metaclass that refuses the lookups: not plain
        return False
