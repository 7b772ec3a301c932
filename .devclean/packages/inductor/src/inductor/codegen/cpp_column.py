"""Column reductions on the C++ target: a reduction along a strided dim whose last outer dim
is contiguous is vectorized across that outer dim (64 outputs per block, one accumulator
each), instead of reducing each output's strided row alone."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.codegen.cascade import column_cascade, column_step, column_total
from inductor.codegen.cpp_syntax import SIMD_REDUCTION, Writer, ctype, reduction_init
from inductor.ir.loop_body import LoopOp
from inductor.ir.nodes import ComputedBuffer
from inductor.ir.ops import Ref
from inductor.scheduler.fusion import inner_symbol, outer_symbol, split_node
from inductor.scheduler.fusion import substitute as _sub
from inductor.symbols import size_hint

if TYPE_CHECKING:
    from collections.abc import Sequence

    from inductor.codegen.cpp import KernelGen


def hint_prod(sizes: Sequence[object]) -> int:
    """The product of the sizes' hints (the example's values; for heuristics only)."""
    return math.prod(size_hint(s) for s in sizes)


def column_ok(gen: KernelGen) -> bool:
    """Whether every node of the group reduces along a strided dim with unit stride across
    its last outer dim (a column reduction: vectorized across that dim)."""
    g = gen.group
    if g.k == 0 or size_hint(g.outer[-1]) < 8 or not gen.simd:
        return False
    writes = g.writes()
    reduce_ranges = None
    last_x = outer_symbol(g.k - 1)
    contiguous_x = False
    written: set[str] = set()
    for n in g.nodes:
        body = n.body
        assert body is not None
        red = next((op for op in body.ops if op.kind == "reduction"), None)
        if red is None or str(red.args[0]) not in SIMD_REDUCTION:
            return False
        sp = split_node(body, g.outer)
        assert sp is not None
        if reduce_ranges is None:
            reduce_ranges = sp.inner_ranges
        if sp.inner_ranges != reduce_ranges or not sp.inner_ranges:
            return False
        last_p = inner_symbol(len(sp.inner_ranges) - 1)
        for buf, idx in body.reads():
            e = _sub(idx, sp.subs)
            if buf in written and buf not in gen.locals and not _reads_inner(e):
                continue  # NOTE: an earlier node's per-column result (`_stages`)
            if buf in writes or buf in gen.locals:
                return False
            if any(str(sym).startswith("tmp") for sym in e.free_symbols):
                return False
            if e.coeff(last_p) == 1 and e.coeff(last_x) != 0:
                return False
            if e.coeff(last_x) == 1:
                contiguous_x = True
        written.add(n.name)
    return contiguous_x


def _reads_inner(index: sympy.Expr) -> bool:
    return any(str(sym).startswith("p") for sym in index.free_symbols)


def _stages(nodes: Sequence[ComputedBuffer]) -> list[list[int]]:
    """Positions of `nodes` in stages: a node reading the result of a node of the current
    stage (a variance reading its mean) starts the next one, whose loops run after that
    stage's results of the block are written."""
    stages: list[list[int]] = [[]]
    current: set[str] = set()
    for i, n in enumerate(nodes):
        assert n.body is not None
        if any(buf in current for buf, _ in n.body.reads()):
            stages.append([])
            current = set()
        stages[-1].append(i)
        current.add(n.name)
    return stages

def emit_column(gen: KernelGen, w: Writer) -> None:
    """The loops of a column reduction: blocks of 64 outer elements, one accumulator each."""
    g = gen.group
    k = g.k
    n_last = g.outer[-1]
    block = 64
    sp0 = split_node(g.nodes[0].body, g.outer)  # type: ignore[arg-type]
    assert sp0 is not None
    # NOTE: decisions that need a number read the example's sizes (`size_hint`)
    parallel = gen.wants_parallel(math.prod((*g.outer, *sp0.inner_ranges)))
    lead = hint_prod(g.outer[:-1])
    for j, size in enumerate(g.outer[:-1]):
        if j == 0 and parallel and lead >= 2:
            w.line("#pragma omp parallel for" + (f" collapse({k - 1})" if k > 2 else "")
                   + gen.par_if)
        sym = outer_symbol(j)
        w.open(f"for (int64_t {sym} = 0; {sym} < {size}; ++{sym})")
    if parallel and lead < 2:
        w.line("#pragma omp parallel for" + gen.par_if)
    w.open(f"for (int64_t xb = 0; xb < {n_last}; xb += {block})")
    w.line(f"const int64_t xe = std::min<int64_t>(xb + {block}, {n_last});")
    stages = _stages(g.nodes)
    for stage in stages:
        if len(stages) > 1:
            w.open(f"// stage of {', '.join(g.nodes[i].name for i in stage)}")
        _emit_stage(gen, w, stage, sp0.inner_ranges, block)
        if len(stages) > 1:
            w.close()
    w.close()
    for _ in g.outer[:-1]:
        w.close()


def _emit_stage(gen: KernelGen, w: Writer, stage: Sequence[int], inner: Sequence[int],
                block: int) -> None:
    """One block of the column reductions of the group's nodes at positions `stage`."""
    g = gen.group
    x = outer_symbol(g.k - 1)
    reds: list[tuple[ComputedBuffer, int, LoopOp, dict[sympy.Symbol, sympy.Expr]]] = []
    for i, n in enumerate(g.nodes[j] for j in stage):
        body = n.body
        assert body is not None
        sp = split_node(body, g.outer)
        assert sp is not None
        pos = next(j for j, op in enumerate(body.ops) if op.kind == "reduction")
        red = body.ops[pos]
        vref = red.args[1]
        assert isinstance(vref, Ref)
        kind = str(red.args[0])
        w.line(f"{ctype(vref.dtype)} acc{i}[{block}];")
        w.line(f"for (int64_t j = 0; j < {block}; ++j) acc{i}[j] = {reduction_init(kind, vref.dtype)};")
        if kind in ("max", "min") and vref.dtype.is_floating_point:
            w.line(f"int nan{i}[{block}] = {{0}};")
        reds.append((n, pos, red, sp.subs))
    cascaded = column_cascade(w, reds, inner, block, ctype)
    for j, size in enumerate(inner):
        sym = inner_symbol(j)
        w.open(f"for (int64_t {sym} = 0; {sym} < {size}; ++{sym})")
    w.line("#pragma omp simd")
    w.open(f"for (int64_t {x} = xb; {x} < xe; ++{x})")
    for i, (n, pos, red, subs) in enumerate(reds):
        assert n.body is not None
        w.open(f"// {n.name}")
        gen.emit_ops(w, n.body.ops[:pos], 0, subs)
        v = red.args[1]
        kind = str(red.args[0])
        acc = f"acc{i}[{x} - xb]"
        if kind in ("sum", "prod"):
            w.line(f"{acc} = {acc} {'+' if kind == 'sum' else '*'} {v};")
        elif kind in ("any", "all"):
            w.line(f"{acc} = {acc} {'||' if kind == 'any' else '&&'} {v};")
        else:
            cmp = ">" if kind == "max" else "<"
            w.line(f"{acc} = {acc} {cmp} {v} ? {acc} : {v};")
            assert isinstance(v, Ref)
            if v.dtype.is_floating_point:
                w.line(f"nan{i}[{x} - xb] |= ({v} != {v});")
        w.close()
    w.close()
    column_step(w, cascaded, inner)
    for _ in inner:
        w.close()
    column_total(w, cascaded)
    w.open(f"for (int64_t {x} = xb; {x} < xe; ++{x})")
    for i, (n, pos, red, subs) in enumerate(reds):
        assert n.body is not None and red.dtype is not None
        w.open(f"// {n.name}")
        v = red.args[1]
        assert isinstance(v, Ref)
        if str(red.args[0]) in ("max", "min") and v.dtype.is_floating_point:
            w.line(f"if (nan{i}[{x} - xb]) acc{i}[{x} - xb] = "
                   f"std::numeric_limits<{ctype(v.dtype)}>::quiet_NaN();")
        w.line(f"{ctype(red.dtype)} tmp{pos} = acc{i}[{x} - xb];")
        gen.reemit_needed(w, n.body.ops, pos, subs, set())
        gen.emit_ops(w, n.body.ops[pos + 1:], pos + 1, subs)
        w.close()
    w.close()
