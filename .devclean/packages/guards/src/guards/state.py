"""The backend active for the current call, read by BackendMatch.

The caller (capture's wrapper) sets it around its cache lookup with `backend_scope(b)` or
`set_backend(b)` / `reset_backend(token)`. A ContextVar, so threads and tasks do not see
each other's backend.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_ACTIVE_BACKEND: contextvars.ContextVar[object] = contextvars.ContextVar(
    "guards_active_backend", default=None)

#: Fast reader used by generated guards: `current_backend()` is `_ACTIVE_BACKEND.get()`.
current_backend = _ACTIVE_BACKEND.get


def set_backend(backend: object) -> contextvars.Token[object]:
    """Make `backend` the active backend; returns a token for `reset_backend`."""
    return _ACTIVE_BACKEND.set(backend)


def reset_backend(token: contextvars.Token[object]) -> None:
    """Restore the active backend that was current before `set_backend` returned `token`."""
    _ACTIVE_BACKEND.reset(token)


@contextlib.contextmanager
def backend_scope(backend: object) -> Iterator[None]:
    """Within the block, `backend` is the active backend seen by BackendMatch."""
    token = _ACTIVE_BACKEND.set(backend)
    try:
        yield
    finally:
        _ACTIVE_BACKEND.reset(token)
