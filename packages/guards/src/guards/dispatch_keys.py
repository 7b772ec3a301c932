"""Dispatch-key checks, memoized per live tensor object.

Reading a tensor's dispatch key set (`torch._C._dispatch_keys`) costs about as much as a
whole eager `torch.add` of small tensors, while the key set of a tensor object is fixed when
the tensor is made. So each expected key set keeps the ids of live tensors already found to
have it; a weakref callback drops an id when its tensor dies, before the id can be reused.
Both evaluators call `keys_match`, so they agree by construction.
NOTE: `t.data = other` can swap a tensor's implementation, key set included; that change is
not seen once `t` is memoized (the device, dtype and other checks still see theirs).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

_MEMOS: dict[int, dict[int, weakref.ref[Any]]] = {}


def memo_for(expected: int) -> dict[int, weakref.ref[Any]]:
    """The memo (id -> weakref) of live tensors whose raw key set is `expected`."""
    memo = _MEMOS.get(expected)
    if memo is None:
        memo = _MEMOS.setdefault(expected, {})
    return memo


def raw_keys(tensor: Any) -> int:
    """The raw dispatch key set of `tensor` (no memo)."""
    import torch

    return int(torch._C._dispatch_keys(tensor).raw_repr())


def _forget(memo: dict[int, weakref.ref[Any]], key: int) -> Callable[[object], None]:
    def callback(_ref: object) -> None:
        memo.pop(key, None)

    return callback


# NOTE: ids of tensors that matched once. A tensor is memoized only when seen a second time,
# so one-shot inputs (a new batch every call) do not pay for a weakref and its callback.
# An id reused by a newer tensor only makes that tensor memoized early, after its own check.
_SEEN_ONCE: set[int] = set()
_SEEN_ONCE_LIMIT = 4096


def learn(memo: dict[int, weakref.ref[Any]], tensor: Any, expected: int) -> bool:
    """Slow path: read the key set; remember `tensor` if it matches `expected` (from the
    second time it is seen)."""
    if raw_keys(tensor) != expected:
        return False
    key = id(tensor)
    if key not in _SEEN_ONCE:
        if len(_SEEN_ONCE) >= _SEEN_ONCE_LIMIT:
            _SEEN_ONCE.clear()
        _SEEN_ONCE.add(key)
        return True
    _SEEN_ONCE.discard(key)
    try:
        memo[key] = weakref.ref(tensor, _forget(memo, key))
    except TypeError:  # NOTE: not weak-referenceable: just do not memoize
        pass
    return True


def keys_match(tensor: Any, expected: int) -> bool:
    """Whether `tensor`'s raw dispatch key set is `expected` (memoized per live tensor)."""
    memo = memo_for(expected)
    return id(tensor) in memo or learn(memo, tensor, expected)
