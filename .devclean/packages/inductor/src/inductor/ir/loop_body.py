"""LoopBody: the printable, hashable form of an inner function.

In: an inner function `fn(index) -> Ref` (pointwise) or a reduction definition, called once
under `BodyBuilder` (the recording ops handler). Out: a frozen `LoopBody` of SSA ops over
named sympy loop variables; scheduler and code generators only read this form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.checks import KernelCheck
from inductor.ir.ops import OPS, REDUCTIONS, Ref, compute_dtype, use_handler
from inductor.sizevars import Expr, index_symbol, simplify_index


@dataclass(frozen=True, slots=True)
class LoopOp:
    """One SSA op. `args` hold Refs, sympy index expressions, buffer names and constants."""

    kind: str
    args: tuple[object, ...]
    dtype: torch.dtype | None  # dtype of the produced value, None for stores


def uses(op: LoopOp) -> list[int]:
    """Ids of the ops whose values `op` reads: its Ref arguments, and the indirect indices
    (`tmp<id>` symbols) inside its index expressions."""
    out = [a.id for a in op.args if isinstance(a, Ref)]
    for a in op.args:
        if isinstance(a, sympy.Expr):
            out += [int(str(s)[3:]) for s in a.free_symbols if str(s).startswith("tmp")]
    return out


@dataclass(frozen=True, slots=True)
class LoopBody:
    index_vars: tuple[sympy.Symbol, ...]
    index_ranges: tuple[int, ...]
    reduce_vars: tuple[sympy.Symbol, ...]
    reduce_ranges: tuple[int, ...]
    ops: tuple[LoopOp, ...]

    @property
    def is_reduction(self) -> bool:
        return any(op.kind == "reduction" for op in self.ops)

    def ranges(self) -> dict[sympy.Symbol, int]:
        out = dict(zip(self.index_vars, self.index_ranges))
        out.update(zip(self.reduce_vars, self.reduce_ranges))
        return out

    def reads(self) -> list[tuple[str, Expr]]:
        return [(str(op.args[0]), _expr(op.args[1])) for op in self.ops if op.kind == "load"]

    def writes(self) -> list[tuple[str, Expr]]:
        return [
            (str(op.args[0]), _expr(op.args[1]))
            for op in self.ops
            if op.kind in ("store", "store_reduction")
        ]

    def rename_buffers(self, mapping: Mapping[str, str]) -> LoopBody:
        def fix(op: LoopOp) -> LoopOp:
            if op.kind in ("load", "store", "store_reduction"):
                name = str(op.args[0])
                return LoopOp(op.kind, (mapping.get(name, name), *op.args[1:]), op.dtype)
            return op

        return LoopBody(
            self.index_vars, self.index_ranges, self.reduce_vars, self.reduce_ranges,
            tuple(fix(op) for op in self.ops),
        )


def _expr(x: object) -> Expr:
    assert isinstance(x, sympy.Expr)
    return x


class BodyBuilder:
    """The recording ops handler: every call appends one `LoopOp`."""

    def __init__(
        self, buffer_dtypes: Callable[[str], torch.dtype], ranges: Mapping[sympy.Symbol, int]
    ) -> None:
        self.ops: list[LoopOp] = []
        self._buffer_dtypes = buffer_dtypes
        self._ranges = dict(ranges)
        self._refs: dict[LoopOp, Ref] = {}

    def _emit(self, kind: str, args: tuple[object, ...], dtype: torch.dtype) -> Ref:
        op = LoopOp(kind, args, dtype)
        if kind not in ("reduction", "rand"):
            # NOTE: common subexpression elimination; loads are pure inside one body.
            found = self._refs.get(op)
            if found is not None:
                return found
        ref = Ref(len(self.ops), dtype)
        self.ops.append(op)
        if kind not in ("reduction", "rand"):
            self._refs[op] = ref
        return ref

    def _simplify(self, index: Expr) -> Expr:
        return simplify_index(sympy.expand(index), self._ranges)

    def load(self, name: str, index: Expr) -> Ref:
        dtype = compute_dtype(self._buffer_dtypes(name))
        return self._emit("load", (name, self._simplify(sympy.sympify(index))), dtype)

    def store(self, name: str, index: Expr, value: Ref) -> None:
        value = self.to_dtype(value, compute_dtype(self._buffer_dtypes(name)))
        self.ops.append(LoopOp("store", (name, self._simplify(sympy.sympify(index)), value),
                               None))

    def constant(self, value: bool | float, dtype: torch.dtype) -> Ref:
        dtype = compute_dtype(dtype)
        if dtype == torch.bool:
            value = bool(value)
        elif dtype.is_floating_point:
            value = float(value)
        else:
            value = int(value)
        return self._emit("constant", (value,), dtype)

    def index_expr(self, expr: Expr, dtype: torch.dtype) -> Ref:
        return self._emit("index_expr", (self._simplify(sympy.sympify(expr)),),
                          compute_dtype(dtype))

    def to_dtype(self, x: Ref, dtype: torch.dtype) -> Ref:
        dtype = compute_dtype(dtype)
        if x.dtype == dtype:
            return x
        return self._emit("to_dtype", (x, dtype), dtype)

    def indirect(self, x: Ref, size: int, check: KernelCheck | None = None,
                 wrap: bool = True) -> sympy.Symbol:
        x = self.to_dtype(x, torch.int64)
        ref = self._emit("indirect", (x, size, wrap, check), torch.int64)
        sym = sympy.Symbol(f"tmp{ref.id}", integer=True)
        return sym

    def call(self, name: str, *args: Ref) -> Ref:
        spec = OPS[name]
        assert len(args) == spec.arity, (name, args)
        if spec.result == "bool":
            dtype = torch.bool
        elif spec.result == "arg1":
            dtype = args[1].dtype
        else:
            dtype = args[0].dtype
        return self._emit(name, tuple(args), dtype)

    def reduction(self, kind: str, value: Ref, index: Ref | None = None) -> Ref:
        assert kind in REDUCTIONS, kind
        if kind in ("argmax", "argmin"):
            assert index is not None
            return self._emit("reduction", (kind, value, index), torch.int64)
        if kind in ("any", "all"):
            return self._emit("reduction", (kind, value), torch.bool)
        return self._emit("reduction", (kind, value), value.dtype)

    def store_reduction(self, name: str, index: Expr, value: Ref) -> None:
        value = self.to_dtype(value, compute_dtype(self._buffer_dtypes(name)))
        self.ops.append(
            LoopOp("store_reduction", (name, self._simplify(sympy.sympify(index)), value),
                   None)
        )

    def rand(self, seed: Ref, offset: Expr, normal: bool) -> Ref:
        return self._emit("rand", (seed, self._simplify(sympy.sympify(offset)), normal),
                          torch.float32)


def squeezed_vars(
    sizes: Sequence[int], prefix: str
) -> tuple[list[Expr], list[sympy.Symbol], list[int]]:
    """Index list over `sizes` with 0 for size-1 dims, plus the real variables and ranges."""
    index: list[Expr] = []
    syms: list[sympy.Symbol] = []
    ranges: list[int] = []
    for s in sizes:
        if s == 1:
            index.append(sympy.Integer(0))
        else:
            sym = index_symbol(f"{prefix}{len(syms)}")
            syms.append(sym)
            ranges.append(s)
            index.append(sym)
    return index, syms, ranges


def record_pointwise(
    sizes: Sequence[int],
    body: Callable[[list[Expr]], None],
    buffer_dtypes: Callable[[str], torch.dtype],
) -> LoopBody:
    index, syms, ranges = squeezed_vars(sizes, "i")
    builder = BodyBuilder(buffer_dtypes, dict(zip(syms, ranges)))
    with use_handler(builder):
        body(index)
    return LoopBody(tuple(syms), tuple(ranges), (), (), tuple(builder.ops))


def record_reduction(
    sizes: Sequence[int],
    reduce_sizes: Sequence[int],
    body: Callable[[list[Expr], list[Expr]], None],
    buffer_dtypes: Callable[[str], torch.dtype],
) -> LoopBody:
    index, syms, ranges = squeezed_vars(sizes, "i")
    rindex, rsyms, rranges = squeezed_vars(reduce_sizes, "r")
    all_ranges = dict(zip(syms, ranges))
    all_ranges.update(zip(rsyms, rranges))
    builder = BodyBuilder(buffer_dtypes, all_ranges)
    with use_handler(builder):
        body(index, rindex)
    return LoopBody(tuple(syms), tuple(ranges), tuple(rsyms), tuple(rranges),
                    tuple(builder.ops))
