"""The symbolic values the interpreter keeps on its stack and in its locals.

About a dozen kinds (see `base.Value`); behaviour per Python type or callable lives in the
handler tables of `capture.interp`, not in subclasses.
"""

from capture.values.base import NULL, NullValue, Value
from capture.values.constant import ConstantValue
from capture.values.containers import (
    DictIteratorValue,
    DictValue,
    DictViewValue,
    IteratorValue,
    LazyIteratorValue,
    ListValue,
    SetIteratorValue,
    SetValue,
    TupleValue,
)
from capture.values.functions import CellValue, FunctionValue, MethodValue, PartialValue
from capture.values.objects import ContextValue, ModuleValue, ObjectValue, SuperValue
from capture.values.symbolic import SymNodeValue
from capture.values.tensor import TensorValue

__all__ = [
    "NULL",
    "CellValue",
    "ConstantValue",
    "ContextValue",
    "DictIteratorValue",
    "DictValue",
    "DictViewValue",
    "FunctionValue",
    "IteratorValue",
    "LazyIteratorValue",
    "ListValue",
    "MethodValue",
    "ModuleValue",
    "NullValue",
    "ObjectValue",
    "PartialValue",
    "SetIteratorValue",
    "SetValue",
    "SuperValue",
    "SymNodeValue",
    "TensorValue",
    "TupleValue",
    "Value",
]
