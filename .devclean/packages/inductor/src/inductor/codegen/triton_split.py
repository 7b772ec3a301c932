"""Split reductions on the Triton target: a reduction of few long rows (a full reduction of
a big tensor: `x.sum()`, a loss's mean; batch-norm statistics over a few hundred channels)
as two kernels in one module.

One program per block of rows would leave the GPU idle. Instead the first kernel
(`KERNEL_NAME`, grid `(split, row blocks)`) has each program reduce one chunk of a block of
rows into a block of accumulators and store its partial results into workspaces
(`[rows, split]` per reduction, allocated by the launcher per call); the second
(`KERNEL_NAME_final`, one program per block of rows) reduces the partials of each row and
runs the reductions' epilogues (the ops after the reduction, row epilogue nodes). Sums stay
as exact as eager's: each element goes into one of `RBLOCK` accumulators of its chunk,
partials are combined as a tree, float32 partials in float64. A variance whose mean is in
the group is Welford's (`codegen/triton_welford.py`): each chunk's mean, M2 and count are
the partials, merged by Chan's formula.

Only groups of one loop segment take this form: reductions (and pointwise nodes over the
row elements) that read no other reduction of the group, followed by nodes over the rows
only. Other two-pass groups (a full softmax) keep one program per block of rows. Split:
rows of `SPLIT_MIN_RNUMEL`+ elements, at most `SPLIT_MAX_ROWS` of them, each at least
`SPLIT_ROW_RATIO` times longer than their count; or columns: up to `COLUMN_MAX_ROWS` rows
whose elements lie far apart while adjacent rows are adjacent (`x.sum(0)` of a `[N, C]`
tensor: a bias or layer-norm weight gradient), which one program per 64 rows would read with
a handful of programs; they split into chunks for about `SPLIT_PROGRAMS` programs. The
partial kernel's candidate blocks are wide in x where the rows' elements are adjacent in
memory (channels-last, columns), long in r else.
"""

from __future__ import annotations

import hashlib
import math

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.codegen.triton import (
    TritonGen,
    TritonKernel,
    _Lines,
    _red_pos,
    _ref_dtype,
    generate_triton,
)
from inductor.codegen.triton_compute import reduce_text
from inductor.codegen.triton_prelude import TL_DTYPE, reduction_init
from inductor.codegen.triton_rules import next_pow2, symbolic_group
from inductor.codegen.triton_tile import TiledTritonGen, _coeff
from inductor.codegen.triton_welford import Prepared, match_welford
from inductor.ir.loop_body import LoopOp
from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.scheduler.fusion import FusedGroup, inner_symbol, outer_symbol, split_node

SPLIT_MIN_RNUMEL = 16384  # NOTE: shorter rows are looped by one program per row block
SPLIT_MAX_ROWS = 256  # NOTE: more rows keep the GPU busy without splitting them
SPLIT_ROW_RATIO = 64  # NOTE: split only rows at least this many times longer than their count
SPLIT_CHUNK = 4096  # NOTE: elements of a row one program reduces, at least (partials <= 1024)
MAX_SPLIT = 1024
COLUMN_MIN_RNUMEL = 256  # NOTE: column reductions: shorter columns are not worth a 2nd kernel
COLUMN_MAX_ROWS = 8192  # NOTE: more columns fill the GPU with one program per 64 of them
COLUMN_MIN_ELEMENTS = 1 << 18  # NOTE: smaller ones take about a launch either way
SPLIT_PROGRAMS = 512  # NOTE: programs a split launches on a GPU (about 4 per SM)
SPLIT_MIN_WORK = 4096  # NOTE: elements one program reduces on a GPU, at least (all rows)


def split_chunk(rnumel: int, rblock: int) -> int:
    """Elements of a row one program reduces: a multiple of `rblock`, at least
    `SPLIT_CHUNK`, and few enough programs that a row's partials fit one block."""
    want = max(SPLIT_CHUNK, -(-rnumel // MAX_SPLIT))
    return -(-want // rblock) * rblock


def gpu_chunk(rnumel: int, xnumel: int, xblock: int, rblock: int) -> int:
    """Elements of a row one program reduces on a GPU: enough chunks that about
    `SPLIT_PROGRAMS` programs run over the `xnumel / xblock` blocks of rows, each reducing
    at least `SPLIT_MIN_WORK` elements (two chunks a row, at least) and at most
    `MAX_SPLIT` chunks a row; a multiple of `rblock`. (128 channels of 32x28x28
    channels-last in blocks of 64 rows: 196 chunks of 128, where chunks of 4096 gave 14
    programs.)"""
    blocks = -(-xnumel // xblock)
    split = min(max(2, -(-SPLIT_PROGRAMS // blocks)), MAX_SPLIT)
    want = max(-(-rnumel // split), -(-SPLIT_MIN_WORK // xblock), -(-rnumel // MAX_SPLIT))
    want = min(want, -(-rnumel // 2))
    return -(-want // rblock) * rblock


def column_chunk(rnumel: int, xnumel: int, rblock: int) -> int:
    """Elements of a column one program reduces in a column split: `gpu_chunk` for blocks
    of 64 columns (the interpreter's column splits take the same chunks)."""
    return gpu_chunk(rnumel, xnumel, 64, rblock)


class SplitTritonGen(TritonGen):
    """The two kernels of a split reduction (see the module docstring)."""

    def splittable(self) -> bool:
        """Whether this group takes the split form: few long rows, or columns (see
        `_columns`); one loop segment (a variance joins its mean's segment through
        Welford)."""
        if not self.reduction or any(e != self.rnumel for e in self.extents.values()):
            return False  # NOTE: a node over fewer row elements needs `_enter`'s mask
        self._ranges = {}
        self.columns = False
        if (self.rnumel < SPLIT_MIN_RNUMEL or self.xnumel > SPLIT_MAX_ROWS
                or self.xnumel * SPLIT_ROW_RATIO > self.rnumel):
            self.columns = self._columns()
            if not self.columns:
                return False
        prepared = [(ni, n, *self._node_subs(ni, n)) for ni, n in enumerate(self.group.nodes)]
        self._welford = match_welford(prepared, self._sub)
        reductions: set[str] = set()
        seen_x_node = False
        for ni, n, _, inner in prepared:
            assert n.body is not None
            reads = {b for b, _ in n.body.reads()}
            if ni in self._welford:
                reads.discard(self._welford[ni].mean_of)
            if not inner:
                seen_x_node = True
                continue
            if seen_x_node or reads & reductions:
                return False
            if n.body.is_reduction:
                reductions.add(n.name)
        return bool(reductions)

    def generate(self) -> TritonKernel:
        self._ranges = {}
        self._indirect_levels: dict[str, str] = {}
        self._stored_in_loop: set[str] = set()
        prepared = [(ni, n, *self._node_subs(ni, n)) for ni, n in enumerate(self.group.nodes)]
        self._welford = match_welford(prepared, self._sub)
        self.split_configs = self._split_configs()
        xb = max(xb for xb, _, _ in self.split_configs)
        rb = max(rb for _, rb, _ in self.split_configs)
        if not self.interpret:
            self.chunk = gpu_chunk(self.rnumel, self.xnumel, xb, rb)
        else:  # NOTE: the interpreter runs programs one by one: few long chunks
            self.chunk = (column_chunk(self.rnumel, self.xnumel, rb) if self.columns
                          else split_chunk(self.rnumel, rb))
        self.split = -(-self.rnumel // self.chunk)
        self.workspaces: list[tuple[str, torch.dtype]] = []
        w = _Lines()
        self._rows_prologue(w, "tl.program_id(1)")
        loop = [p for p in prepared if p[3]]
        rest = [p for p in prepared if not p[3]]
        accs = self._partial(w, loop)
        final = _Lines()
        self._rows_prologue(final, "tl.program_id(0)")
        self._final(final, accs, loop, rest)
        return self._finish_split(w, final)

    def _split_configs(self) -> tuple[tuple[int, int, int], ...]:
        """(XBLOCK, RBLOCK, warps) of the partial kernel: wide in x when the rows' elements
        sit next to each other (channels-last batch norm), long in r otherwise."""
        rows = next_pow2(self.xnumel)
        if self.interpret:
            xb = min(rows, 16)
            return ((xb, max(16, 1024 // xb), 4),)
        if self._row_loads()[0] and rows >= 16:
            cands = [(64, 32, 4), (32, 64, 4), (16, 128, 4)]
        else:
            cands = [(1, 2048, 8), (2, 1024, 4), (4, 512, 4), (8, 256, 4)]
        return tuple(dict.fromkeys((min(x, rows), r, wp) for x, r, wp in cands))

    def _row_loads(self) -> tuple[bool, bool]:
        """(whether a load reads rows' elements with adjacent rows adjacent in memory,
        whether every load that reads rows' elements does, or does not depend on the row)."""
        some = every = False
        if self.group.outer:
            every = True
            last = outer_symbol(len(self.group.outer) - 1)
            for m in self.group.nodes:
                assert m.body is not None
                for op in m.body.ops:
                    if op.kind != "load":
                        continue
                    e = self._load_index(m, op)
                    inner = {inner_symbol(j) for j in range(len(e.free_symbols))}
                    if not e.free_symbols & inner:
                        continue
                    outer = {outer_symbol(j) for j in range(len(self.group.outer))}
                    if _coeff(e, last) == 1:
                        some = True
                    elif e.free_symbols & outer:
                        every = False
        return some, some and every

    def _columns(self) -> bool:
        """A column reduction: rows whose elements lie a row's length apart while adjacent
        rows are adjacent (a bias gradient, layer norm's weight gradient: `[N, C] -> [C]`),
        too few row blocks to fill the GPU. Each program then reduces a chunk of a block
        of columns, the loads stay coalesced across the block, and the final kernel adds
        the chunks' partials."""
        if (self.xnumel < 16 or self.rnumel < COLUMN_MIN_RNUMEL
                or self.xnumel > COLUMN_MAX_ROWS
                or self.xnumel * self.rnumel < COLUMN_MIN_ELEMENTS):
            return False
        return self._row_loads()[1]

    def _load_index(self, n: ComputedBuffer, op: LoopOp) -> sympy.Expr:
        sp = split_node(n.body, self.group.outer) if n.body is not None else None
        assert sp is not None
        return self._sub(op.args[1], dict(sp.subs))

    def _rows_prologue(self, w: _Lines, pid: str) -> None:
        if self.int64:
            pid = f"{pid}.to(tl.int64)"
        w.add(f"xidx = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        w.add(f"xmask = xidx < {self.xnumel}")
        w.add("xzero = xidx * 0")
        w.add("rzero = tl.zeros([1, RBLOCK], tl.int32)")
        outer = self.group.outer
        for j, size in enumerate(outer):
            stride = math.prod(outer[j + 1:])
            e = "xidx" if stride == 1 else f"(xidx // {stride})"
            if j > 0:
                e = f"({e} % {size})"
            w.add(f"{outer_symbol(j)} = {e}")
            self._ranges[outer_symbol(j)] = size

    def _partial(self, w: _Lines, loop: list[Prepared]) -> list[tuple[int, str, torch.dtype]]:
        accs: list[tuple[int, str, torch.dtype]] = []
        for ni, n, _, _ in loop:
            assert n.body is not None
            red = _red_pos(n.body)
            if red is None:
                continue
            op = n.body.ops[red]
            kind = str(op.args[0])
            vt = _ref_dtype(op.args[1])
            acc = f"n{ni}_acc"
            if ni in self._welford:
                kind = "welford"
                for part in ("m", "2", "n"):
                    w.add(f"{acc}_{part} = tl.zeros([XBLOCK, RBLOCK], {TL_DTYPE[vt]})")
                accs.append((ni, kind, vt))
                continue
            w.add(f"{acc} = tl.full([XBLOCK, RBLOCK], {reduction_init(kind, vt)}, "
                  f"{TL_DTYPE[vt]})")
            if kind in ("argmax", "argmin"):
                w.add(f"{acc}_i = tl.full([XBLOCK, RBLOCK], {2**62}, tl.int64)")
            accs.append((ni, kind, vt))
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        w.add(f"rstart = {pid} * {self.chunk}")
        w.add(f"for roffset in range(0, {self.chunk}, RBLOCK):")
        w.level += 1
        self._loads.clear()
        w.add("ridx = rstart + roffset + tl.arange(0, RBLOCK)[None, :]")
        w.add(f"rmask = ridx < {self.rnumel}")
        self._inner_decomposition(w)
        for ni, n, subs, _ in loop:
            body = n.body
            assert body is not None
            refs: dict[int, tuple[str, str]] = {}
            red = _red_pos(body)
            if ni in self._welford:
                self._welford_step(w, ni, n, subs, refs)
                continue
            self._emit_ops(w, ni, n, range(len(body.ops) if red is None else red), subs,
                           refs, "r")
            if red is not None:
                self._accumulate(w, ni, body.ops[red], refs)
        w.level -= 1
        self._loads.clear()
        for _, n, _, _ in loop:
            self.values.pop(n.name, None)  # NOTE: the final kernel sees only the partials
        for ni, kind, vt in accs:
            acc = f"n{ni}_acc"
            at = f"xidx * {self.split} + tl.program_id(0)"
            ws = "" if kind == "welford" else \
                self._workspace(ni, vt if kind not in ("any", "all") else torch.int32)
            if kind == "welford":
                w.add(f"{acc}_pm, {acc}_p2, {acc}_pn = tl.reduce(({acc}_m, {acc}_2, "
                      f"{acc}_n), 1, _welford)")
                for part in ("m", "2", "n"):
                    wsp = self._workspace(ni, vt, part)
                    w.add(f"tl.store({wsp} + {at}, {acc}_p{part}[:, None], mask=xmask)")
            elif kind in ("argmax", "argmin"):
                wsi = self._workspace(ni, torch.int64, "i")
                w.add(f"{acc}_v, {acc}_r = tl.reduce(({acc}, {acc}_i), 1, _{kind})")
                w.add(f"tl.store({ws} + {at}, {acc}_v[:, None], mask=xmask)")
                w.add(f"tl.store({wsi} + {at}, {acc}_r[:, None], mask=xmask)")
            else:
                part = reduce_text(kind, acc)
                if kind in ("any", "all"):
                    part = f"({part}).to(tl.int32)"
                w.add(f"tl.store({ws} + {at}, {part}[:, None], mask=xmask)")
        return accs

    def _accumulate(self, w: _Lines, ni: int, op: LoopOp, refs: dict[int, tuple[str, str]]
                    ) -> None:
        kind = str(op.args[0])
        v, vlevel = self._ref(refs, op.args[1])
        full = f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])" if vlevel != "r" else v
        acc = f"n{ni}_acc"
        if kind in ("argmax", "argmin"):
            i, _ = self._ref(refs, op.args[2])
            idx = f"tl.broadcast_to({i}, [XBLOCK, RBLOCK])"
            w.add(f"{acc}_nv, {acc}_ni = _{kind}({acc}, {acc}_i, {full}, {idx})")
            w.add(f"{acc} = tl.where(xmask & rmask, {acc}_nv, {acc})")
            w.add(f"{acc}_i = tl.where(xmask & rmask, {acc}_ni, {acc}_i)")
            return
        comb = {"sum": f"{acc} + {full}", "prod": f"{acc} * {full}",
                "max": f"_maximum({acc}, {full})", "min": f"_minimum({acc}, {full})",
                "any": f"{acc} | ({full} != 0)", "all": f"{acc} & ({full} != 0)"}[kind]
        w.add(f"{acc} = tl.where(xmask & rmask, {comb}, {acc})")

    def _workspace(self, ni: int, dtype: torch.dtype, suffix: str = "") -> str:
        name = f"ws_n{ni}{suffix}"
        if (name, dtype) not in self.workspaces:
            self.workspaces.append((name, dtype))
        return name

    def _final(self, w: _Lines, accs: list[tuple[int, str, torch.dtype]],
               loop: list[Prepared], rest: list[Prepared]) -> None:
        w.add("ridx = tl.arange(0, RBLOCK)[None, :]")
        w.add(f"rmask = ridx < {self.split}")
        at = f"xidx * {self.split} + ridx"
        subs_of = {ni: subs for ni, _, subs, _ in loop}
        for ni, kind, vt in accs:
            n = self.group.nodes[ni]
            body = n.body
            assert body is not None
            red = _red_pos(body)
            assert red is not None
            var = f"n{ni}_t{red}"
            ws = f"ws_n{ni}"
            if kind == "welford":
                loads = ", ".join(f"tl.load({ws}{p} + {at}, mask=xmask & rmask, other=0)"
                                  for p in ("m", "2", "n"))
                w.add(f"{var}_m, {var}, {var}_n = tl.reduce(({loads}), 1, _welford)")
                w.add(f"{var} = {var}[:, None]")
                refs = {red: (var, "x")}
                self._emit_ops(w, ni, n, range(red + 1, len(body.ops)), subs_of[ni], refs,
                               "x")
                continue
            init = reduction_init(kind, vt)
            part = f"tl.load({ws} + {at}, mask=xmask & rmask, other={init})"
            if kind in ("argmax", "argmin"):
                w.add(f"{var}_p = {part}")
                w.add(f"{var}_pi = tl.load({ws}i + {at}, mask=xmask & rmask, other={2**62})")
                w.add(f"{var}_v, {var} = tl.reduce(({var}_p, {var}_pi), 1, _{kind})")
                w.add(f"{var} = {var}[:, None]")
            else:
                if kind in ("any", "all"):
                    red_fn = "tl.max" if kind == "any" else "tl.min"
                    reduced = f"({red_fn}({part}, 1) != 0)"
                elif kind == "sum" and vt == torch.float32:
                    # NOTE: the partials add up in float64, rounded once (as exact as
                    # CUDA's own full sums, which round about as well as can be)
                    masked = f"tl.where(xmask & rmask, {part}.to(tl.float64), 0.0)"
                    reduced = f"tl.sum({masked}, 1).to(tl.float32)"
                else:
                    masked = f"tl.where(xmask & rmask, {part}, {init})"
                    reduced = reduce_text(kind, masked)
                w.add(f"{var} = {reduced}[:, None]")
            refs = {red: (var, "x")}
            self._emit_ops(w, ni, n, range(red + 1, len(body.ops)), subs_of[ni], refs, "x")
        for ni, n, subs, _ in rest:
            assert n.body is not None
            self._emit_ops(w, ni, n, range(len(n.body.ops)), subs, {}, "x")

    def _finish_split(self, w: _Lines, final: _Lines) -> TritonKernel:
        kernel = self._finish(w)
        ws_args = "".join(f"{name}, " for name, _ in self.workspaces)
        src = kernel.source.replace("XBLOCK: tl.constexpr, RBLOCK", ws_args + "XBLOCK: "
                                    "tl.constexpr, RBLOCK", 1)
        lines = src.splitlines()
        sig = next(i for i, line in enumerate(lines) if line.startswith(f"def {kernel.name}("))
        final_head = [lines[sig - 1], lines[sig].replace(f"def {kernel.name}(",
                                                          f"def {kernel.name}_final(")]
        src = "\n".join([*lines, "", "", *final_head, *final.lines]) + "\n"
        # NOTE: the name hashes both functions (the final one holds the epilogues)
        name = "triton_" + hashlib.sha256(src.replace(kernel.name, "KERNEL_NAME").encode()
                                          ).hexdigest()[:16]
        return TritonKernel(
            name, src.replace(kernel.name, name), kernel.params, kernel.checks,
            kernel.scalar_params, kernel.device, kernel.xnumel, kernel.rnumel, True, False,
            self.split_configs,
            kernel.interpret, kernel.inplace, kernel.seeds, split=self.split, debug=kernel.debug,
            workspaces=tuple(str(dt).removeprefix("torch.") for _, dt in self.workspaces))


def generate_triton_kernel(group: FusedGroup, buffers: dict[str, Buffer], *,
                           interpret: bool) -> TritonKernel:
    """The Triton kernel of `group`: a split reduction where `splittable`, a 2-D tiled
    pointwise kernel where an access is transposed (`codegen/triton_tile.py`), else the one
    kernel of `codegen/triton.py`."""
    if symbolic_group(group, buffers):
        # NOTE: sizes as arguments: one kernel of `codegen/triton.py` for every size
        return generate_triton(group, buffers, interpret=interpret)
    gen = SplitTritonGen(group, buffers, interpret)
    if gen.splittable():
        split = gen.generate()
        if split.split > 1:  # NOTE: rows no longer than one block take one chunk: not split
            return split
    tiled = TiledTritonGen(group, buffers, interpret)
    if tiled.tile_dim() is not None:
        return tiled.generate()
    return generate_triton(group, buffers, interpret=interpret)
