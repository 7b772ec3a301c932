"""Torch callables -> FX nodes, with fake-tensor propagation for example values.

In: a torch function / Tensor method / operator and argument values. Out: a `TensorValue`
(or a container of them) backed by new FX nodes; non-tensor results of metadata queries
become constants (shapes are static and guarded by tensor-match guards).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
)

from capture.graph_break import HINT_DATA_DEPENDENT, GraphBreakKind, unsupported
from capture.values import (
    ConstantValue,
    DictValue,
    ListValue,
    TensorValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from capture.interp.translator import Translator

_FX_CONSTANT_TYPES = (
    int,
    float,
    bool,
    str,
    complex,
    type(None),
    type(Ellipsis),
    slice,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.Size,
    range,
)

# Tensor attributes that are metadata (constants under static shapes).
TENSOR_META_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "requires_grad",
        "is_cuda",
        "is_cpu",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "is_mps",
        "is_nested",
        "layout",
        "is_leaf",
        "itemsize",
        "nbytes",
    }
)
# Tensor attributes that produce tensors.
TENSOR_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})

# Callables that must not become nodes (stateful or outside the graph's world).
_REFUSED: dict[object, str] = {
    torch.Tensor.backward: "calling .backward() inside a compiled function",
    torch.Tensor.item: "reading a tensor's value with .item()",
    torch.Tensor.tolist: "reading a tensor's values with .tolist()",
    torch.Tensor.numpy: "converting a tensor to numpy",
    torch.Tensor.register_hook: "registering tensor hooks",
    torch.manual_seed: "setting the RNG seed inside a compiled function",
    torch.autograd.grad: "torch.autograd.grad inside a compiled function",
}


_REFUSED_NAMES = {
    (getattr(f, "__module__", ""), getattr(f, "__qualname__", "")): why for f, why in _REFUSED.items()
}


def _refusal(fn: object) -> str | None:
    """Why `fn` may not go in a graph (None if it may). Wrapped functions count as the
    function they wrap (torch re-wraps some, e.g. manual_seed, when its compiler loads)."""
    try:
        why = _REFUSED.get(fn)
    except TypeError:
        return None
    if why is None:
        inner = getattr(fn, "__wrapped__", None)
        if inner is not None and inner is not fn:
            return _refusal(inner)
        key = (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", ""))
        why = _REFUSED_NAMES.get(key)
    return why


def _to_fx(value: Value) -> Any:
    if isinstance(value, TensorValue):
        return value.node
    if isinstance(value, ConstantValue):
        obj = value.value
        if isinstance(obj, _FX_CONSTANT_TYPES):
            return obj
        if isinstance(obj, tuple) and all(isinstance(x, _FX_CONSTANT_TYPES) for x in obj):
            return obj
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT,
            f"passing {value.describe()} to a torch operation",
        )
    if isinstance(value, TupleValue):
        return tuple(_to_fx(v) for v in value.items)
    if isinstance(value, ListValue):
        return [_to_fx(v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: _to_fx(v) for k, (_, v) in value.items.items()}
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"passing {value.describe()} to a torch operation"
    )


def _to_fake(value: Value) -> Any:
    if isinstance(value, TensorValue):
        return value.fake
    if isinstance(value, ConstantValue):
        return value.value
    if isinstance(value, TupleValue):
        items = tuple(_to_fake(v) for v in value.items)
        return items if value.cls is tuple else value.cls(items)
    if isinstance(value, ListValue):
        return [_to_fake(v) for v in value.items]
    if isinstance(value, DictValue):
        return {k: _to_fake(v) for k, (_, v) in value.items.items()}
    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT, f"passing {value.describe()} to a torch operation"
    )


def _contains_tensor(value: Value) -> bool:
    if isinstance(value, TensorValue):
        return True
    if isinstance(value, (TupleValue, ListValue)):
        return any(_contains_tensor(v) for v in value.items)
    if isinstance(value, DictValue):
        return any(_contains_tensor(v) for _, v in value.items.values())
    return False


def call_torch(
    tx: Translator,
    fn: Callable[..., Any],
    args: list[Value],
    kwargs: dict[str, Value],
    method: str | None = None,
) -> Value:
    """Record `fn(*args, **kwargs)` (or `args[0].method(...)`) and return its value."""
    refused = _refusal(fn)
    if refused is not None:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, refused, HINT_DATA_DEPENDENT)
    has_tensor = any(_contains_tensor(a) for a in args) or any(
        _contains_tensor(v) for v in kwargs.values()
    )
    output = tx.output
    fake_args = [_to_fake(a) for a in args]
    fake_kwargs = {k: _to_fake(v) for k, v in kwargs.items()}
    name = method or getattr(fn, "__name__", repr(fn))
    try:
        with output.fake_mode:
            if method is not None:
                result = getattr(fake_args[0], method)(*fake_args[1:], **fake_kwargs)
            else:
                result = fn(*fake_args, **fake_kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        raise unsupported(
            GraphBreakKind.DATA_DEPENDENT,
            f"{name} depends on tensor values ({type(e).__name__})",
            HINT_DATA_DEPENDENT,
        ) from None
    except Exception as e:  # noqa: BLE001  # any torch error: report it at the user's line
        if "data is not allocated yet" in str(e):
            # The op read a fake tensor's values (e.g. tensor_split with tensor indices).
            raise unsupported(
                GraphBreakKind.DATA_DEPENDENT,
                f"{name} reads tensor values to compute its output",
                HINT_DATA_DEPENDENT,
            ) from None
        raise unsupported(
            GraphBreakKind.EXCEPTION, f"{name} raised {type(e).__name__}: {e}"
        ) from None
    if not _has_fake(result):
        if result is None and has_tensor:
            # An in-place operation returning None (e.g. operator.setitem): keep the node.
            _make_node(tx, fn, args, kwargs, method, None)
            return ConstantValue(None)
        if isinstance(result, torch.Tensor):
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"{name} returned a real tensor")
        return ConstantValue(result)
    node = _make_node(tx, fn, args, kwargs, method, result)
    return wrap_result(tx, node, result)


def _make_node(
    tx: Translator,
    fn: Callable[..., Any],
    args: list[Value],
    kwargs: dict[str, Value],
    method: str | None,
    example: Any,
) -> torch.fx.Node:
    fx_args = tuple(_to_fx(a) for a in args)
    fx_kwargs = {k: _to_fx(v) for k, v in kwargs.items()}
    if method is not None:
        return tx.output.create_node("call_method", method, fx_args, fx_kwargs, example)
    return tx.output.create_node("call_function", fn, fx_args, fx_kwargs, example)


def _has_fake(result: Any) -> bool:
    if isinstance(result, torch.Tensor):
        return True
    if isinstance(result, (tuple, list)):
        return any(_has_fake(r) for r in result)
    return False


def wrap_result(tx: Translator, node: torch.fx.Node, result: Any) -> Value:
    """Values for the (fake) result of `node`: tensors, or tuples/lists of them."""
    if isinstance(result, torch.Tensor):
        return TensorValue(node, result)
    if isinstance(result, (tuple, list)):
        items: list[Value] = []
        for i, item in enumerate(result):
            if isinstance(item, torch.Tensor) or isinstance(item, (tuple, list)):
                sub = tx.output.create_node(
                    "call_function", operator.getitem, (node, i), {}, item
                )
                items.append(wrap_result(tx, sub, item))
            else:
                items.append(ConstantValue(item))
        if isinstance(result, list):
            return ListValue(items)
        return TupleValue(items, None, type(result))
    return ConstantValue(result)


def tensor_attribute(tx: Translator, value: TensorValue, name: str) -> Value | None:
    """`tensor.name` for metadata and view attributes (None if not one of those)."""
    if name in TENSOR_META_ATTRS:
        return ConstantValue(getattr(value.fake, name))
    if name in TENSOR_VIEW_ATTRS:
        return call_torch(tx, getattr, [value, ConstantValue(name)], {})
    if name == "grad":
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "reading tensor.grad while tracing")
    return None


def unbind_for_iteration(value: TensorValue) -> list[Value]:
    """`for row in tensor`: one getitem node per row."""
    from capture.interp.translator import Translator  # noqa: F401  # typing only

    raise unsupported(
        GraphBreakKind.UNSUPPORTED_OBJECT,
        "iterating over a tensor (use an explicit range over tensor.shape[0])",
    )
