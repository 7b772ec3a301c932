"""The Triton text of one compute op and of one row reduction (the Triton target).

In: a `LoopOp` of the compute vocabulary (`ir/ops.py`) and the Triton names of its operands;
a reduction kind and the block it reduces. Out: a Triton expression. Integer division,
remainder and fmod also emit a zero-divisor check through the caller's `check`, as eager
raises (`codegen/triton.py` decides how a check is raised on each device).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from inductor.codegen.triton_prelude import BINARY_CALLS, BINARY_INFIX, UNARY
from inductor.ir.loop_body import LoopOp

#: `check(bad, value)`: raise eager's zero-division error where `bad` holds.
ZeroCheck = Callable[[str, str], None]


def compute_text(op: LoopOp, args: list[str], add: Callable[[str], None], fresh: str,
                 check: ZeroCheck) -> str:
    """The Triton expression of `op` over `args`; `add` emits a line before it (named from
    `fresh`, a name unique in the kernel)."""
    k = op.kind
    dtype = op.dtype
    integral = dtype is not None and not dtype.is_floating_point and dtype != torch.bool
    if k in ("trunc_div", "floordiv", "remainder", "fmod") and integral:
        bad = f"{args[1]}_zero{fresh}"
        add(f"{bad} = {args[1]} == 0")
        check(bad, args[1])
        b = f"tl.where({bad}, 1, {args[1]})"
        a0 = args[0]
        if k == "trunc_div":
            return f"({a0} // {b})"
        if k == "floordiv":
            return f"_floordiv({a0}, {b})"
        if k == "remainder":
            return f"_mod({a0}, {b})"
        return f"({a0} % {b})"
    if k == "truediv":
        return f"({args[0]} / {args[1]})"
    if k == "trunc_div":
        return f"libdevice.trunc({args[0]} / {args[1]})"
    if k == "floordiv":
        return f"tl.floor({args[0]} / {args[1]})"
    if k == "remainder":
        r = f"libdevice.fmod({args[0]}, {args[1]})"
        return (f"tl.where(({r} != 0) & (({r} < 0) != ({args[1]} < 0)), "
                f"{r} + {args[1]}, {r})")
    if k == "fmod":
        return f"libdevice.fmod({args[0]}, {args[1]})"
    if k == "pow":
        if integral:
            return f"_ipow({args[0]}, {args[1]})"
        return f"libdevice.pow({args[0]}, {args[1]})"
    if k == "where":
        return f"tl.where({args[0]}, {args[1]}, {args[2]})"
    if k in BINARY_INFIX:
        return f"({args[0]} {BINARY_INFIX[k]} {args[1]})"
    if k in BINARY_CALLS:
        return f"{BINARY_CALLS[k]}({args[0]}, {args[1]})"
    if k in UNARY:
        return UNARY[k].format(args[0])
    raise NotImplementedError(f"no Triton for op {k}")


_REDUCE = {
    "sum": "tl.sum({0}, 1)", "prod": "tl.reduce({0}, 1, _mul)",
    "max": "tl.reduce({0}, 1, _maximum)", "min": "tl.reduce({0}, 1, _minimum)",
    "any": "(tl.max(({0}).to(tl.int32), 1) != 0)", "all": "(tl.min(({0}).to(tl.int32), 1) != 0)",
}


def reduce_text(kind: str, value: str) -> str:
    """The reduction of a `[XBLOCK, RBLOCK]` block `value` along its rows (already masked
    with the reduction's initial value)."""
    if kind not in _REDUCE:
        raise NotImplementedError(kind)
    return _REDUCE[kind].format(value)
