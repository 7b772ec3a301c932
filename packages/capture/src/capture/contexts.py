"""Autocast around tracing and graph breaks.

Tracing enters each `torch.autocast` block of the program for real (so that the fake tensors
get autocast's dtypes); a trace that stops inside such a block leaves it entered.
`AutocastState.current()` taken before a trace and `restore()` after it put the autocast
flags, dtypes, cache flag and nesting depth back as they were.

`enter_autocast(device_type, dtype, enabled, cache_enabled)` is what a resume function's
prologue calls to enter again an autocast block a graph break left: it returns the block's
`__exit__`, the stack item the rest of the original code expects. When the resume function is
traced, capture treats the call as the block's `with` statement (the block's ops get
autocast's dtypes and the graph leaves the block where the code does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["AutocastState", "enter_autocast"]

_DEVICES = ("cpu", "cuda", "xpu", "mps")


def _devices() -> tuple[str, ...]:
    return tuple(d for d in _DEVICES if torch.amp.is_autocast_available(d))


def _nesting() -> int:
    depth = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return int(depth) - 1


@dataclass(frozen=True, slots=True)
class AutocastState:
    """Autocast's thread-local state: per device (enabled, dtype), the cache flag and the
    nesting depth of entered blocks."""

    devices: tuple[tuple[str, bool, torch.dtype], ...]
    cache_enabled: bool
    nesting: int

    @staticmethod
    def current() -> AutocastState:
        """The state now."""
        return AutocastState(
            tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                  for d in _devices()),
            torch.is_autocast_cache_enabled(),
            _nesting(),
        )

    def restore(self) -> None:
        """Put this state back (blocks left entered are left; their cast cache cleared when
        no block is entered any more, as leaving the outermost block does)."""
        for device, enabled, dtype in self.devices:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        torch.set_autocast_cache_enabled(self.cache_enabled)
        while _nesting() > self.nesting:
            if torch.autocast_decrement_nesting() == 0:
                torch.clear_autocast_cache()


def enter_autocast(device_type: str, dtype: Any, enabled: bool, cache_enabled: Any) -> Any:
    """Enter `torch.autocast(device_type, dtype, enabled, cache_enabled)` for real; returns
    its `__exit__` (called with the exception triple, as a `with` statement calls it)."""
    block = torch.autocast(device_type, dtype=dtype, enabled=enabled,
                           cache_enabled=cache_enabled)
    block.__enter__()  # type: ignore[no-untyped-call]  # torch's autocast is untyped
    return block.__exit__
