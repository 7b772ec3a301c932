"""Loads and stores: locals, constants, globals, cells, attributes, imports."""

from __future__ import annotations

import sys

from guards.sources import ConstSource, GlobalSource, ItemSource, Source

from capture.bytecode import versions
from capture.bytecode.instructions import Instruction
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp.attributes import AttrMissing, delete_attribute, get_attr, store_attr
from capture.interp.registry import handler
from capture.interp.translator import Translator
from capture.output_graph import GuardKind
from capture.values import NULL, CellValue, ConstantValue, SuperValue
from capture.values.wrap import wrap


@handler("LOAD_FAST")
def load_fast(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    value = tx.locals.get(name)
    if value is None:
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"UnboundLocalError: local {name!r} read before assignment"
        )
    tx.push(value)


@handler("LOAD_FAST_AND_CLEAR", since=(3, 12))
def load_fast_and_clear(tx: Translator, ins: Instruction) -> None:
    value = tx.locals.pop(str(ins.argval), None)
    tx.push(value if value is not None else NULL)


@handler("STORE_FAST")
def store_fast(tx: Translator, ins: Instruction) -> None:
    value = tx.pop()
    if value is NULL:
        tx.locals.pop(str(ins.argval), None)
    else:
        tx.locals[str(ins.argval)] = value


@handler("DELETE_FAST")
def delete_fast(tx: Translator, ins: Instruction) -> None:
    tx.locals.pop(str(ins.argval), None)


@handler("LOAD_CONST")
def load_const(tx: Translator, ins: Instruction) -> None:
    tx.push(ConstantValue(ins.argval))


@handler("RETURN_CONST", since=(3, 12))
def return_const(tx: Translator, ins: Instruction) -> None:
    tx.return_value = ConstantValue(ins.argval)


def _load_global_value(tx: Translator, name: str) -> None:
    pending = tx.output.side_effects.pending_global(tx.f_globals, name)
    if pending is not None:
        tx.push(pending)
        return
    if name in tx.f_globals:
        obj = tx.f_globals[name]
        source: Source
        if tx.f_globals is tx.output.root_globals:
            source = GlobalSource(name)
        else:
            # NOTE: a global of another module read by an inlined function: the function is
            # fixed for the entry (guarded) and `__globals__` cannot be rebound, so the
            # entries are guarded through the globals dict itself (one short accessor).
            source = ItemSource(ConstSource.of(tx.f_globals), name)
        tx.push(wrap(tx.output, obj, source))
        return
    if name in tx.f_builtins:
        # A builtin: guarded absent from the globals (a global `len` would shadow it) and
        # guarded in the builtins' namespace (`builtins.len = ...`).
        output = tx.output
        output.add_guard(ConstSource.of(tx.f_globals), GuardKind.KEY_ABSENT, name)
        tx.push(wrap(output, tx.f_builtins[name], ItemSource(ConstSource.of(tx.f_builtins), name)))
        return
    raise unsupported(GraphBreakKind.EXCEPTION, f"NameError: name {name!r} is not defined")


@handler("LOAD_GLOBAL")
def load_global(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    if versions.load_global_pushes_null(ins.arg) and not versions.null_after_callable():
        tx.push(NULL)
    _load_global_value(tx, str(ins.argval))
    if versions.load_global_pushes_null(ins.arg) and versions.null_after_callable():
        tx.push(NULL)


@handler("LOAD_NAME")
def load_name(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    if name in tx.locals:
        tx.push(tx.locals[name])
    else:
        _load_global_value(tx, name)


@handler("STORE_GLOBAL")
def store_global(tx: Translator, ins: Instruction) -> None:
    value = tx.pop()
    tx.output.side_effects.store_global(tx.f_globals, str(ins.argval), value)


@handler("MAKE_CELL")
def make_cell(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    tx.cells[name] = CellValue(tx.locals.pop(name, None))


@handler("COPY_FREE_VARS")
def copy_free_vars(tx: Translator, ins: Instruction) -> None:
    pass


@handler("LOAD_CLOSURE")
def load_closure(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    cell = tx.cells.get(name)
    if cell is None:
        cell = tx.cells[name] = CellValue(tx.locals.pop(name, None))
    tx.push(cell)


@handler("LOAD_DEREF")
def load_deref(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    cell = tx.cells.get(name)
    if cell is None or cell.contents is None:
        raise unsupported(GraphBreakKind.EXCEPTION, f"free variable {name!r} read before assignment")
    tx.push(cell.contents)


@handler("LOAD_CLASSDEREF")
def load_classderef(tx: Translator, ins: Instruction) -> None:
    load_deref(tx, ins)


@handler("STORE_DEREF")
def store_deref(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    value = tx.pop()
    cell = tx.cells.get(name)
    if cell is None:
        tx.cells[name] = CellValue(value)
        return
    if cell.source is not None:
        tx.output.side_effects.store_cell(cell, value)
    cell.contents = value


@handler("DELETE_DEREF")
def delete_deref(tx: Translator, ins: Instruction) -> None:
    cell = tx.cells.get(str(ins.argval))
    if cell is not None:
        cell.contents = None


def _attr(tx: Translator, obj: object, name: str) -> object:
    assert False


@handler("LOAD_ATTR")
def load_attr(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    name = str(ins.argval)
    obj = tx.pop()
    try:
        value = get_attr(tx, obj, name)
    except AttrMissing:
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"AttributeError: {obj.describe()} has no attribute {name!r}"
        ) from None
    if versions.load_attr_is_method(ins.arg):
        if versions.null_after_callable():
            tx.push(value)
            tx.push(NULL)
        else:
            tx.push(NULL)
            tx.push(value)
    else:
        tx.push(value)


@handler("LOAD_METHOD", until=(3, 12))
def load_method(tx: Translator, ins: Instruction) -> None:
    name = str(ins.argval)
    obj = tx.pop()
    try:
        value = get_attr(tx, obj, name)
    except AttrMissing:
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"AttributeError: {obj.describe()} has no attribute {name!r}"
        ) from None
    tx.push(NULL)
    tx.push(value)


@handler("LOAD_SUPER_ATTR", since=(3, 12))
def load_super_attr(tx: Translator, ins: Instruction) -> None:
    assert ins.arg is not None
    self_value = tx.pop()
    cls_value = tx.pop()
    tx.pop()  # the global `super`
    cls = cls_value.as_constant()
    assert isinstance(cls, type)
    sup = SuperValue(cls, self_value)
    value = get_attr(tx, sup, str(ins.argval))
    if ins.arg & 1:
        tx.push(NULL)
    tx.push(value)


@handler("STORE_ATTR")
def store_attr_handler(tx: Translator, ins: Instruction) -> None:
    owner = tx.pop()
    value = tx.pop()
    store_attr(tx, owner, str(ins.argval), value)


@handler("DELETE_ATTR")
def delete_attr(tx: Translator, ins: Instruction) -> None:
    delete_attribute(tx, tx.pop(), str(ins.argval))


@handler("IMPORT_NAME")
def import_name(tx: Translator, ins: Instruction) -> None:
    fromlist = tx.pop().as_constant()
    level = tx.pop().as_constant()
    name = str(ins.argval)
    if level != 0:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "relative import while tracing")
    module = sys.modules.get(name)
    if module is None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"importing {name!r} while tracing")
    if not fromlist and "." in name:
        module = sys.modules[name.split(".")[0]]
    tx.push(ConstantValue(module))


@handler("IMPORT_FROM")
def import_from(tx: Translator, ins: Instruction) -> None:
    module = tx.stack[-1]
    tx.push(get_attr(tx, module, str(ins.argval)))


@handler("LOAD_ASSERTION_ERROR")
def load_assertion_error(tx: Translator, ins: Instruction) -> None:
    tx.push(ConstantValue(AssertionError))
