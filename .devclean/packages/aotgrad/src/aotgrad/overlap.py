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


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.numel() > 0 and b.numel() > 0 and (
        a.untyped_storage()._cdata == b.untyped_storage()._cdata)


def _check_list_writes(func: torch._ops.OpOverload, args: Sequence[Any],
                       kwargs: Mapping[str, Any]) -> None:
    """A foreach op writing a list: eager writes its items one after the other, so an item
    that another item reads (or writes) sees the earlier write; the functional op reads every
    old value. Such programs are refused rather than computed differently."""
    written: list[torch.Tensor] = []
    read: list[tuple[int, torch.Tensor]] = []
    for index, argument in enumerate(func._schema.arguments):
        value = args[index] if index < len(args) else kwargs.get(argument.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        tensors = [(i, t) for i, t in enumerate(items) if isinstance(t, torch.Tensor)]
        if argument.alias_info is not None and argument.alias_info.is_write:
            written.extend(t for _, t in tensors)
        else:
            read.extend(tensors)
    for i, out in enumerate(written):
        clashes = [t for j, t in enumerate(written) if j != i] + [
            t for j, t in read if j != i]
        if any(_same_memory(out, t) for t in clashes):
            raise RuntimeError(
                f"{func}: an item of the list written in place shares memory with another "
                "item this op reads or writes; eager's result depends on the order of the "
                "writes, which the compiled graph does not keep. Clone the tensors first.")


def check_write_overlap(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Raise eager's RuntimeError if the mutating op `func` writes into overlapping memory."""
    if not isinstance(func, torch._ops.OpOverload) or not func._schema.is_mutable:
        return
    if any(a.alias_info is not None and a.alias_info.is_write and str(a.type) == "List[Tensor]"
           for a in func._schema.arguments):
        _check_list_writes(func, args, kwargs)
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
