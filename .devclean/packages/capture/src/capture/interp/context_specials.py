"""Context managers in traced code: `torch.no_grad`, `enable_grad`, `set_grad_enabled`,
`torch.autocast` (a `ContextValue`: entering and leaving record graph nodes and switch the
state for the rest of the trace), user objects with `__enter__`/`__exit__` (traced), and a
function decorated with a context manager (`run_in_context`).

A resume function whose code is inside a `torch.autocast` block starts by calling
`capture.contexts.enter_autocast(device_type, dtype, enabled, cache_enabled)`: traced, it
returns the block's exit callable as if the resumed code had entered the block itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from capture.contexts import enter_autocast
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import dispatch
from capture.interp.builtins_table import _TABLE, NONE, _const, special
from capture.values import (
    ConstantValue,
    ContextValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator


@special(enter_autocast)
def _enter_autocast(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    values = tuple(_const(a, "autocast argument") for a in args)
    ctx = ContextValue("autocast", values)
    _ctx_enter(tx, ctx)
    return MethodValue(ctx, ConstantValue(context_exit))


# -- context managers ---------------------------------------------------------------------
@special(torch.no_grad)
def _no_grad(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ContextValue("grad", (False,))


@special(torch.enable_grad)
def _enable_grad(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ContextValue("grad", (True,))


@special(torch.set_grad_enabled)
def _set_grad_enabled(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    mode = bool(_const(args[0], "set_grad_enabled mode"))
    ctx = ContextValue("grad_set", (mode,))
    ctx.state = torch.is_grad_enabled()
    set_grad_mode(tx, mode)
    return ctx


@special(torch._C._set_grad_enabled)
def _raw_set_grad(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    set_grad_mode(tx, bool(_const(args[0], "grad mode")))
    return NONE


@special(torch.autograd.profiler.record_function)
def _record_function(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    # NOTE: a profiler range label: a no-op in the graph, as torch.compile makes it (the
    # compiled graph does not open the range when a profiler runs). Used as a `with`
    # block or a decorator; nothing it takes is read.
    return ContextValue("null", ("record_function",))


@special(torch.is_grad_enabled)
def _is_grad_enabled(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(torch.is_grad_enabled())


def set_grad_mode(tx: Translator, mode: bool) -> None:
    """Record a grad-mode switch in the graph and apply it to the tracing itself."""
    tx.output.uses_grad_mode = True
    tx.output.create_node("call_function", torch._C._set_grad_enabled, (mode,), {}, None)
    torch._C._set_grad_enabled(mode)


def _autocast_ctx(device_type: Any, args: list[Value], kwargs: dict[str, Value]) -> ContextValue:
    params = {"dtype": None, "enabled": True, "cache_enabled": None}
    names = ["dtype", "enabled", "cache_enabled"]
    for name, value in zip(names, args):
        params[name] = _const(value, "autocast argument")
    for name, value in kwargs.items():
        params[name] = _const(value, "autocast argument")
    return ContextValue(
        "autocast", (device_type, params["dtype"], params["enabled"], params["cache_enabled"])
    )


@special(torch.autocast, torch.amp.autocast)
def _autocast(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    kwargs = dict(kwargs)
    if args:
        device_type = _const(args[0], "device_type")
        rest = list(args[1:])
    else:
        device_type = _const(kwargs.pop("device_type"), "device_type")
        rest = []
    return _autocast_ctx(device_type, rest, kwargs)


def _ctx_enter(tx: Translator, ctx: ContextValue) -> Value:
    if ctx.kind == "grad":
        ctx.state = torch.is_grad_enabled()
        set_grad_mode(tx, bool(ctx.args[0]))
    elif ctx.kind == "autocast":
        from torch.amp import autocast_mode

        device_type, dtype, enabled, cache = ctx.args
        node = tx.output.create_node(
            "call_function",
            autocast_mode._enter_autocast,
            (device_type, dtype, enabled, cache),
            {},
            None,
        )
        real = torch.autocast(str(device_type), dtype=dtype, enabled=bool(enabled), cache_enabled=cache)  # type: ignore[arg-type]  # dtype/cache come from user constants
        real.__enter__()  # type: ignore[no-untyped-call]  # torch's autocast is untyped
        ctx.state = (node, real)
    return ctx


def context_exit(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Handler for calling the `__exit__` that BEFORE_WITH pushed."""
    ctx = args[0]
    assert isinstance(ctx, ContextValue)
    if ctx.kind in ("grad", "grad_set"):
        set_grad_mode(tx, bool(ctx.state))
    elif ctx.kind == "autocast":
        from torch.amp import autocast_mode

        state: Any = ctx.state  # set by _ctx_enter: (node, real autocast)
        node, real = state
        tx.output.create_node("call_function", autocast_mode._exit_autocast, (node,), {}, None)
        real.__exit__(None, None, None)
    return NONE


_TABLE[id(context_exit)] = (context_exit, context_exit)


def enter_context(tx: Translator, ctx: Value) -> tuple[Value, Value]:
    """BEFORE_WITH: returns (exit callable, value bound by `as`)."""

    if isinstance(ctx, ContextValue):
        result = _ctx_enter(tx, ctx)
        return MethodValue(ctx, ConstantValue(context_exit)), result
    if isinstance(ctx, (ObjectValue, ModuleValue)):
        enter = dispatch.get_attr(tx, ctx, "__enter__")
        exit_ = dispatch.get_attr(tx, ctx, "__exit__")
        return exit_, dispatch.call_value(tx, enter, [], {})
    raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, f"`with` on {ctx.describe()}")


def run_in_context(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`ctx(fn)(*args)`: a function decorated with a context manager."""

    ctx, fn, *rest = args
    assert isinstance(ctx, ContextValue)
    fresh = ContextValue(ctx.kind, ctx.args)
    _ctx_enter(tx, fresh)
    result = dispatch.call_value(tx, fn, list(rest), kwargs)
    context_exit(tx, [fresh], {})
    return result


_TABLE[id(run_in_context)] = (run_in_context, run_in_context)
