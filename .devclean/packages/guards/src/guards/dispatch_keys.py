"""Dispatch-key checks: a tensor's whole dispatch key set, read on every check.

The key set of a live tensor object can change without any visible trace on the object:
`torch._C._set_neg(t, True)` / `torch._C._set_conj`, `t.data = other` (which copies the
key set of `other`: negative or conjugate views, zero tensors, inference tensors) and
`torch.utils.swap_tensors` keep `id(t)` and `t._version`. So the set is never memoized per
object; both evaluators read it through `keys_match`, and the generated code compares
`torch._C._dispatch_keys(t)` with a prebuilt `DispatchKeySet` (about 0.3 us per tensor,
the cheapest sound read measured: see tools/bench/guards.py `--floor`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def raw_keys(tensor: Any) -> int:
    """The raw dispatch key set of `tensor` (`DispatchKeySet.raw_repr()`)."""
    import torch

    return int(torch._C._dispatch_keys(tensor).raw_repr())


def keys_match(tensor: Any, expected: int) -> bool:
    """Whether `tensor`'s raw dispatch key set is `expected` (read now, never cached)."""
    return raw_keys(tensor) == expected


def keyset_equals(expected: int) -> Callable[[Any], bool]:
    """`expected`'s `DispatchKeySet.__eq__`: called on `torch._C._dispatch_keys(t)` by
    generated guards (cheaper than comparing `raw_repr()` ints)."""
    import torch

    equals: Callable[[Any], bool] = torch._C.DispatchKeySet.from_raw_repr(expected).__eq__
    return equals
