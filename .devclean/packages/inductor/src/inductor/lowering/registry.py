"""The table of lowering rules, keyed by ATen OpOverload (or OpOverloadPacket), and the
rule for ops without one (an extern ATen call, registered by `lowering/extern.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

LoweringFn = Callable[..., Any]
LOWERINGS: dict[object, LoweringFn] = {}
# NOTE: the fallback is registered rather than imported so the graph walk (context.py)
# stays below the rules: extern.py's rule builds on the walk's LoweringContext.
_FALLBACK: list[LoweringFn] = []
F = TypeVar("F", bound=LoweringFn)


def lowering(*targets: object) -> Callable[[F], F]:
    def register(fn: F) -> F:
        for target in targets:
            LOWERINGS[target] = fn
        return fn

    return register


def find_lowering(target: object) -> LoweringFn | None:
    fn = LOWERINGS.get(target)
    if fn is None:
        packet = getattr(target, "overloadpacket", None)
        if packet is not None:
            fn = LOWERINGS.get(packet)
    return fn


def fallback_lowering(fn: F) -> F:
    """Register `fn(ctx, op, args, kwargs)` as the rule for ops without their own (or whose
    rule returned NotImplemented)."""
    _FALLBACK[:] = [fn]
    return fn


def find_fallback() -> LoweringFn:
    """The registered fallback rule; an error when the rule modules were not loaded."""
    if not _FALLBACK:
        raise RuntimeError("no fallback lowering registered: call inductor.lowering.load_rules()")
    return _FALLBACK[0]
