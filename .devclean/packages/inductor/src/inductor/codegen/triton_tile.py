"""2-D tiled pointwise kernels on the Triton target, for transposes and layout changes.

A flat 1-D kernel walks its output in memory order; an input read through a transpose
(`x.t().contiguous()`, NCHW <-> channels-last, attention's head permutes) is then read
with a stride, one element per cache line. A tiled kernel instead covers a `[YBLOCK,
XBLOCK]` tile of two loop dims: `x`, the innermost (along which the output is contiguous),
and `y`, the dim along which the strided access is contiguous; the other dims are one
index per program. Triton lays each access of the tile out so that it is coalesced, so both
the reads and the writes are. The block sizes are the configuration's `(XBLOCK, RBLOCK)`
(`RBLOCK` is `YBLOCK` here); the grid is one program per tile: `z * ty * tx`.
"""

from __future__ import annotations

import math

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.codegen.triton import TritonGen, TritonKernel, _Lines
from inductor.scheduler.fusion import outer_symbol, split_node

TILE_MIN = 16  # NOTE: both tiled dims at least this long


def _coeff(expr: sympy.Expr, sym: sympy.Symbol) -> int | None:
    """The integer coefficient of `sym` in a linear `expr` (None when not linear in it)."""
    total = 0
    for term in sympy.Add.make_args(expr):
        if sym not in term.free_symbols:
            continue
        c, rest = term.as_coeff_Mul()
        if rest != sym or not c.is_Integer:
            return None
        total += int(c)
    return total


class TiledTritonGen(TritonGen):
    """A pointwise group tiled in two dims (see the module docstring)."""

    def tile_dim(self) -> int | None:
        """The loop dim `y` to tile with the innermost one, or None to stay 1-D."""
        outer = self.group.outer
        k = len(outer)
        if self.reduction or self.rnumel != 1 or k < 2 or outer[-1] < TILE_MIN:
            return None
        last = outer_symbol(k - 1)
        accesses: list[sympy.Expr] = []
        for n in self.group.nodes:
            body = n.body
            assert body is not None
            sp = split_node(body, self.group.outer)
            assert sp is not None
            subs = dict(sp.subs)
            for op in body.ops:
                if op.kind in ("load", "store") and str(op.args[0]) not in self.group.local:
                    accesses.append(self._sub(op.args[1], subs))
        if not any(_coeff(e, last) == 1 for e in accesses):
            return None
        for j in range(k - 2, -1, -1):
            if outer[j] < TILE_MIN:
                continue
            sym = outer_symbol(j)
            for e in accesses:
                c_last = _coeff(e, last)
                if _coeff(e, sym) == 1 and c_last is not None and c_last not in (0, 1):
                    return j
        return None

    def generate(self) -> TritonKernel:
        j = self.tile_dim()
        assert j is not None
        self._tile_j = j
        return super().generate()

    def _prologue(self, w: _Lines) -> None:
        outer = self.group.outer
        k = len(outer)
        j = self._tile_j
        sx, sy = outer[-1], outer[j]
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        w.add(f"pid = {pid}")
        w.add(f"tx = pid % tl.cdiv({sx}, XBLOCK)")
        w.add(f"ty = (pid // tl.cdiv({sx}, XBLOCK)) % tl.cdiv({sy}, RBLOCK)")
        w.add(f"tz = pid // (tl.cdiv({sx}, XBLOCK) * tl.cdiv({sy}, RBLOCK))")
        w.add("xi = tx * XBLOCK + tl.arange(0, XBLOCK)[None, :]")
        w.add("yi = ty * RBLOCK + tl.arange(0, RBLOCK)[:, None]")
        w.add(f"xmask = (xi < {sx}) & (yi < {sy})")
        w.add("xzero = xi * 0 + yi * 0")
        rest = [d for d in range(k - 1) if d != j]
        for d in rest:
            stride = math.prod(outer[e] for e in rest if e > d)
            e = "tz" if stride == 1 else f"(tz // {stride})"
            if d != rest[0]:
                e = f"({e} % {outer[d]})"
            w.add(f"{outer_symbol(d)} = {e}")
        w.add(f"{outer_symbol(j)} = yi")
        w.add(f"{outer_symbol(k - 1)} = xi")
        for d, size in enumerate(outer):
            self._ranges[outer_symbol(d)] = size

    def _configs(self) -> tuple[tuple[int, int, int], ...]:
        if self.interpret:
            return ((32, 32, 4),)
        return ((64, 64, 4), (32, 32, 4), (128, 32, 4), (64, 16, 4))

    def _finish(self, w: _Lines) -> TritonKernel:
        kernel = super()._finish(w)
        outer = self.group.outer
        sz = math.prod(outer) // (outer[-1] * outer[self._tile_j])
        return TritonKernel(
            kernel.name, kernel.source, kernel.params, kernel.checks, kernel.scalar_params,
            kernel.device, kernel.xnumel, kernel.rnumel, False, False, kernel.configs,
            kernel.interpret, kernel.inplace, kernel.seeds,
            tile=(outer[-1], outer[self._tile_j], sz), debug=kernel.debug)
