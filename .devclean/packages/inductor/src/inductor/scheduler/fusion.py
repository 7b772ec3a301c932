"""Fusion: group ComputedBuffers into kernels that share an outer loop nest.

In: kernels in program order (ComputedBuffer / ExternKernel). Out: a list of steps, each a
`FusedGroup` (one generated C++ kernel) or an `ExternKernel`. A node joins a group when its
outer loops match and every value it reads from the group is produced at the same outer
point (so the group's loop nest computes it before it is read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.ir.layout import Layout
from inductor.ir.loop_body import LoopBody
from inductor.ir.nodes import Buffer, ComputedBuffer, ExternKernel
from inductor.sizevars import Expr, index_symbol, is_static
from inductor.symbols import size_hint

MAX_GROUP_NODES = 48
SMALL_SCALAR_NUMEL = 4096


def outer_symbol(j: int) -> sympy.Symbol:
    return index_symbol(f"x{j}")


def inner_symbol(j: int) -> sympy.Symbol:
    return index_symbol(f"p{j}")


@dataclass(frozen=True, slots=True)
class Split:
    """A node's loops seen from a group with outer loop sizes `outer`."""

    inner_ranges: tuple[int, ...]
    subs: dict[sympy.Symbol, Expr]


def _cumprods(sizes: Sequence[int]) -> list[int]:
    out: list[int] = []
    acc = 1
    for s in sizes:
        acc *= s
        out.append(acc)
    return out


def refine(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The coarsest loop sizes that both `a` and `b` (same product) are groupings of."""
    if _numel(a) != _numel(b):
        return None
    # NOTE: symbolic sizes are ordered by their hints; the divisibility checked below holds
    # for every size when it holds for the expressions.
    bounds = sorted(set(_cumprods(a)) | set(_cumprods(b)), key=size_hint)
    dims: list[int] = []
    prev = 1
    for bd in bounds:
        if bd % prev != 0:
            return None
        if bd != prev:
            dims.append(bd // prev)
        prev = bd
    return tuple(dims)


def _prefix_len(ranges: Sequence[int], numel: int) -> int | None:
    """Smallest k with prod(ranges[:k]) == numel."""
    acc = 1
    if numel == 1:
        return 0
    for k, s in enumerate(ranges):
        acc *= s
        if acc == numel:
            return k + 1
        if size_hint(acc) > size_hint(numel):
            return None
    return None


def split_node(body: LoopBody, outer: Sequence[int]) -> Split | None:
    numel = _numel(outer)
    ranges = body.index_ranges
    if body.is_reduction:
        k: int | None = len(ranges)
        if _numel(ranges) != numel:
            return None
    else:
        k = _prefix_len(ranges, numel)
        if k is None:
            return None
    outer_bounds = _cumprods(outer)
    boundary_set = set(outer_bounds)
    node_bounds = _cumprods(ranges[:k])
    if any(b not in boundary_set for b in node_bounds):
        return None
    subs: dict[sympy.Symbol, Expr] = {}
    j = 0
    last = {bound: i for i, bound in enumerate(outer_bounds)}
    static = all(is_static(s) for s in outer)
    for v, b in zip(body.index_vars[:k], node_bounds):
        covered: list[int] = []
        # NOTE: a symbolic bound covers the outer loops up to its (last) position
        while j < len(outer) and (outer_bounds[j] <= b if static else j <= last[b]):
            covered.append(j)
            j += 1
        expr: Expr = sympy.Integer(0)
        mult = 1
        for c in reversed(covered):
            expr = expr + outer_symbol(c) * mult
            mult *= outer[c]
        subs[v] = expr
    if body.is_reduction:
        subs.update({v: inner_symbol(i) for i, v in enumerate(body.reduce_vars)})
        return Split(body.reduce_ranges, subs)
    for i, v in enumerate(body.index_vars[k:]):
        subs[v] = inner_symbol(i)
    return Split(tuple(ranges[k:]), subs)


@dataclass(eq=False)
class FusedGroup:
    nodes: list[ComputedBuffer]
    outer: tuple[int, ...]
    local: set[str] = field(default_factory=set)

    @property
    def k(self) -> int:
        return len(self.outer)

    def has_reduction(self) -> bool:
        return any(_body(n).is_reduction for n in self.nodes)

    def writes(self) -> set[str]:
        return {n.name for n in self.nodes}

    def reads(self) -> set[str]:
        out: set[str] = set()
        for n in self.nodes:
            out.update(name for name, _ in _body(n).reads())
        return out - self.writes()


Step = FusedGroup | ExternKernel


def _body(n: ComputedBuffer) -> LoopBody:
    assert n.body is not None
    return n.body


def substitute(expr: object, subs: dict[sympy.Symbol, Expr]) -> Expr:
    """An index expression over a node's own variables, rewritten over the group's loop
    symbols (`split_node(...).subs`) and expanded, so equal indices compare equal."""
    assert isinstance(expr, sympy.Expr)
    return sympy.expand(expr.xreplace(subs))


def _canonical(body: LoopBody, outer: Sequence[int]) -> tuple[
        Split, list[tuple[str, Expr]], list[tuple[str, Expr]]] | None:
    sp = split_node(body, outer)
    if sp is None:
        return None
    reads = [(b, substitute(e, sp.subs)) for b, e in body.reads()]
    writes = [(b, substitute(e, sp.subs)) for b, e in body.writes()]
    return sp, reads, writes


def _common_boundary(a: Sequence[int], b: Sequence[int]) -> int:
    prods = _cumprods(a)
    position = {p: i for i, p in enumerate(prods)}
    common = set(prods) & set(_cumprods(b))
    # NOTE: the latest along `a` (the largest, for symbolic sizes too)
    return max(common, key=position.__getitem__, default=1)


def _possible_outer(group: FusedGroup, body: LoopBody) -> tuple[int, ...] | None:
    """The outer loops the group would have with `body` in it, or None."""
    gnumel = _numel(group.outer)
    if body.is_reduction:
        numel = _numel(body.index_ranges)
        if group.has_reduction() and numel != gnumel:
            return None
        k = _prefix_len(group.outer, numel)
        if k is None:
            return None
        new = refine(group.outer[:k], body.index_ranges)
    elif group.has_reduction():
        k = _prefix_len(body.index_ranges, gnumel)
        if k is None:
            return None
        new = refine(group.outer, body.index_ranges[:k])
    else:
        # NOTE: pointwise with pointwise only shares loops of identical sizes; regrouping
        # loops here would make one of the two walk memory with a stride.
        numel = _common_boundary(group.outer, body.index_ranges)
        ka = _prefix_len(group.outer, numel)
        kb = _prefix_len(body.index_ranges, numel)
        if ka is None or kb is None or group.outer[:ka] != body.index_ranges[:kb]:
            return None
        new = tuple(group.outer[:ka])
    if new is None:
        return None
    if not new:
        if not body.is_reduction and size_hint(_numel(body.index_ranges)) > SMALL_SCALAR_NUMEL:
            return None
        if any(not _body(n).is_reduction
               and size_hint(_numel(_body(n).index_ranges)) > SMALL_SCALAR_NUMEL
               for n in group.nodes):
            return None
    return new


def _numel(sizes: Iterable[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _strided_inner(split: Split, reads: list[tuple[str, Expr]]) -> bool:
    """Does a load walk memory with a stride along the innermost inner loop?"""
    if not split.inner_ranges:
        return False
    last = inner_symbol(len(split.inner_ranges) - 1)
    return any(e.coeff(last) not in (0, 1) for _, e in reads)


def _legal(group: FusedGroup, node: ComputedBuffer, outer: tuple[int, ...]) -> bool:
    forms = {}
    for m in [*group.nodes, node]:
        c = _canonical(_body(m), outer)
        if c is None:
            return False
        forms[m.name] = c
        # NOTE: a pointwise node whose inner loop would read with a stride (a transpose
        # seen through regrouped loops) runs better alone, where it is tiled.
        if not _body(m).is_reduction and _strided_inner(c[0], c[1]):
            return False
    writers = {m.name: m for m in group.nodes}
    sp_n, reads_n, _ = forms[node.name]
    for buf, idx in reads_n:
        w = writers.get(buf)
        if w is None:
            continue
        sp_w, _, writes_w = forms[w.name]
        store = writes_w[0][1]
        if any(s.name.startswith("tmp") for s in idx.free_symbols):
            return False
        if sp_w.inner_ranges:
            # NOTE: a pointwise node over the rows reads a reduction's result once per row
            # (a row epilogue: std's sqrt, layer norm's saved rstd); a target may refuse it
            row_epilogue = _body(w).is_reduction and not sp_n.inner_ranges
            if (not row_epilogue and sp_w.inner_ranges != sp_n.inner_ranges) or idx != store:
                return False
        elif idx != store:
            return False
    return True


def _sharing(group: FusedGroup, node: ComputedBuffer) -> int:
    reads = {b for b, _ in _body(node).reads()}
    score = 0
    writes = group.writes()
    for b in reads:
        if b in writes:
            score += 4
        elif b in group.reads():
            score += 1
    return score


CanFuse = Callable[[FusedGroup, ComputedBuffer, tuple[int, ...]], bool]


def is_row_epilogue(group: FusedGroup, node: ComputedBuffer, outer: tuple[int, ...]) -> bool:
    """Whether `node` has no inner loops over `outer` and reads the result of one of the
    group's reductions (legal for the shared rules; the C++ target refuses it)."""
    sp = split_node(_body(node), outer)
    if sp is None or sp.inner_ranges:
        return False
    reductions = {m.name for m in group.nodes
                  if _body(m).is_reduction and _body(m).reduce_ranges}
    return any(b in reductions for b, _ in _body(node).reads())


def fuse(kernels: Iterable[ComputedBuffer | ExternKernel], enabled: bool = True,
         can_fuse: CanFuse | None = None) -> list[Step]:
    """Group kernels in program order. `can_fuse(group, node, outer)`: the target's own
    rule, asked after the shared ones (same device, loops, producers) hold."""
    steps: list[Step] = []
    producer_pos: dict[str, int] = {}
    for kern in kernels:
        if isinstance(kern, ExternKernel):
            steps.append(kern)
            for out in kern.outputs:
                producer_pos[out.name] = len(steps) - 1
            continue
        body = _body(kern)
        deps = [producer_pos[b] for b, _ in body.reads() if b in producer_pos]
        first = max(deps, default=-1)
        best: tuple[int, int, tuple[int, ...]] | None = None
        if enabled:
            for pos in range(max(first, 0), len(steps)):
                g = steps[pos]
                if not isinstance(g, FusedGroup) or len(g.nodes) >= MAX_GROUP_NODES:
                    continue
                if pos < first:
                    continue
                if g.nodes[0].layout.device != kern.layout.device:
                    continue
                new_outer = _possible_outer(g, body)
                if new_outer is None or not _legal(g, kern, new_outer):
                    continue
                if can_fuse is not None and not can_fuse(g, kern, new_outer):
                    continue
                score = _sharing(g, kern)
                if score > 0 and (best is None or score >= best[0]):
                    best = (score, pos, new_outer)
        if best is not None:
            _, pos, new_outer = best
            g = steps[pos]
            assert isinstance(g, FusedGroup)
            g.nodes.append(kern)
            g.outer = new_outer
            producer_pos[kern.name] = pos
        else:
            steps.append(FusedGroup([kern], tuple(body.index_ranges)))
            producer_pos[kern.name] = len(steps) - 1
    return steps


def assign_locals(steps: list[Step], users: dict[str, set[int]], outputs: set[str]) -> None:
    """Buffers written and read only inside one group, at the group's outer point, become
    scalars in the kernel instead of memory."""
    for pos, step in enumerate(steps):
        if not isinstance(step, FusedGroup):
            continue
        for n in step.nodes:
            if n.name in outputs:
                continue
            if users.get(n.name, set()) - {pos}:
                continue
            sp = split_node(_body(n), step.outer)
            if sp is not None and (_body(n).is_reduction or not sp.inner_ranges):
                step.local.add(n.name)


def remove_dead(kernels: list[ComputedBuffer | ExternKernel], live: set[str]) -> list[
        ComputedBuffer | ExternKernel]:
    """Drop kernels none of whose outputs is used (walking backwards)."""
    needed = set(live)
    kept: list[ComputedBuffer | ExternKernel] = []
    for kern in reversed(kernels):
        if isinstance(kern, ExternKernel):
            outs = {o.name for o in kern.outputs}
            # NOTE: an extern call with no outputs runs for its effect: a value check
            # (`aten._assert_async`) must raise at run time as in eager.
            if outs & needed or not outs:
                kept.append(kern)
                needed.update(kern.reads)
            continue
        if kern.name in needed:
            kept.append(kern)
            needed.update(b for b, _ in _body(kern).reads())
    kept.reverse()
    return kept


def buffer_bytes(buf: Buffer) -> int:
    lay: Layout = buf.layout
    return lay.storage_size() * lay.dtype.itemsize


def format_schedule(steps: list[Step]) -> str:
    lines = []
    for pos, step in enumerate(steps):
        if isinstance(step, FusedGroup):
            local = f" local={sorted(step.local)}" if step.local else ""
            lines.append(f"step{pos}: kernel outer={step.outer} "
                         f"nodes={[n.name for n in step.nodes]}{local}")
        else:
            lines.append(f"step{pos}: extern {step.op} -> {[o.name for o in step.outputs]}")
    return "\n".join(lines)
