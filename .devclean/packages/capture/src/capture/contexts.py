"""Autocast and exception handlers around tracing and graph breaks.

Tracing enters each `torch.autocast` block of the program for real (so that the fake tensors
get autocast's dtypes); a trace that stops inside such a block leaves it entered.
`AutocastState.current()` taken before a trace and `restore()` after it put the autocast
flags, dtypes, cache flag and nesting depth back as they were.

`enter_autocast(device_type, dtype, enabled, cache_enabled)` is what a resume function's
prologue calls to enter again an autocast block a graph break left: it returns the block's
`__exit__`, the stack item the rest of the original code expects. When the resume function is
traced, capture treats the call as the block's `with` statement (the block's ops get
autocast's dtypes and the graph leaves the block where the code does).

`fresh_exception(template)` makes, on each call of transformed code, the exception an
`except`/`finally` handler a graph break stopped in is handling: the traced program raised it
at capture (`template`); eager raises a new one on every call.

`LiveIterator(container, kind, index)` is the iterator of a `for` loop over a list, dict or
deque that a graph break hands to the resume function: a real iterator over the container,
advanced to where the loop was, so that changes made after the break are seen as in eager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["AutocastState", "LiveIterator", "copyable_exception", "enter_autocast",
           "fresh_exception"]

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


def fresh_exception(template: BaseException) -> BaseException:
    """A new exception like `template`: same class, arguments and instance attributes."""
    new = type(template)(*template.args)
    if hasattr(template, "__dict__"):
        new.__dict__.update(template.__dict__)
    return new


def copyable_exception(template: BaseException) -> bool:
    """Whether `fresh_exception(template)` makes an equal exception: no chained exception
    (`__cause__`, `__context__`) and a constructor that takes the arguments back."""
    if template.__cause__ is not None or template.__context__ is not None:
        return False
    try:
        new = fresh_exception(template)
    except Exception:  # noqa: BLE001  # any constructor: not copyable
        return False
    return type(new) is type(template) and new.args == template.args


class LiveIterator:
    """A real iterator over `container` (a dict's `kind` view: "keys", "values", "items";
    "iter" otherwise) past its first `index` items; `size` is the container's length when
    it was made (a dict or deque whose size differs later raises, as in eager)."""

    __slots__ = ("_it", "container", "index", "kind", "size")

    def __init__(self, container: Any, kind: str, index: int) -> None:
        self.container = container
        self.kind = kind
        self.index = index
        self.size = len(container)
        source = container if kind in ("iter", "keys") else getattr(container, kind)()
        self._it = iter(source)
        for _ in range(index):
            next(self._it, None)

    def __iter__(self) -> LiveIterator:
        return self

    def __next__(self) -> Any:
        return next(self._it)
