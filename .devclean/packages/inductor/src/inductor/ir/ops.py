"""The ops protocol that lowering's inner functions call, and the table of pointwise ops.

Inner functions call `ops.<name>(...)`; the active handler (one context variable, set only
by `use_handler`) decides what that means. The one handler today records a `LoopBody`
(ir/loop_body.py); code generators then walk the recorded ops, never the closures.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.checks import KernelCheck


@dataclass(frozen=True, slots=True)
class Ref:
    """An SSA value inside a loop body: `tmp<id>` of compute dtype `dtype`."""

    id: int
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"tmp{self.id}"


class OpsHandler(Protocol):
    def load(self, name: str, index: sympy.Expr) -> Ref: ...
    def store(self, name: str, index: sympy.Expr, value: Ref) -> None: ...
    def constant(self, value: bool | float, dtype: torch.dtype) -> Ref: ...
    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Ref: ...
    def to_dtype(self, x: Ref, dtype: torch.dtype) -> Ref: ...
    def indirect(self, x: Ref, size: int, check: KernelCheck | None = None,
                 wrap: bool = True) -> sympy.Symbol: ...
    def call(self, name: str, *args: Ref) -> Ref: ...
    def reduction(self, kind: str, value: Ref, index: Ref | None = None) -> Ref: ...
    def store_reduction(self, name: str, index: sympy.Expr, value: Ref) -> None: ...
    def rand(self, seed: Ref, offset: sympy.Expr, normal: bool) -> Ref: ...


@dataclass(frozen=True, slots=True)
class OpSpec:
    arity: int
    result: str  # "same": dtype of the first argument; "bool"; "arg1": dtype of argument 1


def _specs() -> dict[str, OpSpec]:
    table: dict[str, OpSpec] = {}
    for name in ["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "relu", "erf", "erfc", "erfinv", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "bitwise_not", "lgamma", "frac", "square"]:
        table[name] = OpSpec(1, "same")
    for name in ["add", "sub", "mul", "truediv", "trunc_div", "floordiv", "remainder", "fmod", "maximum", "minimum", "pow", "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "lshift", "rshift", "copysign", "hypot"]:
        table[name] = OpSpec(2, "same")
    for name in ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]:
        table[name] = OpSpec(2, "bool")
    for name in ["logical_not", "isnan", "isinf", "isfinite", "signbit"]:
        table[name] = OpSpec(1, "bool")
    table["where"] = OpSpec(3, "arg1")
    return table


OPS: dict[str, OpSpec] = _specs()

REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")

_active: contextvars.ContextVar[OpsHandler] = contextvars.ContextVar("inductor_ops_handler")


@contextlib.contextmanager
def use_handler(handler: OpsHandler) -> Iterator[None]:
    token = _active.set(handler)
    try:
        yield
    finally:
        _active.reset(token)


class _OpsProxy:
    """`ops.load(...)`, `ops.add(a, b)`, ...: forwards to the active handler."""

    def __getattr__(self, name: str) -> Callable[..., Ref]:
        # NOTE: the handler is looked up at call time, so `ops.add` may be passed around
        # as a function before any handler is active.
        if name in OPS:
            def op(*args: Ref) -> Ref:
                return _active.get().call(name, *args)

            return op

        def method(*args: Any, **kwargs: Any) -> Any:
            return getattr(_active.get(), name)(*args, **kwargs)

        return method


ops = _OpsProxy()


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype values of `dtype` are computed in (half types compute in float32)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
