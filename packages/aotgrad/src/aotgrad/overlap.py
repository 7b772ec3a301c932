"""Memory-overlap checks of in-place writes, made while tracing: eager raises when a pointwise
op or `copy_` writes into a tensor whose elements overlap each other or partly overlap an
input of the same op (`x[1:] = x[:-1]`). Fake tensors do not check; the functional graph
would silently compute something else, so the tracer raises eager's error instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false

__all__ = ["check_write_overlap"]

_PARTIAL = ("unsupported operation: some elements of the input tensor and the written-to "
            "tensor refer to a single memory location. Please clone() the tensor before "
            "performing the operation.")
_INTERNAL = ("unsupported operation: more than one element of the written-to tensor refers "
             "to a single memory location. Please clone() the tensor before performing the "
             "operation.")


def _checked(func: torch._ops.OpOverload) -> bool:
    """Ops that check overlap in eager: `copy_` and pointwise ops (TensorIterator)."""
    return func is torch.ops.aten.copy_.default or torch.Tag.pointwise in func.tags


def _dense(t: torch.Tensor) -> bool:
    return bool(is_non_overlapping_and_dense_or_false(t))


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in (*t.shape, *t.stride(), t.storage_offset()))


def _internal_overlap(t: torch.Tensor) -> bool:
    if not _static(t) or _dense(t):
        return False
    return any(stride == 0 and size > 1 for size, stride in zip(t.shape, t.stride()))


def _partial_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """ATen's `get_overlap_status(a, b) == Partial` from metadata alone."""
    if a is b or not (_static(a) and _static(b)) or a.numel() == 0 or b.numel() == 0:
        return False
    if not (_dense(a) and _dense(b)):
        return False  # too hard to tell: eager does not raise either
    if a.untyped_storage()._cdata != b.untyped_storage()._cdata:
        return False
    a_begin = a.storage_offset() * a.element_size()
    b_begin = b.storage_offset() * b.element_size()
    a_end = a_begin + a.numel() * a.element_size()
    b_end = b_begin + b.numel() * b.element_size()
    if a_begin == b_begin and a_end == b_end:
        return tuple(a.stride()) != tuple(b.stride())
    # NOTE: bool(): torch 2.14 types storage_offset() as int | SymInt, so the test as SymBool.
    return bool(a_begin < b_end and b_begin < a_end)


def check_write_overlap(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise eager's RuntimeError if the mutating op `func` writes into overlapping memory."""
    if not isinstance(func, torch._ops.OpOverload) or not func._schema.is_mutable:
        return
    if not _checked(func):
        return
    written: list[torch.Tensor] = []
    read: list[torch.Tensor] = []
    for index, argument in enumerate(func._schema.arguments):
        value = args[index] if index < len(args) else kwargs.get(argument.name)
        if not isinstance(value, torch.Tensor):
            continue
        if argument.alias_info is not None and argument.alias_info.is_write:
            written.append(value)
        else:
            read.append(value)
    for out in written:
        if _internal_overlap(out):
            raise RuntimeError(_INTERNAL)
        for value in read:
            if _partial_overlap(out, value):
                raise RuntimeError(_PARTIAL)
