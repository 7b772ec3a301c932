"""Loop merging: adjacent loops of a fused group that every index walks as one become one.

In: a `FusedGroup` after fusion. Out: the same computation over fewer, longer loops. Two
adjacent loops `a` (outer, size A) and `b` (inner, size B) merge when every index
expression of every node in the group (loads, stores, index values, random offsets) is
affine in them with `coeff(a) == coeff(b) * B`: `c * (B * a + b)` is then `c * m` for one
loop `m` of size `A * B`. Outer loops (shared by every node) and inner loops (a reduction's
range, shared by the nodes that have one) merge separately; loops of symbolic size do not.

NOTE: why: a batch norm over [32, 64, 28, 28] ran its innermost loops over 28 elements
(one AVX-512 vector and a remainder of 12), its reductions too; merged, the inner loops
run over 784 contiguous elements. The C++ target merges; Triton kernels index one flat
range already.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.ir.loop_body import LoopBody, LoopOp
from inductor.ir.nodes import ComputedBuffer
from inductor.scheduler.fusion import FusedGroup, inner_symbol, outer_symbol, split_node
from inductor.sizevars import is_static

Dims = list[tuple[sympy.Symbol, Any]]  # NOTE: an int, or a symbolic size (never merged)


def merged_loops(group: FusedGroup) -> FusedGroup:
    """`group` over merged loops (itself when no two loops merge); the nodes are copies."""
    if not all(is_static(s) for s in group.outer):
        return group
    bodies: list[LoopBody] = []
    inner: tuple[int, ...] | None = None
    for n in group.nodes:
        canonical = _canonical_body(n, group.outer)
        if canonical is None:
            return group
        bodies.append(canonical)
        if _has_inner(canonical, group.k):
            ranges = (canonical.reduce_ranges if canonical.is_reduction
                      else canonical.index_ranges[group.k:])
            if inner is not None and ranges != inner:
                return group
            inner = ranges
    exprs = [e for b in bodies for op in b.ops for e in _exprs(op)]
    outer_dims = _merge([(outer_symbol(j), int(s)) for j, s in enumerate(group.outer)], exprs)
    inner_dims: Dims = [(inner_symbol(j), s) for j, s in enumerate(inner or ())]
    if all(is_static(s) for s in inner or ()):
        inner_dims = _merge([(p, int(s)) for p, s in inner_dims], exprs)
    if len(outer_dims) == group.k and len(inner_dims) == len(inner or ()):
        return group
    # NOTE: merged loops take the scheduler's names back, in order (x0, x1, ...; p0, ...)
    subs: dict[sympy.Symbol, sympy.Expr] = {}
    for j, (sym, _) in enumerate(outer_dims):
        subs[sym] = outer_symbol(j)
    for j, (sym, _) in enumerate(inner_dims):
        subs[sym] = inner_symbol(j)
    new_outer = tuple(s for _, s in outer_dims)
    new_inner = tuple(s for _, s in inner_dims)
    nodes = [replace(n, body=_rewritten(b, subs, new_outer, new_inner, _has_inner(b, group.k)))
             for n, b in zip(group.nodes, bodies)]
    return FusedGroup(nodes, new_outer, set(group.local))


def _canonical_body(n: ComputedBuffer, outer: Sequence[int]) -> LoopBody | None:
    """`n`'s body over the group's own loop symbols: x0.. for `outer`, p0.. for the rest."""
    body = n.body
    if body is None:
        return None
    sp = split_node(body, outer)
    if sp is None:
        return None
    xs = tuple(outer_symbol(j) for j in range(len(outer)))
    ps = tuple(inner_symbol(j) for j in range(len(sp.inner_ranges)))
    ops = tuple(_substituted(op, sp.subs) for op in body.ops)
    if body.is_reduction:
        return LoopBody(xs, tuple(outer), ps, sp.inner_ranges, ops)
    return LoopBody(xs + ps, tuple(outer) + sp.inner_ranges, (), (), ops)


def _has_inner(body: LoopBody, k: int) -> bool:
    return bool(body.reduce_vars) if body.is_reduction else len(body.index_vars) > k


def _exprs(op: LoopOp) -> list[sympy.Expr]:
    return [a for a in op.args if isinstance(a, sympy.Expr)]


def _substituted(op: LoopOp, subs: dict[sympy.Symbol, sympy.Expr]) -> LoopOp:
    if not any(isinstance(a, sympy.Expr) for a in op.args):
        return op
    args = tuple(sympy.expand(a.xreplace(subs)) if isinstance(a, sympy.Expr) else a
                 for a in op.args)
    return LoopOp(op.kind, args, op.dtype)


def _merge(dims: Dims, exprs: list[sympy.Expr]) -> Dims:
    """Merge adjacent dims from the innermost out while every expression allows it."""
    out = list(dims)
    j = len(out) - 2
    while j >= 0:
        (a, size_a), (b, size_b) = out[j], out[j + 1]
        if all(_mergeable(e, a, b, size_b) for e in exprs):
            exprs = [e.xreplace({a: sympy.Integer(0)}) for e in exprs]
            out[j:j + 2] = [(b, size_a * size_b)]
        j -= 1
    return out


def _mergeable(expr: sympy.Expr, a: sympy.Symbol, b: sympy.Symbol, size_b: int) -> bool:
    """Is `expr` affine in `a` and `b` with `coeff(a) == coeff(b) * size_b`?"""
    if not expr.has(a) and not expr.has(b):
        return True
    coeff = {a: sympy.Integer(0), b: sympy.Integer(0)}
    for term in sympy.Add.make_args(expr):
        if not term.has(a) and not term.has(b):
            continue
        c, rest = term.as_independent(a, b, as_Add=False)
        if rest not in coeff:
            return False  # NOTE: a product of loops, a division, a modulo, a clamp
        coeff[rest] = coeff[rest] + c
    return bool(sympy.expand(coeff[a] - coeff[b] * size_b) == 0)


def _rewritten(body: LoopBody, subs: dict[sympy.Symbol, sympy.Expr], outer: tuple[int, ...],
               inner: tuple[int, ...], has_inner: bool) -> LoopBody:
    """A canonical body over the merged loops (each merged loop is named by its innermost
    part; its outer parts have coefficient 0 after the merge and are dropped)."""
    xs = tuple(outer_symbol(j) for j in range(len(outer)))
    ps = tuple(inner_symbol(j) for j in range(len(inner)))
    gone = {s: sympy.Integer(0) for s in (*body.index_vars, *body.reduce_vars)
            if s not in subs}
    # NOTE: two steps: the merged-away symbols go to 0 first, then the survivors are renamed
    # at once (a survivor may take the name another one had)
    ops = tuple(_substituted(_substituted(op, gone), subs) for op in body.ops)
    if body.is_reduction:
        return LoopBody(xs, outer, ps, inner, ops)
    if has_inner:
        return LoopBody(xs + ps, outer + inner, (), (), ops)
    return LoopBody(xs, outer, (), (), ops)
