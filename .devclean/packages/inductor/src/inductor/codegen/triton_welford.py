"""Welford's one-pass variance for looped reductions on the Triton target.

Lowering spells a variance in two reductions over the same rows: `mean = sum(x) / n`, then
`m2 = sum((x - mean)^2)` (layer norm, batch norm, var_mean). A row that fits one block
(persistent) computes both from registers; a longer row would read `x` once per pass. Here
the second reduction is recognized and computed in the first pass instead, by Welford's
update (a running mean, sum of squared deviations and count per lane of the block, merged
across lanes at the end by Chan's formula), so a looped layer norm reads its row twice
(statistics, then the output) instead of three times. The result is the sum of squared
deviations from the row's exact mean, which is what eager's Welford computes too.

`match_welford` finds, in a group's prepared nodes, each reduction node B of the form
`sum(sq(sub(cast?(load X[i]), cast?(load M[j]))))` where M is written by a node A of the
group as `sum(cast?(load X[i])) / n` (same buffer and index, `n` the row length).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.ir.loop_body import LoopBody, LoopOp
from inductor.ir.nodes import ComputedBuffer
from inductor.ir.ops import Ref

Prepared = tuple[int, ComputedBuffer, dict[sympy.Symbol, sympy.Expr], tuple[int, ...]]
Substitute = Callable[[object, dict[sympy.Symbol, sympy.Expr]], sympy.Expr]

WELFORD_HELPER = '''

@triton.jit
def _welford(am, a2, an, bm, b2, bn):
    n = an + bn
    w = tl.where(n == 0, 0.0, bn / tl.where(n == 0, 1.0, n))
    d = bm - am
    return am + d * w, a2 + b2 + d * d * an * w, n
'''


@dataclass(frozen=True, slots=True)
class WelfordMatch:
    """Reduction node B computed by Welford: `chain` are the op ids of B that produce the
    reduced element `x` (its load and casts, in order); `mean_of` names A's buffer."""

    chain: tuple[int, ...]
    mean_of: str


def _op(body: LoopBody, r: object) -> tuple[int, LoopOp] | None:
    if not isinstance(r, Ref):
        return None
    return r.id, body.ops[r.id]


def _source(body: LoopBody, r: object) -> tuple[tuple[int, ...], LoopOp] | None:
    """The ops from a load through its casts to `r`, and the load."""
    chain: list[int] = []
    got = _op(body, r)
    while got is not None and got[1].kind == "to_dtype":
        chain.append(got[0])
        got = _op(body, got[1].args[0])
    if got is None or got[1].kind != "load":
        return None
    chain.append(got[0])
    return tuple(reversed(chain)), got[1]


def _red(body: LoopBody) -> int | None:
    return next((i for i, op in enumerate(body.ops) if op.kind == "reduction"), None)


def _mean_node(n: ComputedBuffer, numel: int) -> tuple[LoopOp, int] | None:
    """A's reduction's source load and its chain length when A is `sum(x) / numel`."""
    body = n.body
    assert body is not None
    red = _red(body)
    if red is None or body.ops[red].args[0] != "sum":
        return None
    src = _source(body, body.ops[red].args[1])
    if src is None:
        return None
    after = body.ops[red + 1:]
    div = next((op for op in after if op.kind == "truediv"), None)
    if div is None or not (isinstance(div.args[0], Ref) and div.args[0].id == red):
        return None
    c = _op(body, div.args[1])
    if c is None or c[1].kind != "constant" or float(c[1].args[0]) != float(numel):  # type: ignore[arg-type]
        return None
    return src[1], len(src[0])


def match_welford(prepared: list[Prepared], sub: Substitute) -> dict[int, WelfordMatch]:
    """Node index -> how its variance reduction is computed by Welford (see module doc)."""
    by_name = {n.name: (ni, n, subs, inner) for ni, n, subs, inner in prepared}
    out: dict[int, WelfordMatch] = {}
    for ni, n, subs, inner in prepared:
        body = n.body
        assert body is not None
        red = _red(body)
        if red is None or body.ops[red].args[0] != "sum" or not inner:
            continue
        sq = _op(body, body.ops[red].args[1])
        if sq is None or sq[1].kind != "mul" or sq[1].args[0] != sq[1].args[1]:
            continue
        diff = _op(body, sq[1].args[0])
        if diff is None or diff[1].kind != "sub":
            continue
        x_src = _source(body, diff[1].args[0])
        m_src = _source(body, diff[1].args[1])
        if x_src is None or m_src is None:
            continue
        mean_name = str(m_src[1].args[0])
        a = by_name.get(mean_name)
        if a is None or a[3] != inner or not a[1].body or not a[1].body.is_reduction:
            continue
        numel = 1
        for s in inner:
            numel *= s
        mean = _mean_node(a[1], numel)
        if mean is None:
            continue
        a_load, _ = mean
        if (str(a_load.args[0]) != str(x_src[1].args[0])
                or sub(a_load.args[1], a[2]) != sub(x_src[1].args[1], subs)):
            continue
        store = next(op for op in a[1].body.ops if op.kind == "store_reduction")
        if sub(store.args[1], a[2]) != sub(m_src[1].args[1], subs):
            continue
        out[ni] = WelfordMatch(x_src[0], mean_name)
    return out
