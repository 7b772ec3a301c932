"""Context managers a graph break left open, entered again by a resume function's prologue.

In: the call `capture.contexts.enter_autocast(device_type, dtype, enabled, cache_enabled)`
that starts a resume function whose code is inside a `torch.autocast` block. Out: the
block's exit callable, traced as if the resumed code had entered the block itself: the
graph enters autocast where the resume function starts and leaves it where the code does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.contexts import enter_autocast
from capture.interp.builtins_table import _const, _ctx_enter, context_exit, special
from capture.values import ConstantValue, ContextValue, MethodValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator


@special(enter_autocast)
def _enter_autocast(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    values = tuple(_const(a, "autocast argument") for a in args)
    ctx = ContextValue("autocast", values)
    _ctx_enter(tx, ctx)
    return MethodValue(ctx, ConstantValue(context_exit))
