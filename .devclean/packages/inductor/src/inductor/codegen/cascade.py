"""Cascade summation for long floating sums (as exact as ATen's `cascade_sum`).

A float sum that adds every element into one accumulator (or one vector of them) loses
about `n / lanes` roundings' worth of accuracy; ATen keeps four levels of accumulators,
each taking the level below's sums every `2^p` steps, `p = max(4, ceil(log2 n) / 4)`. The
loops emitted here do the same: 64 accumulators ("lanes", several vector registers, which
also hides the add latency) per level when the innermost reduction loop is long, one per
level when it is short (each pass of the innermost loop adds one partial). A parallel full reduction gives each of a fixed number of
parts its own cascade and adds the parts pairwise, so the result depends on the thread
count option only, never on scheduling.

In: the reduction's inner loop ranges and a callback emitting the loop body for a given
accumulator. Out: C++ loops ending with `acc` holding the sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from inductor.ir.loop_body import LoopOp
from inductor.ir.ops import Ref
from inductor.scheduler.fusion import inner_symbol
from inductor.sizevars import is_static

LANES = 64
# NOTE: reductions over at most this many elements keep their one-pass loops (rows a
# row cache may keep, softmax rows): the cascade pays off on long sums only.
CASCADE_MIN = 4096


class Writer(Protocol):
    def line(self, text: str) -> None: ...
    def open(self, text: str) -> None: ...
    def close(self) -> None: ...


def cascade_mode(inner: Sequence[int]) -> str | None:
    """"lanes" or "rows" for a float sum over `inner` ranges, else None (short).

    NOTE: a long sum along a strided dim gets lanes too (ATen splits such a row over four
    interleaved accumulators); a short one keeps its in-order loop, equal to ATen's."""
    if not inner or not all(is_static(s) for s in inner) or math.prod(inner) <= CASCADE_MIN:
        # NOTE: a symbolic size keeps the plain (simd) loop: a cascade's blocks and tail
        # are laid out for a known size.
        return None
    return "lanes" if inner[-1] >= LANES else "rows"


def level_power(count: int) -> int:
    """ATen's cascade step: 2^p adds per level for `count` adds into one accumulator."""
    return max(4, math.ceil(math.log2(max(count, 1))) // 4)


def emit_cascade(w: Writer, *, mode: str, inner: Sequence[int], ctype: str,
                 body: Callable[[str], None], simd: bool, parts: int) -> None:
    """Loops over `inner` adding each element (through `body(target)`, which emits the
    element's ops and `target = target + value;`) into a cascade; ends with `acc`, declared
    by the caller, set to the sum. `parts > 1`: split across OpenMP threads."""
    total = math.prod(inner)
    width = LANES if mode == "lanes" else 1
    steps = total // inner[-1] if mode == "rows" else total // LANES
    parts = max(1, min(parts, inner[0] if len(inner) > 1 else inner[0] // LANES))
    lp = level_power(max(1, steps // parts))
    if parts > 1:
        w.line(f"{ctype} casc_part[{parts}];")
        w.line("#pragma omp parallel for")
        w.open(f"for (int64_t q = 0; q < {parts}; ++q)")
    w.line(f"{ctype} casc[4][{width}];")
    w.line("ind_casc_init(casc);")
    w.line("int64_t casc_n = 0;")
    _loops(w, mode, inner, ctype, body, simd, lp, parts)
    if parts > 1:
        w.line("casc_part[q] = ind_casc_total(casc);")
        w.close()
        w.line(f"acc = ind_pairwise_sum(casc_part, {parts});")
    else:
        w.line("acc = ind_casc_total(casc);")


def _range(j: int, size: int, parts: int, unit: int = 1) -> tuple[str, str]:
    """Bounds of loop `j` (in units of `unit` elements): the whole range, or part `q` of
    the outermost loop when split across threads."""
    if j > 0 or parts == 1:
        return "0", str(size // unit)
    n = size // unit
    return f"q * {n}LL / {parts}", f"(q + 1) * {n}LL / {parts}"


def _loops(w: Writer, mode: str, inner: Sequence[int], ctype: str,
           body: Callable[[str], None], simd: bool, lp: int, parts: int) -> None:
    last = len(inner) - 1
    for j, size in enumerate(inner[:-1]):
        sym = inner_symbol(j)
        lo, hi = _range(j, size, parts)
        w.open(f"for (int64_t {sym} = {lo}; {sym} < {hi}; ++{sym})")
    sym = inner_symbol(last)
    size = inner[last]
    if mode == "rows":
        lo, hi = _range(last, size, parts)
        w.line(f"{ctype} casc_row = 0;")
        if simd:
            w.line("#pragma omp simd reduction(+:casc_row)")
        w.open(f"for (int64_t {sym} = {lo}; {sym} < {hi}; ++{sym})")
        body("casc_row")
        w.close()
        w.line("casc[0][0] = casc[0][0] + casc_row;")
        w.line(f"ind_casc_step(casc, ++casc_n, {lp});")
    else:
        blocks = size // LANES
        lo, hi = _range(last, size, parts, LANES)
        w.open(f"for (int64_t {sym}b = {lo}; {sym}b < {hi}; ++{sym}b)")
        if simd:
            w.line("#pragma omp simd")
        w.open(f"for (int64_t {sym}j = 0; {sym}j < {LANES}; ++{sym}j)")
        w.line(f"const int64_t {sym} = {LANES} * {sym}b + {sym}j;")
        body(f"casc[0][{sym}j]")
        w.close()
        w.line(f"ind_casc_step(casc, ++casc_n, {lp});")
        w.close()
        tail = blocks * LANES
        if tail < size:
            cond = "" if parts == 1 or last > 0 else f"if (q == {parts} - 1) "
            if simd and not cond:
                w.line("#pragma omp simd")
            w.open(f"{cond}for (int64_t {sym} = {tail}; {sym} < {size}; ++{sym})")
            body(f"casc[0][{sym} - {tail}]")
            w.close()
    for _ in inner[:-1]:
        w.close()


def column_cascade(w: Writer, reds: Sequence[tuple[object, int, LoopOp, object]],
                   inner: Sequence[int], block: int,
                   ctype: Callable[[torch.dtype], str]) -> list[int]:
    """Column reductions (each of `block` outer points sums along the reduction loops):
    declares upper cascade levels for each long float sum of `reds`; returns their
    positions (the level-0 accumulators `acc<i>` stay the caller's)."""
    if not all(is_static(s) for s in inner) or math.prod(inner) <= CASCADE_MIN:
        return []
    out: list[int] = []
    for i, (_, _, red, _) in enumerate(reds):
        v = red.args[1]
        if str(red.args[0]) == "sum" and isinstance(v, Ref) and v.dtype.is_floating_point:
            w.line(f"{ctype(v.dtype)} acc{i}_up[3][{block}];")
            w.line(f"ind_casc_init(acc{i}_up);")
            out.append(i)
    if out:
        w.line("int64_t casc_n = 0;")
    return out


def column_step(w: Writer, cascaded: Sequence[int], inner: Sequence[int]) -> None:
    """After each step of the reduction loops: fold the levels that are due."""
    if not cascaded:
        return
    lp = level_power(math.prod(inner))
    w.open(f"if (((++casc_n) & {(1 << lp) - 1}) == 0)")
    for i in cascaded:
        w.line(f"ind_col_fold(acc{i}, acc{i}_up, casc_n, {lp});")
    w.close()


def column_total(w: Writer, cascaded: Sequence[int]) -> None:
    """After the reduction loops: each column's levels added into `acc<i>`."""
    for i in cascaded:
        w.line(f"ind_col_total(acc{i}, acc{i}_up);")


PRELUDE_CASCADE = r"""
/* Cascade summation (codegen/cascade.py): four levels of N accumulators; after every
   2^lp steps level 0 is added into level 1, after 2^(2 lp) level 1 into 2, and so on
   (ATen's cascade_sum). The total adds the levels per lane, then the lanes pairwise. */
template <class T, int L, int N> static inline void ind_casc_init(T (&c)[L][N]) {
  for (int l = 0; l < L; ++l)
    for (int j = 0; j < N; ++j) c[l][j] = T(0);
}
template <class T, int N> static inline void ind_casc_fold(T (&c)[4][N], int l) {
#pragma omp simd
  for (int j = 0; j < N; ++j) { c[l + 1][j] = c[l + 1][j] + c[l][j]; c[l][j] = T(0); }
}
template <class T, int N>
static inline void ind_casc_step(T (&c)[4][N], int64_t n, int lp) {
  if ((n & ((int64_t(1) << lp) - 1)) != 0) return;
  ind_casc_fold(c, 0);
  if ((n & ((int64_t(1) << (2 * lp)) - 1)) != 0) return;
  ind_casc_fold(c, 1);
  if ((n & ((int64_t(1) << (3 * lp)) - 1)) != 0) return;
  ind_casc_fold(c, 2);
}
template <class T> static inline T ind_pairwise_sum(T* v, int n) {
  for (int w = 1; w < n; w *= 2)
    for (int j = 0; j + w < n; j += 2 * w) v[j] = v[j] + v[j + w];
  return v[0];
}
template <class T, int N>
static inline void ind_col_fold(T (&c0)[N], T (&up)[3][N], int64_t n, int lp) {
#pragma omp simd
  for (int j = 0; j < N; ++j) { up[0][j] = up[0][j] + c0[j]; c0[j] = T(0); }
  if ((n & ((int64_t(1) << (2 * lp)) - 1)) != 0) return;
#pragma omp simd
  for (int j = 0; j < N; ++j) { up[1][j] = up[1][j] + up[0][j]; up[0][j] = T(0); }
  if ((n & ((int64_t(1) << (3 * lp)) - 1)) != 0) return;
#pragma omp simd
  for (int j = 0; j < N; ++j) { up[2][j] = up[2][j] + up[1][j]; up[1][j] = T(0); }
}
template <class T, int N> static inline void ind_col_total(T (&c0)[N], T (&up)[3][N]) {
  for (int j = 0; j < N; ++j) c0[j] = ((c0[j] + up[0][j]) + up[1][j]) + up[2][j];
}
template <class T, int N> static inline T ind_casc_total(T (&c)[4][N]) {
  T lanes[N];
  for (int j = 0; j < N; ++j) lanes[j] = ((c[0][j] + c[1][j]) + c[2][j]) + c[3][j];
  return ind_pairwise_sum(lanes, N);
}
"""
