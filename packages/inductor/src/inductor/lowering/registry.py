"""The table of lowering rules, keyed by ATen OpOverload (or OpOverloadPacket)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

LoweringFn = Callable[..., Any]
LOWERINGS: dict[object, LoweringFn] = {}
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
