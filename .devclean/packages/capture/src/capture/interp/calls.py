"""Calling values: inlining Python functions and module forwards, dispatching torch
callables to the graph and everything else to the special-callable table.

In: a callable value and argument values. Out: the result value.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
from guards.sources import AttrSource, ClosureSource, ConstSource, DefaultSource, ItemSource

from capture import policy, torch_ops
from capture.graph_break import GraphBreakKind, new_exception, unsupported
from capture.interp import attributes, builtins_table, context_specials, dispatch, operators
from capture.interp.lookup_guards import class_method, guard_no_global_module_hooks
from capture.output_graph import GuardKind
from capture.values import (
    NULL,
    CellValue,
    ConstantValue,
    ContextValue,
    DictValue,
    FunctionValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
    TensorValue,
    TupleValue,
    Value,
)
from capture.values.wrap import is_library_module, wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator


def call_value(tx: Translator, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`fn(*args, **kwargs)` on values."""
    if isinstance(fn, ConstantValue):
        return call_python(tx, fn.value, args, kwargs, fn)
    if isinstance(fn, FunctionValue):
        return inline_function(tx, fn, args, kwargs)
    if isinstance(fn, MethodValue):
        return call_value(tx, fn.func, [fn.self_value, *args], kwargs)
    if isinstance(fn, PartialValue):
        return call_value(tx, fn.func, [*fn.args, *args], {**fn.kwargs, **kwargs})
    if isinstance(fn, ModuleValue):
        return call_module(tx, fn, args, kwargs)
    if isinstance(fn, ContextValue):

        if len(args) == 1 and not kwargs:
            return PartialValue(ConstantValue(context_specials.run_in_context), [fn, args[0]], {})
        return fn
    if isinstance(fn, ObjectValue):
        call = inspect.getattr_static(fn.cls, "__call__", None)
        class_method(tx, fn.cls, "__call__")  # NOTE: guards the lookup
        if inspect.isfunction(call):
            return call_value(tx, ConstantValue(call), [fn, *args], kwargs)
        if fn.obj is not None:

            handled = builtins_table.call_callable_object(tx, fn.obj, args, kwargs)
            if handled is not None:
                return handled
    raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"calling {fn.describe()}")


def call_python(
    tx: Translator,
    obj: object,
    args: list[Value],
    kwargs: dict[str, Value],
    fn_value: Value | None = None,
) -> Value:
    """Call a real Python callable known at trace time."""

    rule = policy.user_rule(obj)
    if rule is not None:
        return _call_by_rule(tx, obj, rule, args, kwargs)
    special = builtins_table.lookup(obj)
    if special is not None:
        return special(tx, args, kwargs)
    if isinstance(obj, type):
        return construct(tx, obj, args, kwargs)
    handled = builtins_table.call_callable_object(tx, obj, args, kwargs)
    if handled is not None:
        return handled
    if isinstance(obj, types.MethodType):
        self_value = wrap(tx.output, obj.__self__, None)
        return call_python(tx, obj.__func__, [self_value, *args], kwargs)
    owner = getattr(obj, "__self__", None)
    if isinstance(obj, types.BuiltinMethodType) and isinstance(owner, type):
        # NOTE: a C classmethod bound to its class (`F.apply` of an autograd.Function from
        # torch 2.14): its special takes the class first, as a Python classmethod's does.
        descriptor = inspect.getattr_static(owner, obj.__name__, None)
        bound_special = builtins_table.lookup(descriptor)
        if bound_special is not None:
            return bound_special(tx, [wrap(tx.output, owner, None), *args], kwargs)
    decision = policy.decide(obj)
    if decision is policy.Decision.INLINE:
        assert isinstance(obj, types.FunctionType)
        return inline_function(tx, obj, args, kwargs, fn_value)
    if decision is policy.Decision.GRAPH and _takes_callable(obj, args, kwargs):
        # A torch Python function given a module or function (e.g. a loss's
        # `distance_function`): its body calls it, so run the body symbolically.
        assert isinstance(obj, types.FunctionType)
        return inline_function(tx, obj, args, kwargs, fn_value)
    if decision is policy.Decision.GRAPH:
        assert callable(obj)
        if policy.is_tensor_method(obj) and args and isinstance(args[0], TensorValue):
            name = getattr(obj, "__name__", "")
            return torch_ops.call_torch(tx, obj, args, kwargs, method=name)
        return torch_ops.call_torch(tx, obj, args, kwargs)
    folded = builtins_table.try_fold(obj, args, kwargs)
    if folded is not None:
        return folded
    name = getattr(obj, "__qualname__", None) or repr(obj)
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_CALL,
        f"call to {policy.module_of(obj)}.{name} is not supported",
    )


def _call_by_rule(
    tx: Translator,
    obj: object,
    rule: tuple[policy.Rule, types.FunctionType | None],
    args: list[Value],
    kwargs: dict[str, Value],
) -> Value:
    """A call of a callable the user gave a rule (`graph_break`, `allow_in_graph`, ...)."""

    kind, polyfill = rule
    name = getattr(obj, "__qualname__", None) or repr(obj)
    if kind is policy.Rule.GRAPH_BREAK:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "graph_break() called",
                          "A graph break the program asked for: remove the call to get "
                          "one graph.")
    if kind is policy.Rule.DISALLOW:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"{name} is marked disallow_in_graph",
                          "It runs eagerly between graphs; drop the disallow_in_graph rule "
                          "to keep it in the graph.")
    if kind is policy.Rule.SUBSTITUTE:
        assert polyfill is not None
        return inline_function(tx, polyfill, args, kwargs)
    if kind is policy.Rule.CONSTANT_RESULT:
        ok, values = operators.python_constant(TupleValue(list(args)))
        ok_kw, options = operators.python_constant(DictValue(
            {k: (ConstantValue(k), v) for k, v in kwargs.items()}))
        if not (ok and ok_kw):
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                              f"assume_constant_result function {name} called with tensors "
                              "or values made while tracing",
                              "Its arguments must be constants at capture time.")
        assert callable(obj)
        result = obj(*values, **options)
        if _holds_tensor(result):
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                              f"assume_constant_result function {name} returned a tensor",
                              "Only Python values can be constants of a graph.")
        return builtins_table.wrap_constant_result(result)
    assert callable(obj)
    return torch_ops.call_torch(tx, obj, args, kwargs)


def _holds_tensor(obj: object) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_holds_tensor(x) for x in obj)
    if isinstance(obj, dict):
        return any(_holds_tensor(x) for x in obj.values())
    return False


def _takes_callable(obj: object, args: list[Value], kwargs: dict[str, Value]) -> bool:
    """Whether `obj` is a Python function given a module or user function as an argument."""
    if not isinstance(obj, types.FunctionType):
        return False
    callables = (ModuleValue, FunctionValue, MethodValue, PartialValue)

    def is_callable(v: Value) -> bool:
        if isinstance(v, ConstantValue):
            return isinstance(v.value, types.FunctionType)
        return isinstance(v, callables)

    return any(is_callable(a) for a in args) or any(is_callable(v) for v in kwargs.values())


# -- argument binding -----------------------------------------------------------------
def bind_arguments(
    code: types.CodeType,
    name: str,
    args: list[Value],
    kwargs: dict[str, Value],
    defaults: tuple[Value, ...],
    kwdefaults: dict[str, Value],
) -> dict[str, Value]:
    """Map argument values to the parameter names of `code` (like CPython's call)."""
    nargs = code.co_argcount
    nkwonly = code.co_kwonlyargcount
    nposonly = code.co_posonlyargcount
    names = code.co_varnames
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, Value] = {}
    positional = names[:nargs]
    for pname, value in zip(positional, args):
        bound[pname] = value
    extra = args[nargs:]
    index = nargs + nkwonly
    if has_varargs:
        bound[names[index]] = TupleValue(list(extra))
        index += 1
    elif extra:
        raise unsupported(
            GraphBreakKind.EXCEPTION,
            f"{name}() takes {nargs} positional arguments but {len(args)} were given",
        )
    varkw: dict[object, tuple[Value, Value]] = {}
    kwonly = names[nargs : nargs + nkwonly]
    for key, value in kwargs.items():
        if key in kwonly or (key in positional and positional.index(key) >= nposonly):
            if key in bound:
                raise unsupported(
                    GraphBreakKind.EXCEPTION, f"{name}() got multiple values for {key!r}"
                )
            bound[key] = value
        elif has_varkw:
            varkw[key] = (ConstantValue(key), value)
        else:
            raise unsupported(
                GraphBreakKind.EXCEPTION, f"{name}() got an unexpected keyword {key!r}"
            )
    first_default = nargs - len(defaults)
    for i, pname in enumerate(positional):
        if pname not in bound:
            if i >= first_default:
                bound[pname] = defaults[i - first_default]
            else:
                raise unsupported(
                    GraphBreakKind.EXCEPTION, f"{name}() missing argument {pname!r}"
                )
    for pname in kwonly:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise unsupported(
                    GraphBreakKind.EXCEPTION, f"{name}() missing keyword {pname!r}"
                )
    if has_varkw:
        bound[names[index]] = DictValue(varkw)
    return bound


# -- inlining ---------------------------------------------------------------------------
def inline_function(
    tx: Translator,
    fn: types.FunctionType | FunctionValue,
    args: list[Value],
    kwargs: dict[str, Value],
    fn_value: Value | None = None,
    module_entry: tuple[str, tuple[str, type]] | None = None,
    fx_module: object | None = None,
) -> Value:
    """Run a Python function's body symbolically in a child translator."""
    from capture.interp.translator import Translator

    output = tx.output
    if isinstance(fn, FunctionValue):
        code = fn.code
        f_globals = fn.globals
        name = fn.name
        defaults = fn.defaults
        kwdefaults = fn.kwdefaults
        closure: tuple[CellValue, ...] = fn.closure
    else:
        code = fn.__code__
        f_globals = fn.__globals__
        name = fn.__name__
        # NOTE: the function is fixed for the entry (how it was reached is guarded), so its
        # defaults and closure cells are guarded through the function itself: short
        # accessors, whatever chain of closures and attributes led to it.
        src = ConstSource.of(fn)
        # NOTE: `__code__` is writable: the same function object may run other code later.
        output.add_guard(AttrSource(src, "__code__"), GuardKind.ID_MATCH, code)
        if fn.__defaults__:
            # One identity check on the tuple fixes every immutable default in it.
            output.add_guard(AttrSource(src, "__defaults__"), GuardKind.ID_MATCH, fn.__defaults__)
        defaults = tuple(
            ConstantValue(d) if _immutable_literal(d) else wrap(output, d, DefaultSource(src, i))
            for i, d in enumerate(fn.__defaults__ or ())
        )
        kwdefaults = {
            k: wrap(output, d, DefaultSource(src, k))
            for k, d in (fn.__kwdefaults__ or {}).items()
        }
        cells = []
        for i, cell in enumerate(fn.__closure__ or ()):
            known = output.side_effects.cell_value(cell)
            if isinstance(known, CellValue):
                # NOTE: a cell seen before in this trace (`nonlocal count; count += 1` in a
                # helper called twice): its pending contents, not the real cell's.
                cells.append(known)
                continue
            csrc = ClosureSource(src, i, code.co_freevars[i])
            try:
                contents = cell.cell_contents
            except ValueError:
                made = CellValue(None, csrc)
            else:
                made = CellValue(wrap(output, contents, csrc), csrc)
            output.side_effects.remember_cell(cell, made)
            cells.append(made)
        closure = tuple(cells)
    if policy.is_disabled(code):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"{name} is marked disabled")
    f_locals = bind_arguments(code, name, args, kwargs, defaults, kwdefaults)
    cell_map: dict[str, CellValue] = dict(zip(code.co_freevars, closure))
    is_gen = bool(code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE))
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"coroutine {name}")
    child = Translator(
        output,
        code,
        f_globals,
        f_locals,
        cell_map,
        parent=tx,
        module_entry=module_entry,
        is_generator=is_gen,
    )
    child.fx_module = fx_module
    if f_globals is tx.f_globals:
        child.globals_source = tx.globals_source
    elif (
        isinstance(fn, types.FunctionType)
        and fn_value is not None
        and fn_value.source is not None
        and not is_library_module(f_globals.get("__name__"))
    ):
        child.globals_source = AttrSource(fn_value.source, "__globals__")
    return child.run()


# -- modules ----------------------------------------------------------------------------
def call_module(
    tx: Translator, mv: ModuleValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """`module(*args, **kwargs)`: pre-hooks, the inlined forward, forward hooks."""
    module = mv.module
    if module._backward_hooks or module._backward_pre_hooks:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "module backward hooks")
    if module._forward_pre_hooks_with_kwargs or module._forward_hooks_with_kwargs:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "module hooks with kwargs")

    guard_no_global_module_hooks(tx)

    if mv.source is not None:
        for table in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                      "_backward_pre_hooks"):
            hooks = getattr(module, table)
            tx.output.add_guard(AttrSource(mv.source, table), GuardKind.LEN, len(hooks))
    def hook_value(table: str, key: int, hook: object) -> Value:
        src = ItemSource(AttrSource(mv.source, table), key) if mv.source is not None else None
        return wrap(tx.output, hook, src)

    for key, hook in list(module._forward_pre_hooks.items()):
        result = call_value(
            tx, hook_value("_forward_pre_hooks", key, hook), [mv, TupleValue(list(args))], {}
        )
        if not (isinstance(result, ConstantValue) and result.value is None):
            args = result.unpack() if isinstance(result, TupleValue) else [result]
    forward = attributes.get_attr(tx, mv, "forward")
    entry: tuple[str, tuple[str, type]] = (mv.path, (mv.path, type(module)))
    if isinstance(forward, MethodValue) and isinstance(forward.func, ConstantValue):
        func = forward.func.value
        if isinstance(func, types.FunctionType) and policy.decide(func) is not policy.Decision.GRAPH:
            fx_module = module if isinstance(module, torch.fx.GraphModule) else None
            out = inline_function(tx, func, [mv, *args], kwargs, forward.func, entry, fx_module)
        else:
            out = call_value(tx, forward, args, kwargs)
    else:
        out = call_value(tx, forward, args, kwargs)
    for key, hook in list(module._forward_hooks.items()):
        result = call_value(
            tx, hook_value("_forward_hooks", key, hook), [mv, TupleValue(list(args)), out], {}
        )
        if not (isinstance(result, ConstantValue) and result.value is None):
            out = result
    return out


# -- classes ----------------------------------------------------------------------------
def construct(tx: Translator, cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`cls(*args, **kwargs)` for a class without a special handler."""

    if isinstance(inspect.getattr_static(type(cls), "__call__", None), types.FunctionType):
        # NOTE: the metaclass's own `__call__` decides what calling the class does (count
        # instances, return a cached one): it runs for real.
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"constructing {cls.__qualname__}, whose metaclass "
                          f"{type(cls).__qualname__} defines __call__")
    if issubclass(cls, torch.nn.Module):
        module = _construct_stateless_module(cls, args, kwargs)
        if module is not None:
            tx.output.keepalive.append(module)
            return ModuleValue(module, None, f"<{cls.__name__}>")
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_CALL, f"creating the module {cls.__name__} while tracing"
        )
    if issubclass(cls, BaseException):

        ok, values = operators.python_constant(TupleValue(list(args)))
        if not ok or kwargs:
            raise unsupported(
                GraphBreakKind.EXCEPTION, f"creating the exception {cls.__name__}"
            )
        return ConstantValue(new_exception(cls, tuple(values)))
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        fields = list(cls._fields)
        defaults = getattr(cls, "_field_defaults", {})
        items: list[Value] = list(args)
        for field in fields[len(args) :]:
            if field in kwargs:
                items.append(kwargs[field])
            elif field in defaults:
                items.append(ConstantValue(defaults[field]))
            else:
                raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"{cls.__name__}() missing {field}")
        return TupleValue(items, None, cls)
    folded = builtins_table.try_fold(cls, args, kwargs)
    if folded is not None:
        return folded
    if cls is torch.Tensor:
        return torch_ops.call_torch(tx, cls, args, kwargs)
    if cls.__module__ == "builtins" or cls.__module__.startswith("torch"):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"constructing {cls.__qualname__}")
    new = inspect.getattr_static(cls, "__new__", None)
    if new is not object.__new__ and not (isinstance(new, staticmethod) and new.__func__ in (dict.__new__,)) and new is not dict.__new__:
        from collections import OrderedDict

        if new is not OrderedDict.__new__:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_CALL, f"{cls.__qualname__} defines __new__"
            )
    obj = ObjectValue(None, cls)
    obj.init_args = (list(args), dict(kwargs))
    if issubclass(cls, dict):
        obj.dict_items = DictValue({}, None, dict)
    init = inspect.getattr_static(cls, "__init__", None)
    if inspect.isfunction(init):
        call_value(tx, ConstantValue(init), [obj, *args], kwargs)
    elif args or kwargs:
        if issubclass(cls, dict):
            builtins_table.dict_update(tx, obj.dict_items, args, kwargs)
        else:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_CALL, f"{cls.__qualname__}() with arguments"
            )
    post = inspect.getattr_static(cls, "__post_init__", None)
    del post  # dataclass __init__ calls __post_init__ itself
    return obj


def _immutable_literal(obj: object) -> bool:
    """None, bools, ints, floats and strs: fixed by the identity of the tuple holding them."""
    return obj is None or type(obj) in (bool, int, float, str)


def is_null(value: Value) -> bool:
    return value is NULL


def context_exit_value(ctx: ContextValue) -> Value:
    """The callable BEFORE_WITH pushes: calling it exits `ctx`."""

    return MethodValue(ctx, ConstantValue(context_specials.context_exit))


def unused(*_: Any) -> None:
    """Keeps imports referenced for type checkers."""


def _construct_stateless_module(
    cls: type, args: list[Value], kwargs: dict[str, Value]
) -> torch.nn.Module | None:
    """Build a module made inside forward (e.g. a loss) for real, if it holds no tensors."""

    values = []
    for a in args:
        ok, obj = operators.python_constant(a)
        if not ok:
            return None
        values.append(obj)
    options = {}
    for k, v in kwargs.items():
        ok, obj = operators.python_constant(v)
        if not ok:
            return None
        options[k] = obj
    try:
        module = cls(*values, **options)
    except Exception:  # noqa: BLE001  # then it is not supported
        return None
    assert isinstance(module, torch.nn.Module)
    if any(True for _ in module.parameters()) or any(
        b is not None for b in module.buffers()
    ):
        return None
    return module


dispatch.call_value = call_value
