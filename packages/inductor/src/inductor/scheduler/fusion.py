"""Fusion: group ComputedBuffers into kernels that share an outer loop nest.

In: kernels in program order (ComputedBuffer / ExternKernel). Out: a list of steps, each a
`FusedGroup` (one generated C++ kernel) or an `ExternKernel`. A node joins a group when its
outer loops match and every value it reads from the group is produced at the same outer
point (so the group's loop nest computes it before it is read).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sympy

from inductor.ir.layout import Layout
from inductor.ir.loop_body import LoopBody
from inductor.ir.nodes import Buffer, ComputedBuffer, ExternKernel
from inductor.sizevars import Expr, index_symbol

MAX_GROUP_NODES = 48
SMALL_SCALAR_NUMEL = 4096


def outer_symbol(j: int) -> sympy.Symbol:
    return index_symbol(f"x{j}")


def inner_symbol(j: int) -> sympy.Symbol:
    return index_symbol(f"p{j}")


@dataclass(frozen=True, slots=True)
class Split:
    """A node's loops seen from a group with `k` outer loops."""

    inner_ranges: tuple[int, ...]
    subs: dict[sympy.Symbol, Expr]


def split_node(body: LoopBody, k: int) -> Split | None:
    if body.is_reduction:
        if len(body.index_ranges) != k:
            return None
        subs: dict[sympy.Symbol, Expr] = {v: outer_symbol(j) for j, v in enumerate(body.index_vars)}
        subs.update({v: inner_symbol(j) for j, v in enumerate(body.reduce_vars)})
        return Split(body.reduce_ranges, subs)
    if len(body.index_ranges) < k:
        return None
    subs = {}
    for j, v in enumerate(body.index_vars):
        subs[v] = outer_symbol(j) if j < k else inner_symbol(j - k)
    return Split(body.index_ranges[k:], subs)


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


def _canonical(body: LoopBody, k: int) -> tuple[Split, list[tuple[str, Expr]],
                                                list[tuple[str, Expr]]] | None:
    sp = split_node(body, k)
    if sp is None:
        return None
    reads = [(b, e.xreplace(sp.subs)) for b, e in body.reads()]
    writes = [(b, e.xreplace(sp.subs)) for b, e in body.writes()]
    return sp, reads, writes


def _possible_k(group: FusedGroup, body: LoopBody) -> int | None:
    """The outer-loop count if `body` can share loops with `group`, else None."""
    if body.is_reduction:
        k = len(body.index_ranges)
        if group.has_reduction() and k != group.k:
            return None
        if k > group.k:
            return None
    else:
        if group.has_reduction():
            k = group.k
        else:
            k = 0
            limit = min(len(body.index_ranges), group.k)
            while k < limit and body.index_ranges[k] == group.outer[k]:
                k += 1
    if tuple(body.index_ranges[:k]) != group.outer[:k]:
        return None
    if k == 0:
        if not body.is_reduction and _numel(body.index_ranges) > SMALL_SCALAR_NUMEL:
            return None
        if group.k > 0 and any(_numel(_body(n).index_ranges) > SMALL_SCALAR_NUMEL
                               for n in group.nodes):
            return None
    return k


def _numel(sizes: Iterable[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _legal(group: FusedGroup, node: ComputedBuffer, k: int) -> bool:
    forms = {}
    for m in [*group.nodes, node]:
        c = _canonical(_body(m), k)
        if c is None:
            return False
        forms[m.name] = c
    writers = {m.name: m for m in group.nodes}
    sp_n, reads_n, _ = forms[node.name]
    for buf, idx in reads_n:
        w = writers.get(buf)
        if w is None:
            continue
        sp_w, _, writes_w = forms[w.name]
        store = writes_w[0][1]
        if idx.has(*[s for s in idx.free_symbols if s.name.startswith("tmp")]):
            return False
        if sp_w.inner_ranges:
            if sp_w.inner_ranges != sp_n.inner_ranges or idx != store:
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


def fuse(kernels: Iterable[ComputedBuffer | ExternKernel], enabled: bool = True) -> list[Step]:
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
        best: tuple[int, int, int] | None = None
        if enabled:
            for pos in range(max(first, 0), len(steps)):
                g = steps[pos]
                if not isinstance(g, FusedGroup) or len(g.nodes) >= MAX_GROUP_NODES:
                    continue
                if pos < first:
                    continue
                k = _possible_k(g, body)
                if k is None or not _legal(g, kern, k):
                    continue
                score = _sharing(g, kern)
                if score > 0 and (best is None or score >= best[0]):
                    best = (score, pos, k)
        if best is not None:
            _, pos, k = best
            g = steps[pos]
            assert isinstance(g, FusedGroup)
            g.nodes.append(kern)
            g.outer = g.outer[:k]
            producer_pos[kern.name] = pos
        else:
            k = len(body.index_ranges)
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
            sp = split_node(_body(n), step.k)
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
            if outs & needed:
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
