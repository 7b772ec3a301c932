"""In-process caches that are dropped together (tests and benchmarks exercise the disk
cache this way): each owner registers how to clear its cache.

Below the modules that own such caches, so none of them imports another to clear it.
"""

from __future__ import annotations

from collections.abc import Callable

_CLEARERS: dict[str, Callable[[], None]] = {}


def register_clear(name: str, clear: Callable[[], None]) -> None:
    """Have `clear_all()` call `clear` (under `name`: registering again replaces it)."""
    _CLEARERS[name] = clear


def clear_all() -> None:
    """Clear every registered in-process cache."""
    for clear in list(_CLEARERS.values()):
        clear()
