"""Checks that eager ATen makes on tensor values and that tracing on fake tensors skips.

Some composite ops check their input's values before computing (`F.one_hot`: every class
index in `[0, num_classes)`). On fake tensors those checks cannot run, so they vanish from a
traced graph, and a compiled program gives a wrong answer where eager raises (a one-hot row
of zeros for an index out of range). `CheckedOps`, a `TorchFunctionMode` active while
tracing, puts the checks back as `aten._assert_async` ops ahead of the op, so the compiled
graph raises a RuntimeError as eager does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["VALUE_CHECKS", "CheckedOps"]

#: ATen ops that return nothing and raise on their arguments' values (`linalg.inv` of a
#: singular matrix checks `linalg_inv_ex`'s info with `_linalg_check_errors`): a traced
#: graph keeps them, and dead-code elimination may not drop them.
VALUE_CHECKS = (torch.ops.aten._assert_async.msg, torch.ops.aten._linalg_check_errors.default)
torch.fx.node.has_side_effect(torch.ops.aten._linalg_check_errors.default)


def _one_hot_checks(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    indices = args[0] if args else kwargs["input"] if "input" in kwargs else kwargs["tensor"]
    num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    if not isinstance(indices, torch.Tensor) or not isinstance(num_classes, int):
        return
    torch._assert_async(torch.all(indices >= 0), "one_hot: Class values must be non-negative.")
    if num_classes != -1:
        torch._assert_async(torch.all(indices < num_classes),
                            "one_hot: Class values must be smaller than num_classes.")


_CHECKS: dict[Callable[..., Any], Callable[[Sequence[Any], Mapping[str, Any]], None]] = {
    F.one_hot: _one_hot_checks,
}


class CheckedOps(TorchFunctionMode):
    """Runs the value checks of `_CHECKS` before each listed op (see the module doc)."""

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        check = _CHECKS.get(func)
        if check is not None:
            check(args, kwargs)
        return func(*args, **kwargs)
