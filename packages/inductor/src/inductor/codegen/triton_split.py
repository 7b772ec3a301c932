"""Split reductions on the Triton target: a reduction of a few very long rows (a full
reduction of a big tensor: `x.sum()`, a loss's mean) as two kernels in one module.

One program per row would leave the GPU idle. Instead the first kernel (`KERNEL_NAME`) runs
`split` programs, each reducing one chunk of every row into a block of accumulators and
storing its partial result into a workspace (`[rows, split]` per reduction, allocated by
the launcher per call); the second (`KERNEL_NAME_final`) reduces the partials of each row
in one block and runs the reductions' epilogues (the ops after the reduction, row
epilogue nodes). Sums stay as exact as eager's blocked accumulation: each element goes into
one of `RBLOCK` accumulators of its chunk, then partials are combined as a tree.

Only groups of one loop segment take this form: reductions (and pointwise nodes over the
row elements) that read no reduction of the group, followed by nodes over the rows only.
Two-pass groups (a variance over the whole tensor, a full softmax) keep one program per
row.
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
    _next_pow2,
    _red_pos,
    _ref_dtype,
    generate_triton,
)
from inductor.codegen.triton_prelude import TL_DTYPE, reduction_init
from inductor.codegen.triton_tile import TiledTritonGen
from inductor.ir.loop_body import LoopOp
from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.scheduler.fusion import FusedGroup, outer_symbol, split_node

SPLIT_MIN_RNUMEL = 32768  # NOTE: shorter rows are looped by one program per row
SPLIT_MAX_ROWS = 16
SPLIT_CHUNK = 4096  # NOTE: elements one program reduces, about (partials <= 1024)

Prepared = tuple[int, ComputedBuffer, dict[sympy.Symbol, sympy.Expr], tuple[int, ...]]


def split_count(rnumel: int) -> int:
    """How many programs share a row of `rnumel` elements (a power of two, 2..1024)."""
    return max(2, min(1024, _next_pow2(-(-rnumel // SPLIT_CHUNK))))


class SplitTritonGen(TritonGen):
    """The two kernels of a split reduction (see the module docstring)."""

    def splittable(self) -> bool:
        """Whether this group takes the split form."""
        if (not self.reduction or self.rnumel < SPLIT_MIN_RNUMEL
                or self.xnumel > SPLIT_MAX_ROWS):
            return False
        reductions: set[str] = set()
        seen_x_node = False
        for n in self.group.nodes:
            assert n.body is not None
            reads = {b for b, _ in n.body.reads()}
            sp = split_node(n.body, self.group.outer)
            assert sp is not None
            if not sp.inner_ranges:
                seen_x_node = True
                continue
            if seen_x_node or reads & reductions:
                return False
            if n.body.is_reduction:
                reductions.add(n.name)
        return bool(reductions)

    def generate(self) -> TritonKernel:
        self._ranges: dict[sympy.Symbol, int] = {}
        self._indirect_levels: dict[str, str] = {}
        self._stored_in_loop: set[str] = set()
        prepared = [(ni, n, *self._node_subs(ni, n)) for ni, n in enumerate(self.group.nodes)]
        self.split = split_count(self.rnumel)
        rows = _next_pow2(self.xnumel)
        self.rblock = max(16, min(1024, 2048 // rows))
        per = -(-self.rnumel // self.split)
        self.chunk = -(-per // self.rblock) * self.rblock
        self.workspaces: list[tuple[str, torch.dtype]] = []
        w = _Lines()
        self._rows_prologue(w)
        loop = [p for p in prepared if p[3]]
        rest = [p for p in prepared if not p[3]]
        accs = self._partial(w, loop)
        final = _Lines()
        self._rows_prologue(final)
        self._final(final, accs, loop, rest)
        return self._finish_split(w, final)

    def _rows_prologue(self, w: _Lines) -> None:
        w.add("xidx = tl.arange(0, XBLOCK)[:, None]")
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
            ws = self._workspace(ni, vt if kind not in ("any", "all") else torch.int32)
            at = f"xidx * {self.split} + tl.program_id(0)"
            if kind in ("argmax", "argmin"):
                wsi = self._workspace(ni, torch.int64, "i")
                w.add(f"{acc}_v, {acc}_r = tl.reduce(({acc}, {acc}_i), 1, _{kind})")
                w.add(f"tl.store({ws} + {at}, {acc}_v[:, None], mask=xmask)")
                w.add(f"tl.store({wsi} + {at}, {acc}_r[:, None], mask=xmask)")
            else:
                part = self._reduce(kind, acc, vt)
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
                    reduced = self._reduce(kind, masked, vt)
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
            ((_next_pow2(self.xnumel), self.rblock, 8 if self.rblock >= 1024 else 4),),
            kernel.interpret, kernel.inplace, kernel.seeds, split=self.split,
            workspaces=tuple(str(dt).removeprefix("torch.") for _, dt in self.workspaces))


def generate_triton_kernel(group: FusedGroup, buffers: dict[str, Buffer], *,
                           interpret: bool) -> TritonKernel:
    """The Triton kernel of `group`: a split reduction where `splittable`, a 2-D tiled
    pointwise kernel where an access is transposed (`codegen/triton_tile.py`), else the one
    kernel of `codegen/triton.py`."""
    gen = SplitTritonGen(group, buffers, interpret)
    if gen.splittable():
        return gen.generate()
    tiled = TiledTritonGen(group, buffers, interpret)
    if tiled.tile_dim() is not None:
        return tiled.generate()
    return generate_triton(group, buffers, interpret=interpret)
