"""C++/OpenMP code generation for one fused group.

In: a `FusedGroup` (nodes with LoopBodies sharing `k` outer loops). Out: the source of one
`extern "C"` function taking raw pointers: OpenMP on the outer loops, `omp simd` on the
innermost loops (with reduction clauses for reductions), scalars for group-local buffers.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.codegen.cascade import (
    cascade_mode,
    emit_cascade,
)
from inductor.codegen.checks import (
    EPILOGUE,
    ERR_ARG,
    INT_DIVISIONS,
    PROLOGUE,
    checked_division,
    checked_index,
    is_integral,
    with_check_clauses,
)
from inductor.codegen.cpp_column import column_ok, emit_column, hint_prod
from inductor.codegen.cpp_syntax import (
    BINARY_INFIX,
    CALLS,
    SIMD_REDUCTION,
    UNARY_TEMPLATES,
    Writer,
    ctype,
    literal,
    pointer_ctype,
    reduction_init,
)
from inductor.codegen.loop_split import fold_divisor, split_divisor, split_symbols
from inductor.codegen.row_cache import RowCache, dead_ops
from inductor.ir.checks import ERR_PARAM, ZERO_DIVISION, KernelCheck
from inductor.ir.loop_body import LoopBody, LoopOp, uses
from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.ir.ops import Ref
from inductor.scheduler.fusion import (
    FusedGroup,
    inner_symbol,
    outer_symbol,
    split_node,
)
from inductor.scheduler.fusion import substitute as _sub
from inductor.sizevars import Clamp, cexpr, is_static
from inductor.symbols import size_hint


@dataclass(frozen=True, slots=True)
class CppKernel:
    name: str
    source: str
    params: tuple[str, ...]  # buffer names, in call order (`ERR_PARAM` last if checks)
    checks: tuple[KernelCheck, ...] = ()  # what the kernel checks at run time, from 1
    sizes: tuple[str, ...] = ()  # the size symbols among `params` (int64 arguments)


_SIZE_SYMBOL = re.compile(r"\b(s[0-9]+)\b")
_SIZE_FUNCTIONS = re.compile(r"\b(FloorDiv|ModIndex|Max|Min)\(")
_C_FUNCTIONS = {"FloorDiv": "ind_floordiv(", "ModIndex": "ind_mod(",
                "Max": "std::max<int64_t>(", "Min": "std::min<int64_t>("}  # NOTE: capture's size symbols (`inductor.symbols`)
class KernelGen:
    def __init__(self, group: FusedGroup, buffers: dict[str, Buffer], *, threads: int,
                 parallel_threshold: int, simd: bool) -> None:
        self.group = group
        self.buffers = buffers
        self.threads = threads
        self.parallel_threshold = parallel_threshold
        self.simd = simd
        self.params: dict[str, str] = {}
        self.param_order: list[str] = []
        self.locals: dict[str, str] = {}
        # NOTE: while emitting one piece of a split innermost loop: (symbol, start, end)
        self._piece: tuple[sympy.Symbol, int, int] | None = None
        # NOTE: while emitting an innermost loop split by a divisor (loop_split.py)
        self._div: tuple[sympy.Symbol, int] | None = None
        # NOTE: per-element values of a reduction kept for later nodes (row_cache.py); one
        # plan per kind of loop body (a split loop emits the body once per piece)
        self._row_caches: dict[bool, RowCache] = {}
        self._row_cache = RowCache(group, parallel_reduction=True)  # plans nothing
        self.checks: list[KernelCheck] = []  # run-time checks, numbered from 1 (ir/checks.py)
        # NOTE: per node, ops emitted before the innermost loop (`_hoist_indirect`)
        self._pre_hoisted: dict[str, set[int]] = {}
        self.par_if = ""  # NOTE: an OpenMP `if` clause for loops over symbolic sizes
        writes = group.writes()
        for n in group.nodes:
            assert n.body is not None
            for op in n.body.ops:
                if op.kind not in ("load", "store", "store_reduction"):
                    continue
                name = str(op.args[0])
                if name in group.local:
                    self.locals.setdefault(name, f"loc{len(self.locals)}")
                    continue
                if name not in self.params:
                    self.param_order.append(name)
                    self.params[name] = ""
        n_in = n_out = 0
        for name in self.param_order:
            if name in writes:
                self.params[name] = f"out_ptr{n_out}"
                n_out += 1
            else:
                self.params[name] = f"in_ptr{n_in}"
                n_in += 1

    # -- expressions ---------------------------------------------------------------------
    def _check_id(self, check: KernelCheck) -> int:
        """The 1-based number of `check` in this kernel's checks (added when new)."""
        if check not in self.checks:
            self.checks.append(check)
        return self.checks.index(check) + 1

    def _load(self, name: str, index: sympy.Expr) -> str:
        if name in self.locals:
            return self.locals[name]
        dtype = self.buffers[name].dtype
        text = f"{self.params[name]}[{cexpr(index)}]"
        if dtype == torch.float16:
            return f"ind_f16_to_f32({text})"
        if dtype == torch.bfloat16:
            return f"ind_bf16_to_f32({text})"
        return text

    def _store(self, w: Writer, name: str, index: sympy.Expr, value: str) -> None:
        if name in self.locals:
            w.line(f"{self.locals[name]} = {value};")
            return
        dtype = self.buffers[name].dtype
        if dtype == torch.float16:
            value = f"ind_f32_to_f16({value})"
        elif dtype == torch.bfloat16:
            value = f"ind_f32_to_bf16({value})"
        w.line(f"{self.params[name]}[{cexpr(index)}] = {value};")

    def _expr(self, op: LoopOp, subs: dict[sympy.Symbol, sympy.Expr]) -> str:
        a = op.args
        if op.kind == "load":
            return self._load(str(a[0]), self._fold(_sub(a[1], subs)))
        if op.kind == "constant":
            assert op.dtype is not None
            return literal(a[0], op.dtype)
        if op.kind == "index_expr":
            assert op.dtype is not None
            return f"static_cast<{ctype(op.dtype)}>({cexpr(self._fold(_sub(a[0], subs)))})"
        if op.kind == "to_dtype":
            src = a[0]
            assert isinstance(src, Ref)
            dst = a[1]
            assert isinstance(dst, torch.dtype)
            if dst == torch.bool:
                return f"({src} != 0)"
            return f"static_cast<{ctype(dst)}>({src})"
        if op.kind == "indirect":
            check = a[3] if len(a) > 3 else None
            if not isinstance(check, KernelCheck):
                return f"({a[0]} < 0 ? {a[0]} + {a[1]} : {a[0]})"
            return checked_index(str(a[0]), str(a[1]), bool(a[2]), self._check_id(check))
        if op.kind in INT_DIVISIONS and op.dtype is not None and is_integral(op.dtype):
            return checked_division(op.kind, str(a[0]), str(a[1]), self._check_id(ZERO_DIVISION))
        if op.kind == "where":
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op.kind == "rand":
            fn = "ind_randn" if a[2] else "ind_rand"
            return f"{fn}({a[0]}, {cexpr(self._fold(_sub(a[1], subs)))})"
        if op.kind in BINARY_INFIX:
            return f"({a[0]} {BINARY_INFIX[op.kind]} {a[1]})"
        if op.kind in UNARY_TEMPLATES:
            return UNARY_TEMPLATES[op.kind].format(a[0])
        if op.kind in CALLS:
            return f"{CALLS[op.kind]}({', '.join(str(x) for x in a)})"
        raise NotImplementedError(f"no C++ for op {op.kind}")

    # -- one node --------------------------------------------------------------------------
    def _node(self, w: Writer, n: ComputedBuffer, parallel_reduction: bool) -> None:
        body = n.body
        assert body is not None
        sp = split_node(body, self.group.outer)
        assert sp is not None
        subs = dict(sp.subs)
        for op_id, op in enumerate(body.ops):
            if op.kind == "indirect":
                subs[sympy.Symbol(f"tmp{op_id}", integer=True)] = sympy.Symbol(
                    f"tmp{op_id}", integer=True)
        red_pos = next((i for i, op in enumerate(body.ops) if op.kind == "reduction"), None)
        inner = sp.inner_ranges
        w.open(f"// {n.name}")
        acc_names: list[str] = []
        red: LoopOp | None = None
        if red_pos is not None:
            red = body.ops[red_pos]
            kind = str(red.args[0])
            vref = red.args[1]
            assert isinstance(vref, Ref)
            vt = vref.dtype
            w.line(f"{ctype(vt)} acc = {reduction_init(kind, vt)};")
            acc_names.append("acc")
            if kind in ("argmax", "argmin"):
                w.line("int64_t acc_idx = 0;")
            if kind in ("max", "min") and vt.is_floating_point:
                w.line("int acc_nan = 0;")
        loop_ops = body.ops if red_pos is None else body.ops[:red_pos]
        after_ops = () if red_pos is None else body.ops[red_pos + 1:]
        clause = ""
        if red is not None:
            kind = str(red.args[0])
            if kind in SIMD_REDUCTION:
                clause = f" reduction({SIMD_REDUCTION[kind]}:acc)"
                vref = red.args[1]
                assert isinstance(vref, Ref)
                if kind in ("max", "min") and vref.dtype.is_floating_point:
                    clause += " reduction(|:acc_nan)"
            else:
                clause = None  # type: ignore[assignment]
        # NOTE: a float sum/prod along a strided dim runs in order, as ATen's outer sums do
        # (a simd reduction over gathers reorders the adds: results drift from eager).
        in_order = red is not None and _strided_float_reduction(body, red, sp.subs, len(inner))
        hoisted = self._invariant(loop_ops, subs, len(inner)) if all(inner) else set()
        rows = self._row_cache.rows_of(n, hoisted)
        dead = dead_ops(body.ops, rows)
        pre = self._pre_hoisted.get(n.name, set())
        self.emit_ops(w, loop_ops, 0, subs, only=hoisted - dead - pre)
        mode = None
        if red is not None and str(red.args[0]) == "sum" and vt.is_floating_point:
            mode = cascade_mode(inner)
        if mode is not None and red is not None:
            value = red.args[1]
            parts = self.threads if parallel_reduction and clause is not None else 1

            def body_into(target: str) -> None:
                self.emit_ops(w, loop_ops, 0, subs, skip=hoisted | dead, rows=rows)
                w.line(f"{target} = {target} + {value};")

            emit_cascade(w, mode=mode, inner=inner, ctype=ctype(vt), body=body_into,
                         simd=self.simd, parts=parts)
        loops = inner if mode is None else ()  # NOTE: a cascade closes its own loops
        for j, size in enumerate(loops):
            last = j == len(inner) - 1
            pragma = None
            vector = last and self.simd and not in_order
            if j == 0 and parallel_reduction and clause is not None:
                pragma = "#pragma omp parallel for" + (" simd" if vector else "")
                pragma += (clause or "") + self.par_if
            elif vector and clause is not None:
                pragma = "#pragma omp simd" + (clause or "")
            if pragma:
                w.line(pragma)
            sym = inner_symbol(j)
            w.open(f"for (int64_t {sym} = 0; {sym} < {size}; ++{sym})")
        if mode is None:
            self.emit_ops(w, loop_ops, 0, subs, skip=hoisted | dead | pre, rows=rows)
        if red is not None and mode is None:
            kind = str(red.args[0])
            v = red.args[1]
            if kind == "sum":
                w.line(f"acc = acc + {v};")
            elif kind == "prod":
                w.line(f"acc = acc * {v};")
            elif kind == "any":
                w.line(f"acc = acc || {v};")
            elif kind == "all":
                w.line(f"acc = acc && {v};")
            elif kind in ("max", "min"):
                cmp = ">" if kind == "max" else "<"
                w.line(f"acc = acc {cmp} {v} ? acc : {v};")
                assert isinstance(v, Ref)
                if v.dtype.is_floating_point:
                    w.line(f"acc_nan |= ({v} != {v});")
            else:
                cmp = ">" if kind == "argmax" else "<"
                w.line(f"if ({v} {cmp} acc || ({v} != {v} && acc == acc)) "
                       f"{{ acc = {v}; acc_idx = {red.args[2]}; }}")
        for _ in loops:
            w.close()
        if red is not None and red_pos is not None:
            kind = str(red.args[0])
            assert red.dtype is not None
            if kind in ("argmax", "argmin"):
                w.line(f"int64_t tmp{red_pos} = acc_idx;")
            else:
                if kind in ("max", "min"):
                    vref = red.args[1]
                    assert isinstance(vref, Ref)
                    if vref.dtype.is_floating_point:
                        w.line("if (acc_nan) acc = std::numeric_limits<"
                               f"{ctype(vref.dtype)}>::quiet_NaN();")
                w.line(f"{ctype(red.dtype)} tmp{red_pos} = acc;")
            if inner:  # NOTE: without loops the earlier values are still in scope
                self.reemit_needed(w, body.ops, red_pos, subs, hoisted)
            self.emit_ops(w, after_ops, red_pos + 1, subs)
        w.close()

    def _invariant(self, ops_: tuple[LoopOp, ...], subs: dict[sympy.Symbol, sympy.Expr],
                   n_inner: int) -> set[int]:
        """Ids of the ops whose value does not change in the inner loops (loads at the
        outer point and what is computed from them only), emitted once before the loops.
        NOTE: g++ does not vectorize an `omp simd` loop that loads a row's statistics from
        an output pointer and takes their `1 / sqrt` inside it ("latch block not empty"): the
        layer-norm epilogue ran scalar (7x slower than ATen's); hoisted, it vectorizes."""
        inner_syms = {inner_symbol(j) for j in range(n_inner)}
        out: set[int] = set()
        for i, op in enumerate(ops_):
            if op.kind == "constant":
                out.add(i)
                continue
            if op.kind in ("store", "store_reduction", "reduction", "rand"):
                continue
            if any(isinstance(a, Ref) and a.id not in out for a in op.args):
                continue
            if op.kind in ("load", "index_expr"):
                expr = self._fold(_sub(op.args[1] if op.kind == "load" else op.args[0], subs))
                if any(not str(s).startswith("x") or s in inner_syms
                       for s in expr.free_symbols):
                    continue
            elif not any(isinstance(a, Ref) for a in op.args):
                continue
            out.add(i)
        # NOTE: only worth it (and only changes the code) when something loads; constants
        # move only with a hoisted op that uses them.
        if not any(ops_[i].kind == "load" for i in out):
            return set()
        keep = {i for i in out if ops_[i].kind != "constant"}
        keep |= {a.id for i in keep for a in ops_[i].args if isinstance(a, Ref)}
        return keep

    def _hoist_indirect(self, w: Writer, sym: sympy.Symbol) -> None:
        """Before the innermost loop of a one-node pointwise group: the indirect indices
        (bounds-checked) that do not change in it, with what they are computed from; the
        loop then reads a row (`w[idx]`: one check per index, and the row loop vectorizes,
        which a check inside it prevents)."""
        g = self.group
        if len(g.nodes) != 1 or g.nodes[0].body is None:
            return
        n = g.nodes[0]
        body = n.body
        assert body is not None
        if not any(op.kind == "indirect" for op in body.ops):
            return
        sp = split_node(body, g.outer)
        assert sp is not None
        subs = dict(sp.subs)
        invariant: set[int] = set()
        for i, op in enumerate(body.ops):
            if op.kind in ("store", "store_reduction", "reduction", "rand"):
                continue
            if any(isinstance(a, Ref) and a.id not in invariant for a in op.args):
                continue
            if op.kind in ("load", "index_expr"):
                expr = _sub(op.args[1] if op.kind == "load" else op.args[0], subs)
                if sym in expr.free_symbols or any(str(s).startswith("tmp")
                                                   for s in expr.free_symbols):
                    continue
            invariant.add(i)
        wanted: set[int] = set()
        stack = [i for i in invariant if body.ops[i].kind == "indirect"]
        while stack:
            i = stack.pop()
            if i not in wanted:
                wanted.add(i)
                stack += [a.id for a in body.ops[i].args if isinstance(a, Ref)]
        if wanted:
            self.emit_ops(w, body.ops, 0, subs, only=wanted)
            self._pre_hoisted[n.name] = wanted

    def reemit_needed(self, w: Writer, body_ops: tuple[LoopOp, ...], red_pos: int,
                       subs: dict[sympy.Symbol, sympy.Expr], hoisted: set[int]) -> None:
        """Ops after a reduction may use values (constants, outer-point loads) computed
        before it, inside the reduction loop's scope: emit those again after the loop
        (those hoisted before the loop are still in scope)."""
        needed: set[int] = set()
        stack = [i for op in body_ops[red_pos + 1:] for i in uses(op)]
        while stack:
            i = stack.pop()
            if i >= red_pos or i in needed or i in hoisted:
                continue
            needed.add(i)
            stack += uses(body_ops[i])
        for i in sorted(needed):
            self.emit_ops(w, (body_ops[i],), i, subs)

    def emit_ops(self, w: Writer, ops_: tuple[LoopOp, ...], start: int,
                 subs: dict[sympy.Symbol, sympy.Expr], *, skip: set[int] | None = None,
                 only: set[int] | None = None,
                 rows: dict[int, tuple[str, bool]] | None = None) -> None:
        """Emit `ops_` (numbered from `start`) as C++ statements, one `tmp<i>` each, with
        `subs` for the loop symbols; `skip`/`only` select ops, `rows` reads cached values."""
        p = inner_symbol(0)
        for i, op in enumerate(ops_, start):
            if (skip is not None and i in skip) or (only is not None and i not in only):
                continue
            row = rows.get(i) if rows else None
            if row is not None:
                assert op.dtype is not None
                if row[1]:
                    w.line(f"{ctype(op.dtype)} tmp{i} = {self._expr(op, subs)};")
                    w.line(f"{row[0]}[{p}] = tmp{i};")
                else:
                    w.line(f"{ctype(op.dtype)} tmp{i} = {row[0]}[{p}];")
                continue
            if op.kind in ("store", "store_reduction"):
                self._store(w, str(op.args[0]), self._fold(_sub(op.args[1], subs)),
                            str(op.args[2]))
                continue
            assert op.dtype is not None
            w.line(f"{ctype(op.dtype)} tmp{i} = {self._expr(op, subs)};")

    def wants_parallel(self, work: object) -> bool:
        """Whether the loops run in parallel for `work` elements; for a symbolic amount,
        they may, and `par_if` (an OpenMP `if` clause) decides at run time."""
        self.par_if = ""
        if is_static(work):
            return self.threads > 1 and int(work) >= self.parallel_threshold  # type: ignore[call-overload]
        if self.threads <= 1:
            return False
        self.par_if = f" if({cexpr(work)} >= {self.parallel_threshold})"
        return True

    # -- the kernel --------------------------------------------------------------------------
    def generate(self) -> CppKernel:
        g = self.group
        w = Writer()
        params = []
        writes = g.writes()
        for name in self.param_order:
            t = pointer_ctype(self.buffers[name].dtype)
            const = "" if name in writes else "const "
            params.append(f"{const}{t}* __restrict__ {self.params[name]}")
        w.line("{")
        w.level += 1
        if column_ok(self):
            emit_column(self, w)
        else:
            self._rows(w)
        w.level -= 1
        w.line("}")
        names = list(self.param_order)
        # NOTE: loop bounds of symbolic sizes print as sympy text (`FloorDiv(s0, 2)` for a
        # slice to half a size): the prelude's functions of the same meaning
        w.lines = [_SIZE_FUNCTIONS.sub(lambda m: _C_FUNCTIONS[m.group(1)], line)
                   for line in w.lines]
        # NOTE: sizes as arguments: the size symbols (`inductor.symbols`) the kernel's loop
        # bounds and index arithmetic use, passed by the wrapper from the inputs' sizes.
        sizes = sorted({m for line in w.lines for m in _SIZE_SYMBOL.findall(line)},
                       key=lambda name: int(name[1:]))
        params += [f"const int64_t {s}" for s in sizes]
        names += sizes
        if self.checks:
            params.append(f"int64_t* __restrict__ {ERR_ARG}")
            names.append(ERR_PARAM)
            w.lines = ["{", "    " + PROLOGUE, *with_check_clauses(w.lines[1:-1]),
                       "    " + EPILOGUE, "}"]
        w.lines.insert(0, f'extern "C" void KERNEL_NAME({", ".join(params)})')
        text = "\n".join(w.lines) + "\n"
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        name = f"kernel_{digest}"
        return CppKernel(name, text.replace("KERNEL_NAME", name), tuple(names),
                         tuple(self.checks), tuple(sizes))

    def _rows(self, w: Writer) -> None:
        g = self.group
        pure = all(
            (n.body is not None and not n.body.is_reduction
             and not (split_node(n.body, g.outer) or _EMPTY).inner_ranges)
            for n in g.nodes)
        inner = max((_inner_ranges(n, g.outer) for n in g.nodes), key=hint_prod, default=())
        parallel = self.wants_parallel(math.prod((*g.outer, *inner)))
        k = g.k
        par_loops = 0
        if parallel and k > 0:
            limit = k - 1 if (pure and k > 1) else k
            prod = 1
            while par_loops < limit:
                prod *= size_hint(g.outer[par_loops])
                par_loops += 1
                if prod >= 8 * self.threads:
                    break
            if prod < 2:
                par_loops = 0
        parallel_reduction = (parallel and k == 0 and len(g.nodes) == 1)
        tile = self._transpose_tile(pure)
        extra = 0  # scopes opened beyond one per outer loop
        if tile:
            self._tiled_loops(w, parallel)
        else:
            pieces = self._clamp_pieces() if pure and (par_loops < k or k == 1) else []
            for j, size in enumerate(g.outer):
                last = j == k - 1
                pragma = ""
                if j == 0 and par_loops:
                    pragma = "#pragma omp parallel for"
                    if par_loops > 1:
                        pragma += f" collapse({par_loops})"
                    if pure and last and self.simd:
                        pragma += " simd"
                    if self.par_if:  # NOTE: clauses after the directive's name
                        simd = " simd" if pragma.endswith(" simd") else ""
                        pragma = pragma.removesuffix(simd).replace(" for", " for" + simd, 1)
                        pragma += self.par_if
                elif pure and last and self.simd and j >= par_loops:
                    pragma = "#pragma omp simd"
                sym = outer_symbol(j)
                if last and pieces:
                    self._split_loop(w, sym, pieces, pragma, parallel_reduction)
                    for _ in range(len(g.outer) - 1):
                        w.close()
                    return
                if last and pure:
                    self._hoist_indirect(w, sym)
                    extra = self._open_innermost(w, sym, 0, size, pragma) - 1
                    continue
                if pragma:
                    w.line(pragma)
                w.open(f"for (int64_t {sym} = 0; {sym} < {size}; ++{sym})")
        self._loop_body(w, parallel_reduction)
        self._div = None
        for _ in range(len(g.outer) + (2 if tile else 0) + extra):
            w.close()

    def _loop_body(self, w: Writer, parallel_reduction: bool) -> None:
        for name, loc in self.locals.items():
            w.line(f"{ctype(_compute(self.buffers[name].dtype))} {loc};")
        if parallel_reduction not in self._row_caches:
            self._row_caches[parallel_reduction] = RowCache(
                self.group, parallel_reduction=parallel_reduction)
        self._row_cache = self._row_caches[parallel_reduction]
        for arr, size, dtype in self._row_cache.arrays():
            if is_static(size):
                w.line(f"{ctype(dtype)} {arr}[{size}];")
                continue
            # NOTE: a row of symbolic length: a per-thread array, grown when a longer row
            # comes (kept for the next calls; one per thread and kernel)
            t, length = ctype(dtype), cexpr(size)
            w.line(f"static thread_local {t}* {arr}_store = nullptr;")
            w.line(f"static thread_local int64_t {arr}_cap = 0;")
            w.line(f"if ({arr}_cap < {length}) {{ delete[] {arr}_store; "
                   f"{arr}_store = new {t}[{length}]; {arr}_cap = {length}; }}")
            w.line(f"{t}* __restrict__ {arr} = {arr}_store;")
        for n in self.group.nodes:
            self._node(w, n, parallel_reduction)

    # -- clamped indices (cat, pad, slice_scatter): split the innermost loop --------------
    def _clamp_pieces(self) -> list[tuple[int, int]]:
        """Ranges of the innermost outer loop inside which every `Clamp(x + c, lo, hi)` of
        a load or index is constant or the identity: emitted as separate loops, the masked
        branches fold away and the loads stop being gathers."""
        g = self.group
        if g.k == 0:
            return []
        sym = outer_symbol(g.k - 1)
        size = g.outer[-1]
        if not is_static(size):
            return []  # NOTE: pieces are cut at known positions
        cuts: set[int] = set()
        for idx in self._group_indices():
            for c in idx.atoms(Clamp):
                x, lo, hi = c.args
                off = x - sym
                if sym not in x.free_symbols or not (off.is_Integer and lo.is_Integer
                                                     and hi.is_Integer):
                    continue
                cuts.update(int(b) for b in (lo - off, hi - off + 1) if 0 < int(b) < size)
        if not cuts or len(cuts) > 6:
            return []
        bounds = [0, *sorted(cuts), size]
        return list(itertools.pairwise(bounds))

    def _split_loop(self, w: Writer, sym: sympy.Symbol, pieces: list[tuple[int, int]],
                    pragma: str, parallel_reduction: bool) -> None:
        for start, end in pieces:
            self._piece = (sym, start, end)
            opened = self._open_innermost(w, sym, start, end, pragma)
            self._loop_body(w, parallel_reduction)
            self._piece = None
            self._div = None
            for _ in range(opened):
                w.close()

    def _open_innermost(self, w: Writer, sym: sympy.Symbol, start: int, end: int,
                        pragma: str) -> int:
        """Open the innermost loop (split by a divisor where loop_split.py applies; not a
        parallel one); returns how many scopes were opened."""
        d = None
        if pragma in ("", "#pragma omp simd"):
            d = split_divisor(self._indices(), sym, start, end)
        if d is None:
            if pragma:
                w.line(pragma)
            w.open(f"for (int64_t {sym} = {start}; {sym} < {end}; ++{sym})")
            return 1
        outer, inner = split_symbols(sym)
        w.open(f"for (int64_t {outer} = {start // d}; {outer} < {end // d}; ++{outer})")
        if pragma:
            w.line(pragma)
        w.open(f"for (int64_t {inner} = 0; {inner} < {d}; ++{inner})")
        w.line(f"const int64_t {sym} = {d}*{outer} + {inner};")
        self._div = (sym, d)
        return 2

    def _indices(self) -> list[sympy.Expr]:
        """Every load/store/index expression of the group, as emitted in the current piece."""
        return [self._fold(idx) for idx in self._group_indices()]

    def _group_indices(self) -> list[sympy.Expr]:
        """Every load/store/index/rand-offset expression of the group over its outer loops."""
        g = self.group
        out: list[sympy.Expr] = []
        for n in g.nodes:
            assert n.body is not None
            sp = split_node(n.body, g.outer)
            assert sp is not None
            for op in n.body.ops:
                if op.kind in ("load", "store", "rand"):
                    idx = op.args[1]
                elif op.kind == "index_expr":
                    idx = op.args[0]
                else:
                    continue
                assert isinstance(idx, sympy.Expr)
                out.append(_sub(idx, sp.subs))
        return out

    def _fold(self, expr: sympy.Expr) -> sympy.Expr:
        """Inside a piece of a split loop: clamps of its symbol become constants or go."""
        expr = self._fold_clamps(expr)
        if self._div is not None:
            expr = fold_divisor(expr, *self._div)
        return expr

    def _fold_clamps(self, expr: sympy.Expr) -> sympy.Expr:
        if self._piece is None or not expr.has(Clamp):
            return expr
        sym, start, end = self._piece

        def fold(c: sympy.Expr) -> sympy.Expr:
            x, lo, hi = c.args
            off = x - sym
            if sym not in x.free_symbols or not (off.is_Integer and lo.is_Integer
                                                 and hi.is_Integer):
                return c
            if end - 1 + off <= lo:
                return lo
            if start + off >= hi:
                return hi
            if start + off >= lo and end - 1 + off <= hi:
                return x
            return c

        return sympy.expand(expr.replace(lambda e: isinstance(e, Clamp), fold))

    # -- transposes: tile the two innermost loops -----------------------------------------
    def _transpose_tile(self, pure: bool) -> bool:
        g = self.group
        if not pure or len(g.nodes) != 1 or g.k < 2 or min(map(size_hint, g.outer[-2:])) < 16:
            return False
        body = g.nodes[0].body
        assert body is not None
        sp = split_node(body, g.outer)
        assert sp is not None
        a, b = outer_symbol(g.k - 2), outer_symbol(g.k - 1)
        for _, idx in body.reads():
            e = _sub(idx, sp.subs)
            if e.coeff(a) == 1 and e.coeff(b) not in (0, 1):
                return True
        return False

    def _tiled_loops(self, w: Writer, parallel: bool) -> None:
        g = self.group
        k = g.k
        t = 16
        a, b = outer_symbol(k - 2), outer_symbol(k - 1)
        na, nb = g.outer[-2], g.outer[-1]
        if parallel:
            w.line(f"#pragma omp parallel for collapse({k}){self.par_if}")
        for j, size in enumerate(g.outer[:-2]):
            sym = outer_symbol(j)
            w.open(f"for (int64_t {sym} = 0; {sym} < {size}; ++{sym})")
        w.open(f"for (int64_t {a}b = 0; {a}b < {na}; {a}b += {t})")
        w.open(f"for (int64_t {b}b = 0; {b}b < {nb}; {b}b += {t})")
        w.open(f"for (int64_t {a} = {a}b; {a} < std::min<int64_t>({a}b + {t}, {na}); ++{a})")
        if self.simd:
            w.line("#pragma omp simd")
        w.open(f"for (int64_t {b} = {b}b; {b} < std::min<int64_t>({b}b + {t}, {nb}); ++{b})")

class _Empty:
    inner_ranges: tuple[int, ...] = ()


_EMPTY = _Empty()


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _inner_ranges(n: ComputedBuffer, outer: tuple[int, ...]) -> tuple[int, ...]:
    sp = split_node(n.body, outer) if n.body is not None else None
    return tuple(sp.inner_ranges) if sp is not None else ()


def _strided_float_reduction(body: LoopBody, red: LoopOp,
                             subs: dict[sympy.Symbol, sympy.Expr], n_inner: int) -> bool:
    """A floating sum/prod whose innermost reduction loop reads memory only with a stride
    (some load depends on the loop variable, none with unit stride)."""
    vref = red.args[1]
    if (n_inner == 0 or str(red.args[0]) not in ("sum", "prod") or not isinstance(vref, Ref)
            or not vref.dtype.is_floating_point):
        return False
    last_p = inner_symbol(n_inner - 1)
    strided = False
    for _, idx in body.reads():
        e = _sub(idx, subs)
        if last_p not in e.free_symbols:
            continue
        if e.coeff(last_p) == 1:
            return False
        strided = True
    return strided




def generate_kernel(group: FusedGroup, buffers: dict[str, Buffer], *, threads: int,
                    parallel_threshold: int, simd: bool = True) -> CppKernel:
    return KernelGen(group, buffers, threads=threads, parallel_threshold=parallel_threshold,
                     simd=simd).generate()


def body_ops(body: LoopBody) -> int:
    return len(body.ops)
