"""Facts of tensors that a program reads and that `TensorMatch` does not fix: `is_leaf`,
`grad_fn is None`, `storage_offset()`, `_is_view()`, and `x.contiguous() is x`.

In: a tensor value and the fact read. Out: the fact as a constant, read from the fake tensor
(which mirrors the real one), plus a guard on the input's source so that a later call whose
tensor differs in that fact recompiles. Facts that cannot be traced (`data_ptr()`, `_version`)
are refused with a clear reason, so the function runs eagerly instead of answering wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from guards.sources import AttrSource, CallSource

from capture import torch_ops
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp.builtins_table import special
from capture.output_graph import GuardKind
from capture.values import ConstantValue, TensorValue, Value
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator


class GradFnMarker:
    """What `tensor.grad_fn` is for a tensor that has one: not None, truthy, and nothing
    more (its identity and methods are not traced)."""

    def __getattr__(self, name: str) -> Any:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT,
            f"reading tensor.grad_fn.{name} inside a compiled function "
            "(only `grad_fn is None` is traced)",
        )

    def __repr__(self) -> str:
        return "<grad_fn>"


GRAD_FN = GradFnMarker()

#: Tensor attributes whose values are autograd or storage state that the trace cannot follow.
_UNTRACEABLE_ATTRS = frozenset({"_version", "retains_grad", "output_nr", "_cdata",
                                "_backward_hooks", "_post_accumulate_grad_hooks"})


def tensor_fact_attribute(tx: Translator, value: TensorValue, name: str) -> Value | None:
    """`tensor.name` for the facts this module owns (None for any other name)."""
    if name == "is_leaf":
        return ConstantValue(_is_leaf(tx, value))
    if name == "grad_fn":
        return ConstantValue(None if _is_leaf(tx, value) else GRAD_FN)
    if name == "grad":
        return _input_grad(tx, value)
    if name in _UNTRACEABLE_ATTRS:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT, f"reading tensor.{name} inside a compiled function"
        )
    return None


def _input_grad(tx: Translator, value: TensorValue) -> Value | None:
    """`p.grad` of an input tensor (a parameter an optimizer steps): the real `.grad` as an
    input of its own at `p.grad` (guarded: a tensor's metadata, or None). Storing `.grad`
    while tracing breaks the graph, so the real attribute is what the program reads. None
    (refused by the caller) for a tensor made in the graph."""
    if value.source is None:
        return None
    real = tx.output.real_by_value.get(id(value))
    if real is None:
        return None
    return wrap(tx.output, real.grad, AttrSource(value.source, "grad"))


def _is_leaf(tx: Translator, value: TensorValue) -> bool:
    """Whether the tensor is a leaf (has no grad_fn), guarded for inputs.

    A tensor that does not require grad is always a leaf, and requires_grad is part of the
    tensor's match, so only inputs that require grad get a guard.
    """
    fact = bool(value.fake.is_leaf)
    if value.source is not None and value.fake.requires_grad:
        tx.output.add_guard(AttrSource(value.source, "is_leaf"), GuardKind.CONST_EQ, fact)
    return fact


def _method_fact(tx: Translator, args: list[Value], kwargs: dict[str, Value],
                 method: str) -> Value | None:
    """The fact `args[0].method()` for a tensor, guarded on the input's source."""
    if len(args) != 1 or kwargs or not isinstance(args[0], TensorValue):
        return None
    value = args[0]
    fact = getattr(value.fake, method)()
    if value.source is not None:
        tx.output.add_guard(CallSource(value.source, method), GuardKind.CONST_EQ, fact)
    return ConstantValue(fact)


@special(torch.Tensor.storage_offset)
def _storage_offset(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fact = _method_fact(tx, args, kwargs, "storage_offset")
    if fact is None:
        return torch_ops.call_torch(tx, torch.Tensor.storage_offset, args, kwargs,
                                    method="storage_offset")
    return fact


@special(torch.Tensor._is_view)
def _is_view(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fact = _method_fact(tx, args, kwargs, "_is_view")
    if fact is None:
        return torch_ops.call_torch(tx, torch.Tensor._is_view, args, kwargs, method="_is_view")
    return fact


@special(torch.Tensor.data_ptr, torch.Tensor.untyped_storage, torch.Tensor.storage)
def _storage_identity(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_CALL,
        "reading a tensor's storage or data pointer inside a compiled function",
    )


@special(torch.Tensor.contiguous)
def _contiguous(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`x.contiguous()` is `x` itself when x is already contiguous in the asked format
    (strides are part of the input's match, so this holds on every call the entry serves)."""
    if args and isinstance(args[0], TensorValue) and len(args) <= 2:
        fmt: object = torch.contiguous_format
        given = args[1] if len(args) == 2 else kwargs.get("memory_format")
        if given is not None:
            fmt = given.as_constant() if given.is_constant() else None
        if len(kwargs) <= int("memory_format" in kwargs) and isinstance(fmt, torch.memory_format):
            try:
                same = fmt is not torch.preserve_format and fake_is_contiguous(args[0], fmt)
            except Exception:  # noqa: BLE001  # e.g. data-dependent sizes: record the call
                same = False
            if same is True:
                return args[0]
    return torch_ops.call_torch(tx, torch.Tensor.contiguous, args, kwargs, method="contiguous")


def fake_is_contiguous(value: TensorValue, fmt: torch.memory_format) -> object:
    """`value.fake.is_contiguous(memory_format=fmt)` (a bool, or a symbolic answer)."""
    return value.fake.is_contiguous(memory_format=fmt)
