"""The hook of an on-disk cache of whole compiled frames (installed by `compiler`: capture
knows no disk format and no backend).

A `FrameStore` sees each frame compiled without a graph break (`save`: the guard tree, the
transformed code and the graph) and is asked, before a frame is traced, for a recorded
entry whose guards pass for this call (`load`): a warm process then installs that entry
and runs it without tracing. Capture's option `frame_disk_cache` switches it off.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import guards
import torch

if TYPE_CHECKING:
    from capture.frame import CompiledFunction

__all__ = ["FrameStore", "frame_store", "load", "save", "set_frame_store"]

log = logging.getLogger("capture.frame_store")


class FrameStore(Protocol):
    """Where whole compiled frames persist between processes."""

    def save(self, cf: CompiledFunction, tree: guards.GuardTree, code: types.CodeType,
             gm: torch.fx.GraphModule | None) -> None:
        """Record the compiled entry (`code` is the transformed code of `cf`)."""

    def load(self, cf: CompiledFunction, L: dict[str, object],
             ) -> tuple[guards.GuardTree, types.CodeType] | None:
        """A recorded entry of `cf` whose guard tree passes for `L` (and `cf`'s globals):
        the tree rebuilt for this process and the transformed code ready to run."""


_stores: list[FrameStore] = []


def set_frame_store(store: FrameStore | None) -> None:
    """Install `store` (None: no frame cache)."""
    _stores.clear()
    if store is not None:
        _stores.append(store)


def frame_store() -> FrameStore | None:
    """The installed store, if any."""
    return _stores[0] if _stores else None


def _enabled(cf: CompiledFunction) -> FrameStore | None:
    if not _stores or not cf.option("frame_disk_cache"):
        return None
    return _stores[0]


def save(cf: CompiledFunction, tree: guards.GuardTree, code: types.CodeType,
         gm: torch.fx.GraphModule | None) -> None:
    """Offer a fresh compile to the store; a failure is logged, never raised."""
    store = _enabled(cf)
    if store is None:
        return
    try:
        store.save(cf, tree, code, gm)
    except Exception as exc:  # noqa: BLE001 - the cache must never fail a compile
        log.warning("frame cache: %s not recorded: %s: %s", cf.code.co_name,
                    type(exc).__name__, exc)


def load(cf: CompiledFunction, L: dict[str, object],
         ) -> tuple[guards.GuardTree, Callable[..., Any]] | None:
    """A recorded entry for this call, as (guard tree, function to run), or None."""
    store = _enabled(cf)
    if store is None:
        return None
    try:
        found = store.load(cf, L)
    except Exception as exc:  # noqa: BLE001 - an entry that cannot be used is a miss
        log.warning("frame cache: lookup for %s failed: %s: %s", cf.code.co_name,
                    type(exc).__name__, exc)
        return None
    if found is None:
        return None
    tree, code = found
    fn = types.FunctionType(code, cf.f_globals, cf.fn.__name__, cf.fn.__defaults__,
                            cf.fn.__closure__)
    fn.__kwdefaults__ = cf.fn.__kwdefaults__
    return tree, fn
