"""Row arrays: a value a reduction computes per element of its row, kept for the later
nodes of its fused group that compute it again (softmax: `exp(x - max)` in the sum and in
the normalization), as ATen's softmax writes the exponentials once.

In: a fused group. Out: the arrays to declare at each outer point, and per node which ops
store into or load from them (`KernelGen._node` emits them).
"""

from __future__ import annotations

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.ir.loop_body import LoopOp, uses
from inductor.ir.nodes import ComputedBuffer
from inductor.ir.ops import Ref
from inductor.scheduler.fusion import FusedGroup, inner_symbol, split_node
from inductor.scheduler.fusion import substitute as _sub
from inductor.sizevars import is_static


class RowCache:
    """The row arrays of one fused group (none for a reduction split across threads)."""

    def __init__(self, group: FusedGroup, *, parallel_reduction: bool) -> None:
        self.group = group
        self.owner: dict[object, str] = {}
        self.users: dict[str, set[object]] = {}
        self.cached: dict[object, tuple[str, int, torch.dtype]] = (
            {} if parallel_reduction else self._plan_row_cache())

    def arrays(self) -> list[tuple[str, int, torch.dtype]]:
        """(name, size, dtype) of each array to declare at the outer point."""
        return list(self.cached.values())

    def _value_keys(self, n: ComputedBuffer) -> list[object] | None:
        """A structural key per op of a node with one inner loop (loads by buffer and
        substituted index, Refs by their op's key), equal across nodes for equal values;
        None for other nodes."""
        assert n.body is not None
        sp = split_node(n.body, self.group.outer)
        if sp is None or len(sp.inner_ranges) != 1:
            return None
        subs = dict(sp.subs)
        keys: list[object] = []
        for i, op in enumerate(n.body.ops):
            parts: list[object] = [op.kind, op.dtype]
            for a in op.args:
                if isinstance(a, Ref):
                    parts.append(("ref", keys[a.id]))
                elif isinstance(a, sympy.Expr):
                    parts.append(("expr", _sub(a, subs)))
                    if any(str(s).startswith("tmp") for s in a.free_symbols):
                        # NOTE: an indirect index names this node's own ops: never equal
                        # to another node's value.
                        parts.append(("node", n.name, i))
                else:
                    parts.append(("const", repr(a), type(a).__name__))
            keys.append(tuple(parts))
        return keys

    def _plan_row_cache(self) -> dict[object, tuple[str, int, torch.dtype]]:
        """Values a reduction computes per element (in its one inner loop) that a later
        node of the group computes again at the same element (softmax: `exp(x - max)` in
        the sum and in the normalization): each is kept in a stack array of the row while
        the reduction runs and loaded by the later node instead of recomputed (as ATen's
        softmax writes the exponentials once). Only values computed with a transcendental
        or a division, over rows of at most `_ROW_CACHE_MAX` elements."""
        out: dict[object, tuple[str, int, torch.dtype]] = {}
        nodes = self.group.nodes
        all_keys = [self._value_keys(n) for n in nodes]
        for i, n in enumerate(nodes):
            keys = all_keys[i]
            assert n.body is not None
            red = next((op for op in n.body.ops if op.kind == "reduction"), None)
            if keys is None or red is None or not isinstance(red.args[1], Ref):
                continue
            inner = split_node(n.body, self.group.outer)
            assert inner is not None
            # NOTE: a symbolic length: a per-thread heap array (codegen/cpp.py)
            if is_static(inner.inner_ranges[0]) and (
                    inner.inner_ranges[0] > _ROW_CACHE_MAX or inner.inner_ranges[0] < 1):
                continue
            v = red.args[1]
            made_of = _ancestors(n.body.ops, v.id)
            shared = {keys[a] for a in made_of}
            for c in made_of:
                key = keys[c]
                if key in out or len(out) >= _ROW_ARRAYS_MAX \
                        or not _expensive(n.body.ops, c):
                    continue
                dtype = n.body.ops[c].dtype
                if dtype not in (torch.float32, torch.float64) or not _varies(key):
                    continue
                assert dtype is not None
                users = [j for j, k in enumerate(all_keys) if j > i and k is not None
                         and _inner_ranges(nodes[j], self.group.outer) == inner.inner_ranges
                         and _reads(nodes[j], k, key, shared, whole=c == v.id)]
                if users:
                    out[key] = (f"row{len(out)}", inner.inner_ranges[0], dtype)
                    self.owner[key] = n.name
                    for j in users:
                        self.users.setdefault(nodes[j].name, set()).add(key)
        return out

    def rows_of(self, n: ComputedBuffer, hoisted: set[int]) -> dict[int, tuple[str, bool]]:
        """Op id -> (row array, whether this node stores it (else loads it))."""
        if not self.cached:
            return {}
        keys = self._value_keys(n)
        if keys is None:
            return {}
        out: dict[int, tuple[str, bool]] = {}
        loads = self.users.get(n.name, set())
        for i, k in enumerate(keys):
            if k not in self.cached or i in hoisted:
                continue
            if self.owner.get(k) == n.name:
                out.setdefault(i, (self.cached[k][0], True))
            elif k in loads:
                out[i] = (self.cached[k][0], False)
        return out


_ROW_CACHE_MAX = 4096
_ROW_ARRAYS_MAX = 4  # NOTE: stack arrays per group (at most 4 x 4096 doubles, 128 KB)
_EXPENSIVE = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh",
                        "erf", "erfc", "sigmoid", "pow", "truediv", "sin", "cos", "tan",
                        "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                        "sqrt", "rsqrt", "reciprocal", "lgamma", "atan2", "hypot"})


def _expensive(ops_: tuple[LoopOp, ...], ref: int) -> bool:
    """Whether the value of op `ref` is computed with a transcendental or a division."""
    stack, seen = [ref], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        if ops_[i].kind in _EXPENSIVE:
            return True
        stack += [a.id for a in ops_[i].args if isinstance(a, Ref)]
    return False


def _ancestors(ops_: tuple[LoopOp, ...], ref: int) -> list[int]:
    """Op `ref` and the ops its value is computed from, `ref` first, then by position from
    the last (the values nearest the reduction's input before those they are made of)."""
    seen = {ref}
    stack = [ref]
    while stack:
        for a in ops_[stack.pop()].args:
            if isinstance(a, Ref) and a.id not in seen:
                seen.add(a.id)
                stack.append(a.id)
    return [ref] + sorted(seen - {ref}, reverse=True)


def _reads(n: ComputedBuffer, keys: list[object], key: object, shared: set[object], *,
           whole: bool) -> bool:
    """Whether node `n` (its op keys `keys`) computes the value `key` before its first
    reduction; unless `whole` (the reduction's own input), only where an op of `n` that the
    owner's reduction does not compute reads it (softmax's backward: `exp(x - max) / sum`
    times the row's sum, beside the cached `grad * exp(x - max) / sum`); a value read only
    inside other shared values is not kept apart."""
    first = _first_reduction(n)
    at = [m for m, k in enumerate(keys[:first]) if k == key]
    if not at or whole:
        return bool(at)
    assert n.body is not None
    return any(isinstance(a, Ref) and a.id in at and keys[q] not in shared
               for q, op in enumerate(n.body.ops) for a in op.args)


def _varies(key: object) -> bool:
    """Whether a value key (`RowCache._value_keys`) reads the inner loop's symbol."""
    p = inner_symbol(0)
    if isinstance(key, tuple):
        if len(key) == 2 and key[0] == "expr" and isinstance(key[1], sympy.Expr):
            return bool(key[1].has(p))
        return any(_varies(k) for k in key)
    return False


def dead_ops(ops_: tuple[LoopOp, ...], rows: dict[int, tuple[str, bool]]) -> set[int]:
    """Ops needed only to compute values now loaded from a row array."""
    if not any(not stores for _, stores in rows.values()):
        return set()
    live: set[int] = set()
    stack = [i for i, op in enumerate(ops_)
             if op.kind in ("store", "store_reduction", "reduction")]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        if i in rows and not rows[i][1]:
            continue
        stack += uses(ops_[i])  # NOTE: an indirect load's index is live too
    return set(range(len(ops_))) - live


def _first_reduction(n: ComputedBuffer) -> int:
    assert n.body is not None
    return next((i for i, op in enumerate(n.body.ops) if op.kind == "reduction"),
                len(n.body.ops))


def _inner_ranges(n: ComputedBuffer, outer: tuple[int, ...]) -> tuple[int, ...] | None:
    assert n.body is not None
    sp = split_node(n.body, outer)
    return None if sp is None else tuple(sp.inner_ranges)
