"""Printers for the loop IR and the schedule (used by golden tests and debug logs)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.loop_body import LoopBody, LoopOp
from inductor.ir.nodes import ComputedBuffer, ExternKernel
from inductor.ir.ops import Ref


def _arg(a: object) -> str:
    if isinstance(a, Ref):
        return str(a)
    if isinstance(a, torch.dtype):
        return str(a).removeprefix("torch.")
    if isinstance(a, sympy.Expr):
        return str(a)
    return repr(a)


def format_op(i: int, op: LoopOp) -> str:
    args = ", ".join(_arg(a) for a in op.args)
    if op.dtype is None:
        return f"{op.kind}({args})"
    return f"tmp{i} = {op.kind}({args})  # {_arg(op.dtype)}"


def format_body(body: LoopBody, indent: str = "  ") -> str:
    ranges = ", ".join(f"{v}: {r}" for v, r in zip(body.index_vars, body.index_ranges))
    if body.reduce_vars:
        ranges += " | " + ", ".join(f"{v}: {r}"
                                    for v, r in zip(body.reduce_vars, body.reduce_ranges))
    lines = [f"{indent}body({ranges})"]
    lines += [f"{indent}  {format_op(i, op)}" for i, op in enumerate(body.ops)]
    return "\n".join(lines)


def format_kernels(kernels: Sequence[ComputedBuffer | ExternKernel]) -> str:
    out: list[str] = []
    for k in kernels:
        if isinstance(k, ExternKernel):
            names = ", ".join(o.name for o in k.outputs)
            out.append(f"{names} = extern {k.op}")
            continue
        lay = k.layout
        out.append(f"{k.name}: size={lay.size} stride={lay.stride} "
                   f"{_arg(lay.dtype)}")
        assert k.body is not None
        out.append(format_body(k.body))
    return "\n".join(out)


def normalize_kernel_names(text: str) -> str:
    """Replace content-hash kernel names by kernel0, kernel1, ... in order of appearance."""
    names: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"kernel{len(names)}")

    return re.sub(r"kernel_[0-9a-f]{16}", sub, text)
