"""Python operators on values: arithmetic, comparisons, identity, membership, truth,
subscripts.

Tensors go to the graph (`torch_ops`), constants fold, containers follow Python's rules.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from guards.sources import AttrSource, ConstSource, ItemSource, Source, SubmoduleSource

from capture import torch_ops
from capture.graph_break import HINT_DATA_DEPENDENT, GraphBreakKind, RaisedInTrace, unsupported
from capture.interp import dispatch
from capture.interp.lookup_guards import class_method
from capture.interp.object_keys import input_key
from capture.values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    FunctionValue,
    ListValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    SetValue,
    SymNodeValue,
    TensorValue,
    TupleValue,
    Value,
)
from capture.values.symbolic import SymSliceValue, is_backed, specialize
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator

INPLACE_TO_BINARY: dict[Callable[..., Any], Callable[..., Any]] = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}

_REFLECTED = {
    operator.add: "__radd__",
    operator.sub: "__rsub__",
    operator.mul: "__rmul__",
    operator.truediv: "__rtruediv__",
    operator.matmul: "__rmatmul__",
}
_DUNDER = {
    operator.add: "__add__",
    operator.sub: "__sub__",
    operator.mul: "__mul__",
    operator.truediv: "__truediv__",
    operator.floordiv: "__floordiv__",
    operator.mod: "__mod__",
    operator.pow: "__pow__",
    operator.matmul: "__matmul__",
    operator.eq: "__eq__",
    operator.ne: "__ne__",
    operator.lt: "__lt__",
    operator.le: "__le__",
    operator.gt: "__gt__",
    operator.ge: "__ge__",
    operator.neg: "__neg__",
}


def python_constant(value: Value, specialize_sizes: bool = True) -> tuple[bool, Any]:
    """(True, obj) if `value` is fully known as a Python object (containers included).

    A number computed from input sizes is specialized to its value (guarded) when it is the
    value itself, not when it is inside a container (`shape[1:] + (d,)` stays symbolic)."""
    if isinstance(value, ConstantValue):
        return True, value.value
    if isinstance(value, SymNodeValue):
        if not specialize_sizes:
            return False, None
        # NOTE: a number of input sizes needed as a Python object (a format, a list index):
        # specialized to its value, which the ShapeEnv guards; tensor data stays unknown.
        number = specialize(value)
        return number is not None, number
    if isinstance(value, SymSliceValue):
        # NOTE: a slice whose bounds are sizes or symbolic ints, needed as a Python object
        # (slicing a list): its bounds specialized as numbers are; data stays unknown.
        bounds = [python_constant(part, specialize_sizes) for part in value.parts]
        if not all(ok for ok, _ in bounds):
            return False, None
        return True, slice(*(bound for _, bound in bounds))
    if isinstance(value, (TupleValue, ListValue)):
        items = []
        for item in value.items:
            ok, obj = python_constant(item, False)
            if not ok:
                return False, None
            items.append(obj)
        if isinstance(value, ListValue):
            return True, items
        if value.cls is tuple:
            return True, tuple(items)
        if hasattr(value.cls, "_fields"):
            return True, value.cls(*items)
        return True, value.cls(items)
    if isinstance(value, DictValue):
        out = {}
        for key, (_, item) in value.items.items():
            ok, obj = python_constant(item, False)
            if not ok:
                return False, None
            out[key] = obj
        return True, out
    if isinstance(value, SetValue):
        return True, set(value.items)
    return False, None


def apply_operator(tx: Translator, op: Callable[..., Any], args: list[Value]) -> Value:
    """`op(*args)` for an `operator` module function."""
    if any(isinstance(a, TensorValue) for a in args):
        if op in INPLACE_TO_BINARY and not isinstance(args[0], TensorValue):
            op = INPLACE_TO_BINARY[op]
        return torch_ops.call_torch(tx, op, args, {})
    if any(isinstance(a, SymNodeValue) for a in args) and all(
        isinstance(a, (SymNodeValue, ConstantValue)) for a in args
    ):
        # Arithmetic and comparisons on data-dependent numbers: computed in the graph.
        return torch_ops.call_torch(tx, INPLACE_TO_BINARY.get(op, op), args, {})
    if op is operator.iadd and isinstance(args[0], ListValue):
        # `log += [x]`: extends without reading the list (no length guard; see ListValue).
        return _sequence_op(tx, op, args[0], args[1]) or args[0]
    consts = [python_constant(a) for a in args]
    if all(ok for ok, _ in consts) and any(isinstance(a, SetValue) for a in args) and (
        op not in INPLACE_TO_BINARY
    ):
        result = op(*[obj for _, obj in consts])
        if isinstance(result, set):
            return SetValue({k: ConstantValue(k) for k in result})
        return ConstantValue(result)
    if all(ok for ok, _ in consts) and all(
        not isinstance(a, (ListValue, DictValue, SetValue)) for a in args
    ):
        try:
            return ConstantValue(op(*[obj for _, obj in consts]))
        except Exception as e:  # noqa: BLE001  # the user's code raises this too
            raise RaisedInTrace(e) from None
    if len(args) == 1 and isinstance(args[0], ObjectValue):
        name = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
                operator.abs: "__abs__"}.get(op)
        method = getattr(args[0].cls, name, None) if name else None
        if method is not None and hasattr(method, "__code__"):

            return dispatch.call_value(tx, ConstantValue(method), [args[0]], {})
    if len(args) == 2:
        result = _sequence_op(tx, op, args[0], args[1])
        if result is not None:
            return result
        result = _user_dunder(tx, op, args[0], args[1])
        if result is not None:
            return result
    if op in (operator.eq, operator.ne) and len(args) == 2:
        equal = sequence_equal(tx, args[0], args[1])
        if equal is not None:
            return ConstantValue(equal if op is operator.eq else not equal)
        same = is_same(args[0], args[1])
        if same is not None:
            return ConstantValue(same if op is operator.eq else not same)
    if op is operator.not_:
        return ConstantValue(not truth(tx, args[0]))
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT,
        f"operator {op.__name__} on {', '.join(a.describe() for a in args)}",
    )


def _sequence_op(tx: Translator, op: Callable[..., Any], a: Value, b: Value) -> Value | None:
    if op is operator.iadd and isinstance(a, ListValue):
        tx.output.side_effects.mutate_container(a)
        a.extend(b.unpack())
        return a
    binary = INPLACE_TO_BINARY.get(op, op)
    if binary is operator.add:
        if isinstance(a, ListValue) and isinstance(b, ListValue):
            return ListValue(a.items + b.items)
        if isinstance(a, TupleValue) and isinstance(b, TupleValue):
            return TupleValue(a.items + b.items)
        if isinstance(a, TupleValue) and isinstance(b, ConstantValue) and isinstance(b.value, tuple):
            return TupleValue(a.items + b.unpack())
        if isinstance(a, ConstantValue) and isinstance(a.value, tuple) and isinstance(b, TupleValue):
            return TupleValue(a.unpack() + b.items)
    if binary is operator.mul:
        if isinstance(a, (ListValue, TupleValue)) and isinstance(b, ConstantValue):
            times = int(b.value)  # type: ignore[call-overload]  # int-like constant
            if isinstance(a, ListValue):
                return ListValue(a.items * times)
            return TupleValue(a.items * times)
        if isinstance(b, (ListValue, TupleValue)) and isinstance(a, ConstantValue):
            return _sequence_op(tx, op, b, a)
    if binary is operator.or_ and isinstance(a, DictValue) and isinstance(b, DictValue):
        merged = DictValue(dict(a.items), None, a.cls)
        merged.update_items(b.items)
        return merged
    if op is operator.ior and isinstance(a, DictValue) and isinstance(b, DictValue):
        a.update_items(b.items)
        tx.output.side_effects.mutate_container(a)
        return a
    return None


def _user_dunder(tx: Translator, op: Callable[..., Any], a: Value, b: Value) -> Value | None:

    name = _DUNDER.get(INPLACE_TO_BINARY.get(op, op))
    if name is None:
        return None
    if isinstance(a, ObjectValue):
        method = class_method(tx, a.cls, name)
        if method is not None and hasattr(method, "__code__"):
            return dispatch.call_value(tx, ConstantValue(method), [a, b], {})
    rname = _REFLECTED.get(INPLACE_TO_BINARY.get(op, op))
    if rname is not None and isinstance(b, ObjectValue):
        method = class_method(tx, b.cls, rname)
        if method is not None and hasattr(method, "__code__"):
            return dispatch.call_value(tx, ConstantValue(method), [b, a], {})
    return None


def real_object(value: Value) -> tuple[bool, object]:
    """(True, obj) if `value` stands for one known real object (identity is meaningful)."""
    if isinstance(value, ConstantValue):
        return True, value.value
    if isinstance(value, ModuleValue):
        return True, value.module
    if isinstance(value, ObjectValue) and value.obj is not None:
        return True, value.obj
    return False, None


def _sequence_items(value: Value) -> tuple[type, list[Value]] | None:
    """(list or tuple, items) of a list or tuple value (torch.Size and named tuples are
    tuples); None for anything else."""
    if isinstance(value, TupleValue) and issubclass(value.cls, tuple):
        return tuple, list(value.items)
    if isinstance(value, ListValue):
        return list, list(value.items)
    if isinstance(value, ConstantValue) and isinstance(value.value, (list, tuple)):
        return (list if isinstance(value.value, list) else tuple), value.unpack()
    return None


def sequence_equal(tx: Translator, a: Value, b: Value) -> bool | None:
    """`a == b` for two lists or two tuples, item by item as Python compares them (an item
    may be a size of an input: `x.shape == (2, 3)` guards on the sizes); None when `a` and
    `b` are not both lists or tuples."""
    left, right = _sequence_items(a), _sequence_items(b)
    if left is None or right is None:
        return None
    if left[0] is not right[0] or len(left[1]) != len(right[1]):
        return False
    for x, y in zip(left[1], right[1]):
        if is_same(x, y) is True:
            continue
        if not truth(tx, apply_operator(tx, operator.eq, [x, y])):
            return False
    return True


def is_same(a: Value, b: Value) -> bool | None:
    """`a is b` if it can be decided at trace time."""
    if a is b:
        return True
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a.node is b.node
    ka, oa = real_object(a)
    kb, ob = real_object(b)
    if ka and kb:
        return oa is ob
    # A value made while tracing is never an existing constant such as None.
    if ka or kb:
        return False
    if type(a) is not type(b):
        return False
    return None


def identity(a: Value, b: Value) -> bool:
    same = is_same(a, b)
    if same is None:
        return False
    return same


def truth(tx: Translator, value: Value) -> bool:
    """bool(value) at trace time."""
    if isinstance(value, ConstantValue):
        return bool(value.value)
    if isinstance(value, (ListValue, TupleValue, SetValue)):
        return bool(value.items)
    if isinstance(value, DictValue):
        return bool(value.items)
    if isinstance(value, TensorValue):
        raise unsupported(
            GraphBreakKind.DATA_DEPENDENT,
            f"branching on the value of {value.describe()}",
            HINT_DATA_DEPENDENT,
        )
    if isinstance(value, SymNodeValue):
        return _symbolic_truth(value)
    if isinstance(value, ModuleValue):
        if hasattr(value.module, "__len__"):
            guard_module_entries(tx, value)
            return len(value.module) > 0  # type: ignore[arg-type]  # ModuleList and friends
        return True
    if isinstance(value, ObjectValue):
        if value.dict_items is not None:
            return bool(value.dict_items.items)
        for name in ("__bool__", "__len__"):
            method = class_method(tx, value.cls, name)
            if method is not None:
                if value.obj is not None and not hasattr(method, "__code__"):
                    return bool(value.obj)

                result = dispatch.call_value(tx, ConstantValue(method), [value], {})
                return truth(tx, result)
        return True
    if isinstance(value, (FunctionValue, MethodValue)):
        return True
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"bool() of {value.describe()}")


def _symbolic_truth(value: SymNodeValue) -> bool:
    """bool() of a data-dependent number: only when the ShapeEnv proves it for every value
    the symbols can take (no guard, no assumption); otherwise unsupported."""
    from torch.fx.experimental.symbolic_shapes import statically_known_false, statically_known_true

    fake = value.fake
    cond = fake if isinstance(fake, torch.SymBool) else fake != 0
    if statically_known_true(cond):
        return True
    if statically_known_false(cond):
        return False
    if is_backed(fake):
        # NOTE: a relation of input sizes (`x.shape[0] > 4`): decided by the example's sizes
        # and recorded by the ShapeEnv, which makes it a guard of this entry.
        return bool(cond)
    raise unsupported(
        GraphBreakKind.DATA_DEPENDENT,
        f"branching on a value read from a tensor ({value.describe()})",
        HINT_DATA_DEPENDENT,
    )


def contains(tx: Translator, item: Value, container: Value) -> bool:
    """`item in container` at trace time."""
    if isinstance(container, DictViewValue):
        if container.kind == "keys":
            return contains(tx, item, container.dict_value)
        return contains(tx, item, ListValue(container.unpack()))
    if isinstance(container, DictValue):
        ok, key = python_constant(item)
        if not ok:
            ok, key = input_key(tx, item)  # NOTE: `p in optimizer.state`
        if not ok:
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant dict key")
        return key in container.items
    if isinstance(container, SetValue):
        ok, key = python_constant(item)
        return ok and key in container.items
    if isinstance(container, ObjectValue):
        method = getattr(container.cls, "__contains__", None)
        if method is not None and hasattr(method, "__code__"):

            return truth(tx, dispatch.call_value(tx, ConstantValue(method), [container, item], {}))
        if container.obj is None and container.dict_items is None:

            return contains(tx, item, ListValue(dispatch.iterate(tx, container).unpack()))
    if isinstance(container, ObjectValue) and container.dict_items is not None:
        return contains(tx, item, container.dict_items)
    if isinstance(container, ObjectValue) and container.obj is not None:
        ok, needle = python_constant(item)
        if ok:
            method = getattr(container.cls, "__contains__", None)
            if method is not None and hasattr(method, "__code__"):

                return truth(tx, dispatch.call_value(tx, ConstantValue(method), [container, item], {}))
            try:
                return needle in container.obj  # type: ignore[operator]  # any container
            except TypeError as e:
                raise RaisedInTrace(e) from None
    if isinstance(container, ModuleValue) and isinstance(item, ConstantValue):
        guard_module_entries(tx, container)
        return item.value in container.module  # type: ignore[operator]  # ModuleDict
    if isinstance(container, ConstantValue) and not isinstance(container.value, (list, tuple)):
        ok, needle = python_constant(item)
        if ok:
            try:
                return needle in container.value  # type: ignore[operator]  # any container
            except TypeError as e:
                raise RaisedInTrace(e) from None
    if isinstance(container, (ListValue, TupleValue, ConstantValue)):
        ok, needle = python_constant(item)
        for candidate in container.unpack():
            same = is_same(item, candidate)
            if same:
                return True
            cok, cobj = python_constant(candidate)
            if ok and cok:
                if needle == cobj:
                    return True
            elif isinstance(candidate, TensorValue) or isinstance(item, TensorValue):
                raise unsupported(
                    GraphBreakKind.DATA_DEPENDENT, "`in` comparing tensors", HINT_DATA_DEPENDENT
                )
            elif sequence_equal(tx, item, candidate):
                return True  # NOTE: `x.shape in [(2, 3)]`: sizes compared (and guarded)
        return False
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"`in` on {container.describe()}")


def get_item(tx: Translator, container: Value, key: Value) -> Value:
    """`container[key]`."""

    if isinstance(container, TensorValue):
        if isinstance(key, SymNodeValue) and key.python_type() is int:
            # `x[t.item()]`: fake tensors refuse a symbolic index; select is the same op.
            return torch_ops.call_torch(tx, torch.select, [container, ConstantValue(0), key], {})
        return torch_ops.call_torch(tx, operator.getitem, [container, key], {})
    if isinstance(container, (ListValue, TupleValue)):
        ok, index = python_constant(key)
        if not ok:
            if isinstance(key, TensorValue):
                raise unsupported(GraphBreakKind.DATA_DEPENDENT, "indexing a list with a tensor")
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant list index")
        if isinstance(container, ListValue) and type(index) is int:
            appended = container.appended_item(index)
            if appended is not None:
                return appended  # `log[-1]` right after `log.append(...)`: no length read
        if isinstance(index, slice):
            items = container.items[index]
            if isinstance(container, ListValue):
                return ListValue(items)
            return TupleValue(items)
        try:
            item: Value = container.items[index]
            return item
        except (IndexError, TypeError) as e:
            raise RaisedInTrace(e) from None
    if isinstance(container, DictValue):
        ok, k = python_constant(key)
        if not ok:
            ok, k = input_key(tx, key)  # NOTE: `optimizer.state[p]`
        stored = container.stored_item(k) if ok else None
        if stored is not None:
            return stored  # `d[k]` right after `d[k] = v`: no keys read
        if ok and k in container.items:
            return container.items[k][1]
        if ok and container.default_factory is not None:
            new = dispatch.call_value(tx, container.default_factory, [], {})
            container.items[k] = (key, new)
            tx.output.side_effects.mutate_container(container)
            return new
        if ok:
            raise RaisedInTrace(KeyError(k))
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "a dict lookup with a non-constant key")
    if isinstance(container, ConstantValue):
        ok, index = python_constant(key)
        if ok:
            try:
                return wrap(tx.output, container.value[index], None)  # type: ignore[index]
            except Exception as e:  # noqa: BLE001  # the user's code raises this too
                raise RaisedInTrace(e) from None
    if isinstance(container, ModuleValue):
        return _module_item(tx, container, key)
    if isinstance(container, ObjectValue):
        if _is_environ(container.obj):
            return _environ_item(tx, container.obj, container.source, key)
        getitem = class_method(tx, container.cls, "__getitem__")
        if getitem is not None and hasattr(getitem, "__code__"):
            return dispatch.call_value(tx, ConstantValue(getitem), [container, key], {})
        if container.dict_items is not None:
            return get_item(tx, container.dict_items, key)
        ok, index = python_constant(key)
        if container.obj is not None and ok:
            try:
                item = container.obj[index]  # type: ignore[index]  # any subscriptable
            except Exception as e:  # noqa: BLE001
                raise unsupported(GraphBreakKind.EXCEPTION, f"indexing raised {e!r}") from None
            src = None
            if container.source is not None and isinstance(index, (int, str)):
                src = ItemSource(container.source, index)
            return wrap(tx.output, item, src)
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"indexing {container.describe()} with {key.describe()}"
    )


def _is_environ(obj: object) -> bool:
    cls = type(obj)
    return cls.__module__ == "os" and cls.__name__ == "_Environ"


def _environ_item(tx: Translator, environ: Any, source: Source | None, key: Value) -> Value:
    """`environ[key]` of the `os` module (and so `.get`, `in` and `getenv`, which reach it):
    the variable's value as a constant, guarded (a variable set, changed or removed later
    recompiles), or KeyError when it is not set, guarded to stay unset."""
    from capture.output_graph import GuardKind

    if source is None:
        # NOTE: `environ` reached through the `os` module (a root another process finds
        # again by name: the frame cache keeps such guards)
        os_module = sys.modules.get("os")
        source = (AttrSource(ConstSource.of(os_module), "environ")
                  if getattr(os_module, "environ", None) is environ else ConstSource.of(environ))

    ok, name = python_constant(key)
    if not ok or not isinstance(name, str):
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT,
                          "reading the environment (the os module's environ) with a "
                          "non-constant or non-string key")
    value = environ.get(name)
    if value is None:
        tx.output.add_guard(source, GuardKind.KEY_ABSENT, name)
        raise RaisedInTrace(KeyError(name))
    tx.output.add_guard(ItemSource(source, name), GuardKind.CONST_EQ, value)
    return ConstantValue(value)


def guard_module_entries(tx: Translator, mv: ModuleValue) -> None:
    """Guard the children of a container module (`ModuleList`, `Sequential`, `ModuleDict`,
    `ParameterList`/`ParameterDict`): its length, keys and order, read by `len`, iteration,
    indexing, `in` and truth tests, may change after compiling (`append`, `del`)."""
    if mv.source is None:
        return
    from capture.output_graph import GuardKind

    module = mv.module
    table = "_parameters" if isinstance(
        module, (torch.nn.ParameterList, torch.nn.ParameterDict)
    ) else "_modules"
    entries = getattr(module, table)
    tx.output.add_guard(AttrSource(mv.source, table), GuardKind.DICT_KEYS, tuple(entries))


def _module_item(tx: Translator, mv: ModuleValue, key: Value) -> Value:
    module = mv.module
    guard_module_entries(tx, mv)
    ok, index = python_constant(key)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant module index")
    if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
        names = list(module._modules)
        if isinstance(index, slice):
            if isinstance(module, torch.nn.Sequential):
                sliced = module[index]
                tx.output.keepalive.append(sliced)
                if mv.source is not None:
                    for child_name in names[index]:
                        child = module._modules[child_name]
                        tx.output.known_sources[id(child)] = SubmoduleSource(
                            mv.source, child_name
                        )
                return ModuleValue(sliced, None, f"{mv.path}[{index.start}:{index.stop}]")
            return ListValue(
                [_module_item(tx, mv, ConstantValue(i)) for i in range(len(names))[index]]
            )
        name = names[index]
    elif isinstance(module, torch.nn.ModuleDict):
        name = index
    elif isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
        if isinstance(module, torch.nn.ParameterList):
            index = str(index if index >= 0 else len(module) + index)

        return dispatch.get_attr(tx, mv, str(index))
    else:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"indexing {mv.describe()}")
    sub = module._modules[name]
    source = (
        SubmoduleSource(mv.source, name)
        if mv.source is not None
        else tx.output.known_sources.get(id(sub))
    )
    value = wrap(tx.output, sub, source)
    if isinstance(value, ModuleValue) and value.path == "<module>":
        value.path = f"{mv.path}.{name}"
    return value


def set_item(tx: Translator, container: Value, key: Value, value: Value) -> None:
    """`container[key] = value`."""

    if isinstance(container, TensorValue):
        torch_ops.call_torch(tx, operator.setitem, [container, key, value], {})
        return
    if isinstance(container, ListValue):
        ok, index = python_constant(key)
        if not ok:
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant list index")
        try:
            if isinstance(index, slice):
                container.items[index] = value.unpack()
            else:
                container.items[index] = value
        except (IndexError, TypeError, ValueError) as e:  # the user's code raises this too
            raise RaisedInTrace(e) from None
        tx.output.side_effects.mutate_container(container)
        return
    if isinstance(container, DictValue):
        ok, k = python_constant(key)
        if not ok:
            ok, k = input_key(tx, key)  # NOTE: `optimizer.state[p] = ...`
        if not ok:
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant dict key")
        tx.output.side_effects.mutate_container(container)
        container.set_item(k, (key, value))
        return
    if isinstance(container, ObjectValue):
        setitem = getattr(container.cls, "__setitem__", None)
        if setitem is not None and hasattr(setitem, "__code__"):
            dispatch.call_value(tx, ConstantValue(setitem), [container, key, value], {})
            return
        if container.dict_items is not None:
            set_item(tx, container.dict_items, key, value)
            return
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"item assignment on {container.describe()}")


def del_item(tx: Translator, container: Value, key: Value) -> None:
    """`del container[key]`."""
    ok, k = python_constant(key)
    if not ok:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "non-constant key in del")
    if (isinstance(container, DictValue) and k in container.items) or isinstance(container,
                                                                                 ListValue):
        del container.items[k]
    else:
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"del on {container.describe()}")
    tx.output.side_effects.mutate_container(container)
