"""Buffer layouts: size, stride, storage offset, dtype and device of a strided tensor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.sizevars import Expr, is_static
from inductor.symbols import size_hint, sym_expr, sym_sizes


@dataclass(frozen=True, slots=True)
class Layout:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def contiguous(
        size: Sequence[int], dtype: torch.dtype, device: torch.device
    ) -> Layout:
        return Layout(tuple(size), contiguous_strides(size), 0, dtype, device)

    @staticmethod
    def of(t: torch.Tensor) -> Layout:
        # NOTE: sizes of a graph traced for symbolic sizes are expressions over its size
        # symbols (`inductor.symbols`), read without guarding on them.
        offset = sym_expr(t.storage_offset())
        return Layout(sym_sizes(t.shape), sym_sizes(t.stride()),
                      offset,  # NOTE: an int or an expression
                      t.dtype, t.device)

    def index(self, idx: Sequence[Expr]) -> Expr:
        expr: Expr = sympy.Integer(self.offset)
        for i, st, sz in zip(idx, self.stride, self.size):
            if sz != 1 and st != 0:
                expr = expr + i * st
        return expr

    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n

    def storage_size(self) -> int:
        """Elements of storage the layout can touch (past the offset)."""
        if any(s == 0 for s in self.size):
            return 0
        return 1 + sum((sz - 1) * st for sz, st in zip(self.size, self.stride))

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            sz == 1 or st == c
            for sz, st, c in zip(self.size, self.stride, contiguous_strides(self.size))
        )

    def is_dense(self) -> bool:
        """Non-overlapping and dense (a permutation of a contiguous layout)."""
        if any(s == 0 for s in self.size):
            return True
        # NOTE: ordered by the example's values; the chain checked below holds for every
        # size when it holds for the expressions.
        dims = sorted(
            ((st, sz) for st, sz in zip(self.stride, self.size) if sz != 1),
            key=lambda d: (size_hint(d[0]), size_hint(d[1])),
        )
        expected = 1
        for st, sz in dims:
            if st != expected:
                return False
            expected *= sz
        return True


def contiguous_strides(size: Sequence[int]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for s in reversed(list(size)):
        strides.append(acc)
        acc *= max(s, 1) if is_static(s) else s  # NOTE: a size symbol is >= 2
    return tuple(reversed(strides))
