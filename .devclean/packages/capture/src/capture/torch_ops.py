"""Torch callables -> FX nodes, with fake-tensor propagation for example values.

In: a torch function / Tensor method / operator and argument values. Out: a `TensorValue`
(or a container of them) backed by new FX nodes; non-tensor results of metadata queries
become constants (input shapes are static and guarded by tensor-match guards).

Data-dependent results (`.item()`, `.tolist()`, the sizes of `nonzero`/`unique` outputs and
arithmetic on them) are unbacked symbols of the frame's ShapeEnv: they become
`SymNodeValue`s computed by graph nodes, never constants or guards.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from guards.sources import CallSource
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from capture.graph_break import HINT_DATA_DEPENDENT, GraphBreakKind, unsupported
from capture.output_graph import GuardKind
from capture.values import (
    ConstantValue,
    DictValue,
    ListValue,
    SymNodeValue,
    TensorValue,
    TupleValue,
    Value,
)
from capture.values.symbolic import SYMBOLIC_TYPES, SymSliceValue, static_value

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
    torch.Tensor.numpy: "converting a tensor to numpy",
    torch.Tensor.register_hook: "registering tensor hooks",
    torch.manual_seed: "setting the RNG seed inside a compiled function",
    torch.autograd.grad: "torch.autograd.grad inside a compiled function",
    # NOTE: autograd metadata of existing tensors changed in place: a compiled graph's outputs
    # are new tensors and its inputs are read only, so these run eagerly (a graph break).
    torch.Tensor.retain_grad: "Tensor.retain_grad() inside a compiled function",
    torch.Tensor.requires_grad_: "Tensor.requires_grad_() inside a compiled function",
    torch.Tensor.detach_: "Tensor.detach_() inside a compiled function",
    # NOTE: the global generator's state is read or set when the program runs, not when it
    # is traced (a graph would bake the state or seed of its first call in as a constant).
    torch.get_rng_state: "reading the RNG state inside a compiled function",
    torch.set_rng_state: "setting the RNG state inside a compiled function",
    torch.initial_seed: "reading the RNG seed inside a compiled function",
    torch.seed: "reseeding the RNG inside a compiled function",
    # NOTE: process-wide settings no guard checks: a graph would bake in the first call's.
    torch.get_num_threads: "reading torch.get_num_threads() inside a compiled function",
    torch.get_num_interop_threads: "reading torch.get_num_interop_threads() inside a compiled "
                                   "function",
    torch.get_float32_matmul_precision: "reading the float32 matmul precision inside a "
                                        "compiled function",
    torch.is_deterministic_algorithms_warn_only_enabled: "reading the deterministic warn-only "
                                                         "flag inside a compiled function",
    torch.is_anomaly_enabled: "reading the anomaly-detection flag inside a compiled function",
}
# NOTE: in-place changes of a tensor's shape or strides: the functionalizing backends cannot
# give a graph input new metadata, so these run eagerly (a graph break) on every backend.
# (`resize_` is not here: the wrapper resizes a mutated input; see aotgrad's runtime.)
_METADATA_IN_PLACE = ("t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_",
                      "as_strided_")
for _name in _METADATA_IN_PLACE:
    _method = getattr(torch.Tensor, _name, None)
    if _method is not None:
        _REFUSED[_method] = f"Tensor.{_name}() (an in-place change of shape or strides)"
_HINT_RUN_EAGERLY = ("This call changes autograd or RNG state outside the graph, so it runs "
                     "eagerly; move it out of the compiled function to compile the rest.")
_REFUSED_HINTS = {
    torch.Tensor.retain_grad: _HINT_RUN_EAGERLY,
    torch.Tensor.requires_grad_: _HINT_RUN_EAGERLY,
    torch.Tensor.detach_: _HINT_RUN_EAGERLY,
    torch.manual_seed: _HINT_RUN_EAGERLY,
    torch.autograd.grad: _HINT_RUN_EAGERLY,
    torch.get_rng_state: _HINT_RUN_EAGERLY,
    torch.set_rng_state: _HINT_RUN_EAGERLY,
    torch.initial_seed: _HINT_RUN_EAGERLY,
    torch.seed: _HINT_RUN_EAGERLY,
}
_HINT_METADATA = ("This call changes a tensor's shape or strides in place, so it runs eagerly; "
                  "use the out-of-place op (x = x.t()) to compile it.")
for _name in _METADATA_IN_PLACE:
    _method = getattr(torch.Tensor, _name, None)
    if _method is not None:
        _REFUSED_HINTS[_method] = _HINT_METADATA
del _name, _method


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
    if isinstance(value, (TensorValue, SymNodeValue)):
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
    if isinstance(value, SymSliceValue):
        return slice(*[_to_fx(p) for p in value.parts])
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
    if isinstance(value, (TensorValue, SymNodeValue)):
        return value.fake
    if isinstance(value, ConstantValue):
        return value.value
    if isinstance(value, SymSliceValue):
        return slice(*[_to_fake(p) for p in value.parts])
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
    if isinstance(value, (TensorValue, SymNodeValue)):
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
        hint = next((h for f, h in _REFUSED_HINTS.items() if refused == _REFUSED[f]),
                    HINT_DATA_DEPENDENT)
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, refused, hint)
    grad_flag = kwargs.get("requires_grad")
    if isinstance(grad_flag, ConstantValue) and grad_flag.value:
        # NOTE: a new leaf that requires grad: a functionalizing backend's graph outputs are
        # made by its runtime wrapper, so the leaf would come back unconnected to the uses
        # of it later in the graph (backward then finds no path to it): make it for real.
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"{getattr(fn, '__name__', fn)}(..., requires_grad=True) inside a "
                          "compiled function (a new leaf tensor)", _HINT_RUN_EAGERLY)
    has_tensor = any(_contains_tensor(a) for a in args) or any(
        _contains_tensor(v) for v in kwargs.values()
    )
    output = tx.output
    fake_args = [_to_fake(a) for a in args]
    fake_kwargs = {k: _to_fake(v) for k, v in kwargs.items()}
    name = method or getattr(fn, "__name__", repr(fn))
    if method == "tolist" and isinstance(args[0], TensorValue) and len(args) == 1:
        return _tolist(tx, args[0])
    if fn is torch.tensor and len(args) == 1 and isinstance(args[0], SymNodeValue):
        # torch.tensor(t.item()): fake tensors cannot build it from a symbol; a 0-d
        # scalar_tensor of the same dtype is the same tensor.
        dtype = {int: torch.int64, float: torch.get_default_dtype(), bool: torch.bool}
        kwargs = {"dtype": ConstantValue(dtype[args[0].python_type()]), **kwargs}
        return call_torch(tx, torch.scalar_tensor, args, kwargs)
    try:
        result = _run_fake(output.fake_mode, fn, method, fake_args, fake_kwargs)
    except (
        DataDependentOutputException,
        DynamicOutputShapeException,
        GuardOnDataDependentSymNode,
    ) as e:
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
    if name == "as_strided" and args and isinstance(args[0], TensorValue):
        _refuse_strided_escape(args[0].fake, result)
        if len(args) > 3 or "storage_offset" in kwargs:
            _guard_absolute_offset(tx, args[0])
    if not _has_fake(result):
        if result is None and has_tensor:
            # An in-place operation returning None (e.g. operator.setitem): keep the node.
            _make_node(tx, fn, args, kwargs, method, None)
            return ConstantValue(None)
        if isinstance(result, torch.Tensor):
            raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, f"{name} returned a real tensor")
        if isinstance(result, SYMBOLIC_TYPES):
            return ConstantValue(static_value(result)[1])
        _refuse_hidden_tensors(str(name), result)
        return ConstantValue(result)
    node = _make_node(tx, fn, args, kwargs, method, result)
    return wrap_result(tx, node, result)


def _extent(t: Any) -> tuple[Any, Any] | None:
    """The first and last storage element `t` reaches (None when it has no elements)."""
    if t.numel() == 0:
        return None
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return t.storage_offset(), last


def _refuse_strided_escape(source: Any, view: Any) -> None:
    """`as_strided` reaching memory outside its source's elements (offsets are absolute in
    the storage): a functionalizing backend replays writes through the view into the
    source alone, so the call runs eagerly and the rest of the graph gets a real view."""
    if not isinstance(view, torch.Tensor):
        return
    inner, outer = _extent(view), _extent(source)
    if inner is None:
        return
    if outer is None or bool(inner[0] < outer[0]) or bool(inner[1] > outer[1]):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "as_strided reaching outside the memory of the tensor it views",
                          "Take the view of the tensor that owns the memory (its base).")


def _guard_absolute_offset(tx: Translator, value: TensorValue) -> None:
    """`as_strided(..., storage_offset)` counts from the start of the storage: the view
    depends on where the tensor starts in it. An input's offset is guarded; a view of an
    input (whose offset follows the input's) runs eagerly."""
    if value.source is not None:
        tx.output.add_guard(CallSource(value.source, "storage_offset"), GuardKind.CONST_EQ,
                            value.fake.storage_offset())
    elif value.fake._is_view():
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "as_strided with a storage offset on a view of another tensor",
                          "Take the view of the tensor that owns the memory (its base).")


def _run_fake(
    mode: Any, fn: Callable[..., Any], method: str | None, args: list[Any], kwargs: dict[str, Any]
) -> Any:
    """Run the call on fake values. An op whose C++ composite reads tensor data (e.g.
    `tensor_split` with tensor indices) is retried with the Python dispatcher, which runs
    torch's Python implementations that read the data with `.item()` (unbacked symbols)."""

    def call() -> Any:
        with mode:
            if method is not None:
                return getattr(args[0], method)(*args[1:], **kwargs)
            return fn(*args, **kwargs)

    try:
        return call()
    except RuntimeError as e:
        if "data is not allocated yet" not in str(e):
            raise
    from torch._dispatch.python import enable_python_dispatcher

    with enable_python_dispatcher():
        return call()


def _has_symbolic(result: Any) -> bool:
    """Whether `result` holds a data-dependent number that is not a known constant."""
    if isinstance(result, SYMBOLIC_TYPES):
        return not static_value(result)[0]
    if isinstance(result, (tuple, list)):
        return any(_has_symbolic(r) for r in result)
    return False


def _tolist(tx: Translator, value: TensorValue) -> Value:
    """`t.tolist()`: one `.item()` node per element (nested lists for each dimension)."""
    if value.fake.dim() == 0:
        return call_torch(tx, torch.Tensor.item, [value], {}, method="item")
    size = value.fake.shape[0]
    ok, length = static_value(size)
    if not ok:
        raise unsupported(
            GraphBreakKind.DATA_DEPENDENT,
            f".tolist() of {value.describe()}, whose length depends on tensor values",
            HINT_DATA_DEPENDENT,
        )
    items: list[Value] = []
    for index in range(int(length)):  # type: ignore[call-overload]  # a Python int
        row = call_torch(tx, operator.getitem, [value, ConstantValue(index)], {})
        assert isinstance(row, TensorValue)
        items.append(_tolist(tx, row))
    return ListValue(items)


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
    if isinstance(result, SYMBOLIC_TYPES):
        return _has_symbolic(result)
    if isinstance(result, (tuple, list)):
        return any(_has_fake(r) for r in result)
    return False


def _refuse_hidden_tensors(name: str, result: Any) -> None:
    """A result that would become a constant may not hold (fake) tensors in a container
    `wrap_result` does not take apart (a dict of lists of tensors, say): a constant of fake
    tensors would reach the code after a graph break in place of the real ones."""

    def holds(obj: Any) -> bool:
        if isinstance(obj, torch.Tensor):
            return True
        if isinstance(obj, dict):
            return any(holds(k) or holds(v) for k, v in obj.items())
        if isinstance(obj, (tuple, list, set, frozenset)):
            return any(holds(x) for x in obj)
        return False

    if holds(result):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"{name} returned tensors inside a {type(result).__name__}")


def wrap_result(tx: Translator, node: torch.fx.Node, result: Any) -> Value:
    """Values for the (fake) result of `node`: tensors, or tuples/lists of them."""
    if isinstance(result, torch.Tensor):
        return TensorValue(node, result)
    if isinstance(result, SYMBOLIC_TYPES):
        ok, number = static_value(result)
        if ok:
            return ConstantValue(number)
        return SymNodeValue(node, result)
    if isinstance(result, (tuple, list)):
        items: list[Value] = []
        for i, item in enumerate(result):
            if isinstance(item, (torch.Tensor, tuple, list)) or _has_symbolic(item):
                sub = tx.output.create_node(
                    "call_function", operator.getitem, (node, i), {}, item
                )
                items.append(wrap_result(tx, sub, item))
            else:
                _refuse_hidden_tensors(str(node.target), item)
                items.append(ConstantValue(static_value(item)[1]))
        if isinstance(result, list):
            return ListValue(items)
        if isinstance(result, torch.Size):
            return TupleValue(items, None, tuple)
        return TupleValue(items, None, type(result))
    return ConstantValue(result)


def tensor_attribute(tx: Translator, value: TensorValue, name: str) -> Value | None:
    """`tensor.name` for metadata and view attributes (None if not one of those)."""
    if name in TENSOR_META_ATTRS:
        meta = getattr(value.fake, name)
        if _has_symbolic(meta):
            # A size that depends on tensor values (`nonzero(x).shape`): computed in the graph.
            return call_torch(tx, getattr, [value, ConstantValue(name)], {})
        return ConstantValue(meta)
    if name in TENSOR_VIEW_ATTRS:
        return call_torch(tx, getattr, [value, ConstantValue(name)], {})
    if name == "grad":
        raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "reading tensor.grad while tracing")
    return None
