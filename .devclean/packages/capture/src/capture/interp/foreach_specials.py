"""`torch._foreach_addcdiv(_)` / `_foreach_addcmul(_)` given their scalars as one tensor.

The compile-friendly path of torch's multi-tensor Adam stacks its per-parameter step sizes
into one tensor (`_stack_if_compiling`); the fake (meta) kernel of that overload refuses it
("Expected scalars to be on CPU, got meta"). Traced as what it computes, per tensor
`a[i] + s[i] * (b[i] / c[i])` (or `* c[i]`): one `_foreach_div`/`_foreach_mul`, the scalars
unbound into 0-d tensors, a `_foreach_mul` by them and a `_foreach_add(_)` into `a`, the
same order of operations as the kernel. Any other call goes to the graph unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture import torch_ops
from capture.interp.builtins_table import NONE, SpecialHandler, special
from capture.values import ConstantValue, ListValue, TensorValue, TupleValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator


def _pointwise(fn: Callable[..., Any], combine: Callable[..., Any], accumulate: Callable[..., Any],
               inplace: bool) -> SpecialHandler:
    def handle(tx: Translator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        scalars = args[3] if len(args) == 4 and not kwargs else kwargs.get("scalars")
        if not isinstance(scalars, TensorValue) or len(args) + len(kwargs) != 4:
            return torch_ops.call_torch(tx, fn, args, kwargs)
        a, b, c = args[:3]
        ratio = torch_ops.call_torch(tx, combine, [b, c], {})
        pieces = torch_ops.call_torch(tx, torch.unbind, [scalars, ConstantValue(0)], {})
        assert isinstance(pieces, TupleValue)
        scaled = torch_ops.call_torch(tx, torch._foreach_mul, [ratio, ListValue(pieces.items)],
                                      {})
        result = torch_ops.call_torch(tx, accumulate, [a, scaled], {})
        return NONE if inplace else result

    return handle


special(torch._foreach_addcdiv_)(
    _pointwise(torch._foreach_addcdiv_, torch._foreach_div, torch._foreach_add_, True))
special(torch._foreach_addcdiv)(
    _pointwise(torch._foreach_addcdiv, torch._foreach_div, torch._foreach_add, False))
special(torch._foreach_addcmul_)(
    _pointwise(torch._foreach_addcmul_, torch._foreach_mul, torch._foreach_add_, True))
special(torch._foreach_addcmul)(
    _pointwise(torch._foreach_addcmul, torch._foreach_mul, torch._foreach_add, False))
