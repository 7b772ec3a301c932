"""The table of lowering rules, keyed by ATen OpOverload (or OpOverloadPacket)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LoweringFn = Callable[..., Any]
LOWERINGS: dict[object, LoweringFn] = {}


def lowering(*targets: object) -> Callable[[LoweringFn], LoweringFn]:
    def register(fn: LoweringFn) -> LoweringFn:
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
