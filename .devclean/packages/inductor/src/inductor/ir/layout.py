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
        # NOTE: a symbolic offset (a view `x[:, n:]` of a symbolic start) is an expression
        expr: Expr = sympy.Integer(self.offset) if isinstance(self.offset, int) else self.offset
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


def view_strides(size: Sequence[object], stride: Sequence[object],
                 new_size: Sequence[object]) -> tuple[object, ...] | None:
    """The strides of `new_size` viewing a tensor of `size` and `stride` without a copy
    (ATen's view rule: dims are split or merged only within a chunk of memory-contiguous
    dims), or None. For symbolic sizes: a chunk's products must be equal expressions, so
    the strides found hold for every size (hints only order the search)."""
    if not size:
        return tuple(1 for _ in new_size) if all(s == 1 for s in new_size) else None
    out: list[object] = [0] * len(new_size)
    view_d = len(new_size) - 1
    base = stride[-1]
    tensor_numel: object = 1
    view_numel: object = 1
    for d in range(len(size) - 1, -1, -1):
        tensor_numel = tensor_numel * size[d]  # type: ignore[operator]
        if d == 0 or (size[d - 1] != 1 and stride[d - 1] != tensor_numel * base):  # type: ignore[operator]
            while view_d >= 0 and (new_size[view_d] == 1 or (
                    view_numel != tensor_numel
                    and size_hint(view_numel) < size_hint(tensor_numel))):
                out[view_d] = view_numel * base  # type: ignore[operator]
                view_numel = view_numel * new_size[view_d]  # type: ignore[operator]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base = stride[d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(sympy.sympify(s) if not isinstance(s, int) else s for s in out)
