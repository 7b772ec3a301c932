"""Autograd helpers in traced code: `torch.autograd.Function` subclasses and
`torch.utils.checkpoint.checkpoint`.

In: the call's values. Out: the result values. `F.apply(*args)` becomes one graph node that
calls `F.apply` (its output metadata found by running it on fake tensors): the forward
runs (or is traced by a backend that traces to ATen) inside the graph and autograd uses the
user's `backward`. `checkpoint(fn, *args, use_reentrant=False)` traces `fn` inline and tags
its nodes with `meta["checkpoint"]` (the region's number); its results and gradients are
eager's, and aotgrad's partitioners recompute the tagged nodes in the backward instead of
saving them (only the region's inputs are saved). `use_reentrant=True` (torch's default) is
traced the same way where it gives the same values and gradients (`_check_reentrant`).
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.checkpoint

from capture import torch_ops
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import dispatch
from capture.interp.builtins_table import special
from capture.interp.function_globals import guard_function_globals
from capture.values import ConstantValue, TensorValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator

_regions = itertools.count(1)


# NOTE: `Function.apply` is a Python classmethod up to torch 2.13 (the special is its
# function) and a C classmethod descriptor from 2.14 (calls.call_python finds it from the
# bound builtin `F.apply`).
_APPLY = inspect.getattr_static(torch.autograd.Function, "apply")


@special(getattr(_APPLY, "__func__", _APPLY))
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
    cls = owner.value
    guard_function_globals(
        tx, [cls.forward, cls.backward, getattr(cls, "setup_context", None)],
        f"{cls.__name__}.apply")
    return torch_ops.call_torch(tx, _applier(cls), list(args[1:]), {})


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

    kwargs = dict(kwargs)
    reentrant = kwargs.pop("use_reentrant", ConstantValue(None))
    if not isinstance(reentrant, ConstantValue) or reentrant.value not in (None, True, False):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "torch.utils.checkpoint.checkpoint with a non-constant use_reentrant")
    context_fn = kwargs.pop("context_fn", None)
    if context_fn is not None and not (
        isinstance(context_fn, ConstantValue)
        and context_fn.value is torch.utils.checkpoint.noop_context_fn
    ):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL, "checkpoint with a context_fn")
    kwargs.pop("preserve_rng_state", None)  # NOTE: random values are saved, never redrawn
    if reentrant.value is not False:
        _check_reentrant(args, kwargs, reentrant.value is None)
    for option in ("determinism_check", "debug", "early_stop"):
        kwargs.pop(option, None)  # NOTE: checks and debugging aids: no effect on values
    if not args:
        raise unsupported(GraphBreakKind.EXCEPTION, "checkpoint() without a function")
    graph = tx.output.graph
    before = set(graph.nodes)
    result = dispatch.call_value(tx, args[0], list(args[1:]), kwargs)
    region = next(_regions)
    for node in graph.nodes:
        if node not in before and node.op != "placeholder":
            node.meta["checkpoint"] = region
    return result


def _check_reentrant(args: list[Value], kwargs: dict[str, Value], implicit: bool) -> None:
    """`use_reentrant=True` (or not passed: torch's default is True, with a warning) is
    traced like the non-reentrant variant where the two give the same values and gradients:
    some tensor argument requires grad, or grad mode is off. Otherwise the reentrant
    variant's outputs need no grad although the function's parameters do (its
    `autograd.Function` sees no input that needs one): the call runs eagerly.

    NOTE: the reentrant variant refuses `torch.autograd.grad` in the backward; the
    recomputed graph does not.
    """
    if implicit:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed "
            "explicitly; traced as torch's default use_reentrant=True (pass "
            "use_reentrant=False, which torch recommends)", stacklevel=2)
    if kwargs:
        raise unsupported(GraphBreakKind.EXCEPTION, "checkpoint(use_reentrant=True) with "
                          f"keyword arguments {', '.join(sorted(kwargs))} (torch raises)")
    if not torch.is_grad_enabled():
        return
    if not any(isinstance(a, TensorValue) and a.fake.requires_grad for a in args[1:]):
        raise unsupported(GraphBreakKind.UNSUPPORTED_CALL,
                          "checkpoint(use_reentrant=True) where no tensor argument requires "
                          "grad: its outputs are detached from the function's parameters "
                          "(pass use_reentrant=False)")
