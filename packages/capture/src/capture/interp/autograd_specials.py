"""Autograd helpers in traced code: `torch.autograd.Function` subclasses and
`torch.utils.checkpoint.checkpoint`.

In: the call's values. Out: the result values. `F.apply(*args)` becomes one graph node that
calls `F.apply` (its output metadata found by running it on fake tensors): the forward
runs (or is traced by a backend that traces to ATen) inside the graph and autograd uses the
user's `backward`. `checkpoint(fn, *args, use_reentrant=False)` traces `fn` inline and tags
its nodes with `meta["checkpoint"]` (the region's number); its results and gradients are
eager's, and activations are saved unless the backend recomputes tagged regions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.checkpoint

from capture import torch_ops
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp.builtins_table import special
from capture.values import ConstantValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator

_regions = itertools.count(1)


@special(torch.autograd.Function.apply.__func__)  # type: ignore[attr-defined]  # a classmethod
def _function_apply(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    owner = args[0] if args else None
    if not (
        isinstance(owner, ConstantValue)
        and isinstance(owner.value, type)
        and issubclass(owner.value, torch.autograd.Function)
    ):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "autograd.Function.apply on "
                          f"{owner.describe() if owner is not None else 'nothing'}")
    if kwargs:
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          f"{owner.value.__name__}.apply with keyword arguments")
    return torch_ops.call_torch(tx, _applier(owner.value), list(args[1:]), {})


_appliers: dict[type, Callable[..., Any]] = {}


def _applier(cls: type[torch.autograd.Function]) -> Callable[..., Any]:
    """The graph node's target for `cls.apply`: a plain function the graph's code holds
    (torch's own `apply` is named as an attribute of its module, which it is not)."""
    found = _appliers.get(cls)
    if found is None:

        def apply(*args: Any) -> Any:
            return cls.apply(*args)  # type: ignore[no-untyped-call]  # torch: untyped

        apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
        _appliers[cls] = found = apply
    return found


@special(torch.utils.checkpoint.checkpoint)
def _checkpoint(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    from capture.interp.calls import call_value

    kwargs = dict(kwargs)
    reentrant = kwargs.pop("use_reentrant", ConstantValue(None))
    if not (isinstance(reentrant, ConstantValue) and reentrant.value is False):
        # NOTE: the reentrant variant detaches outputs whose inputs need no grad: not the
        # inlined function's results.
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "torch.utils.checkpoint.checkpoint without use_reentrant=False")
    context_fn = kwargs.pop("context_fn", None)
    if context_fn is not None and not (
        isinstance(context_fn, ConstantValue)
        and context_fn.value is torch.utils.checkpoint.noop_context_fn
    ):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "checkpoint with a context_fn")
    for option in ("determinism_check", "debug", "early_stop"):
        kwargs.pop(option, None)  # NOTE: checks and debugging aids: no effect on values
    if not args:
        raise unsupported(GraphBreakKind.EXCEPTION, "checkpoint() without a function")
    graph = tx.output.graph
    before = set(graph.nodes)
    result = call_value(tx, args[0], list(args[1:]), kwargs)
    region = next(_regions)
    for node in graph.nodes:
        if node not in before and node.op != "placeholder":
            node.meta["checkpoint"] = region
    return result
