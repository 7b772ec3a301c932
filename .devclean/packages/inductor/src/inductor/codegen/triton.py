"""Triton code generation for one fused group (the Triton target's code generator).

In: a `FusedGroup` (nodes with LoopBodies sharing the group's outer loops). Out: the source
of a module with one `@triton.jit` kernel and its launch configurations.

The group's outer loops become the kernel's `x` dimension (`xidx`, split into the outer
loop symbols by `//` and `%`); the nodes' inner loops one `r` dimension of `rnumel`
elements (`ridx`; a Triton kernel has one, so `triton_can_fuse` refuses a node with another
inner size). A group without reductions is one flat 1-D loop over x*r elements. A group
with reductions is 2-D, `[XBLOCK, RBLOCK]` tiles: persistent (one block holds a whole row,
rows up to `PERSISTENT_MAX`) or looped (`for roffset in range(0, rnumel, RBLOCK)`, one
loop per run of nodes that do not read a reduction of the same run; a later loop that loads
what an earlier one stored starts with a barrier). Values of group-local buffers stay in
registers. Masked loads and stores; indices in int32 where every size allows, else int64;
float16/bfloat16 loaded and stored as such, computed in float32; random values from Triton's
Philox (`tl.rand`) keyed by the graph call's seed and the element's offset.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints
import torch

from inductor.codegen.triton_compute import compute_text, reduce_text
from inductor.codegen.triton_prelude import (
    TL_DTYPE,
    cast_text,
    literal,
    module_header,
    reduction_init,
)
from inductor.codegen.triton_rules import (
    PERSISTENT_MAX,
    inner_numel,
    inner_ranges,
    more_than_one,
    symbolic_group,
    triton_configs,
)
from inductor.codegen.triton_welford import WELFORD_HELPER, WelfordMatch, match_welford
from inductor.ir.checks import ERR_PARAM, ZERO_DIVISION, KernelCheck
from inductor.ir.loop_body import LoopBody, LoopOp
from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.ir.ops import Ref, compute_dtype
from inductor.scheduler.fusion import FusedGroup, inner_symbol, outer_symbol, split_node
from inductor.sizevars import Clamp, FloorDiv, ModIndex, bounds, is_static
from inductor.symbols import pyexpr, size_hint, size_symbols

_SIZE_SYMBOL = re.compile(r"\b(s[0-9]+)\b")  # NOTE: capture's size symbols (`inductor.symbols`)

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class MatmulPlan:
    """What the launcher of a matmul template needs (`codegen/triton_mm.py`): the problem,
    the operands as (buffer, size, stride, offset), the candidate configurations
    (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), and the ATen alternative: `op` into the
    matmul's buffer, then `epilogue` (the group without the matmul) when there is one."""

    op: str  # "mm", "addmm" or "bmm"
    dims: tuple[int, int, int, int]  # batch, M, N, K
    a: tuple[str, tuple[int, ...], tuple[int, ...], int]
    b: tuple[str, tuple[int, ...], tuple[int, ...], int]
    bias: tuple[str, tuple[int, ...], tuple[int, ...], int] | None
    alpha: float
    beta: float
    out: tuple[str, tuple[int, ...], tuple[int, ...], int]
    configs: tuple[tuple[int, int, int, int, int], ...]
    choice: str  # "auto": timed against ATen on a GPU; "template"; "aten"
    epilogue: TritonKernel | None = None
    has_aten: bool = True  # False: epilogue nodes without a kernel of their own (template only)


@dataclass(frozen=True, slots=True)
class TritonKernel:
    """A generated Triton kernel: `source` is a whole module defining `name`."""

    name: str
    source: str
    params: tuple[str, ...]  # buffer names in call order (`ERR_PARAM` last with checks)
    checks: tuple[KernelCheck, ...] = ()
    scalar_params: frozenset[str] = frozenset()  # CPU 0-dim buffers passed as numbers
    device: str = "cpu"
    xnumel: int = 1
    rnumel: int = 1
    reduction: bool = False
    persistent: bool = False
    configs: tuple[tuple[int, int, int], ...] = ((1024, 1, 4),)  # (XBLOCK, RBLOCK, warps)
    interpret: bool = False
    inplace: bool = False  # reads a buffer it writes: never re-run to time configurations
    seeds: tuple[str, ...] = field(default=())  # params Triton must not specialize on
    split: int = 1  # > 1: a split reduction, `name` (partials) then `name_final`
    workspaces: tuple[str, ...] = ()  # dtypes of a split reduction's partials, rows*split
    tile: tuple[int, ...] = ()  # a 2-D tiled pointwise kernel: (x size, y size, programs z)
    # NOTE: sizes as arguments (a graph of symbolic sizes): the size symbols the kernel
    # takes after its buffers, and `(xnumel, rnumel)` as Python over them, from which the
    # launcher computes the grid and picks block sizes for each call's sizes
    sizes: tuple[str, ...] = ()
    numels: str = ""
    one_block: bool = False  # takes ONE_BLOCK: one block per row when RBLOCK covers it
    matmul: MatmulPlan | None = None  # a matmul template (`codegen/triton_mm.py`)
    # NOTE: each argument as compile workers pass it to `warmup` (a pointer's torch dtype
    # name, an example int or float), set by the target (`runtime/triton_workers.py`)
    arg_types: tuple[str | int | float, ...] = ()
    # NOTE: checks as device-side asserts (a GPU kernel): compiled with Triton's `debug` on,
    # launched with its integer-overflow sanitizer off (`LAUNCH_DEBUG`)
    debug: bool = False


#: What a kernel compiled with `debug=True` is launched with besides its block sizes: the
#: device asserts are ours; Triton's checks of every int32 add and multiply are not.
LAUNCH_DEBUG = (("sanitize_overflow", False),)


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 1

    def add(self, text: str) -> None:
        self.lines.append("    " * self.level + text)


_LEVELS = {"c": 0, "x": 1, "r": 2}


def _max_level(*levels: str) -> str:
    return max(levels, key=lambda lv: _LEVELS[lv], default="c")


class TritonGen:
    """Generates the kernel of one group; see the module docstring for the shape."""

    def __init__(self, group: FusedGroup, buffers: dict[str, Buffer], interpret: bool) -> None:
        self.group = group
        self.buffers = buffers
        self.interpret = interpret
        first = group.nodes[0]
        self.device = first.layout.device
        self.xnumel = math.prod(group.outer)
        # NOTE: nodes over fewer row elements than the group (a reduction of one element
        # or none beside longer rows, `triton_can_fuse`) mask their r lanes (`_enter`)
        self.extents = {ni: inner_numel(group, n) for ni, n in enumerate(group.nodes)
                        if n.body is not None and (n.body.is_reduction or inner_ranges(group, n))}
        numels = list(self.extents.values())
        self.rnumel = next((r for r in numels if more_than_one(r)),
                           0 if numels and not any(numels) else 1)
        self.reduction = group.has_reduction()
        self.symbolic = symbolic_group(group, buffers)
        # NOTE: a row of symbolic length is looped (correct for every length; the block
        # size comes from its length at each call, so short rows take one iteration)
        self.persistent = self.reduction and is_static(self.rnumel) and (
            self.rnumel <= PERSISTENT_MAX)
        # NOTE: rows of symbolic length, short in the example: both ways in one kernel
        self.one_block = self.reduction and not self.persistent and (
            size_hint(self.rnumel) <= PERSISTENT_MAX)
        self.checks: list[KernelCheck] = []
        self.asserts = False  # a GPU kernel that checks with `tl.device_assert`
        self.params: dict[str, str] = {}
        self.scalars: set[str] = set()
        writes = group.writes()
        loaded: set[str] = set()
        for n in group.nodes:
            assert n.body is not None
            for op in n.body.ops:
                if op.kind not in ("load", "store", "store_reduction"):
                    continue
                name = str(op.args[0])
                if op.kind == "load":
                    loaded.add(name)
                if name in group.local or name in self.params:
                    continue
                prefix = "out_ptr" if name in writes else "in_ptr"
                count = sum(1 for v in self.params.values() if v.startswith(prefix))
                self.params[name] = f"{prefix}{count}"
                buf = buffers[name]
                if (self.device.type != "cpu" and buf.layout.device.type == "cpu"
                        and buf.layout.numel() == 1 and name not in writes):
                    self.scalars.add(name)
        self.inplace = bool(loaded & writes)
        self.int64 = self._needs_int64()
        self.values: dict[str, tuple[str, str]] = {}  # buffer -> (variable, level) stored
        self._loads: dict[str, str] = {}  # load expression -> variable, in this loop scope
        self._welford: dict[int, WelfordMatch] = {}  # nodes whose variance is one-pass
        self.inner_names: dict[tuple[int, ...], int] = {}
        self.seeds: set[str] = set()
        self._extent_mask: str | None = None  # the current node's r lanes (`_enter`)

    # -- sizes -------------------------------------------------------------------------
    def _needs_int64(self) -> bool:
        if self.symbolic:
            return True  # NOTE: no size bounds the indices of every call
        sizes = [self.xnumel * max(self.rnumel, 1)]
        for name in self.params:
            lay = self.buffers[name].layout
            sizes.append(lay.storage_size() + abs(lay.offset))
        return max(sizes) > INT32_MAX // 2

    # -- index expressions ---------------------------------------------------------------
    def _symbol_level(self, name: str) -> str:
        if name.startswith("x"):
            return "x"
        if name.startswith("r"):
            return "r"
        var = self._indirect_levels.get(name)
        return var if var is not None else "x"

    def _level(self, expr: sympy.Expr) -> str:
        return _max_level(*(self._symbol_level(s.name) for s in expr.free_symbols))

    def texpr(self, expr: sympy.Expr) -> str:
        """An index expression in Triton (`//` and `%` where operands are non-negative)."""
        if expr.is_Integer:
            return str(int(expr))
        if isinstance(expr, sympy.Symbol):
            return str(expr.name)
        if isinstance(expr, sympy.Add):
            parts = [self.texpr(a) for a in sorted(expr.args, key=sympy.default_sort_key)]
            return "(" + " + ".join(parts) + ")"
        if isinstance(expr, sympy.Mul):
            return "(" + " * ".join(self.texpr(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            return "(" + " * ".join([self.texpr(expr.base)] * int(expr.exp)) + ")"
        if isinstance(expr, (FloorDiv, ModIndex)):
            a, b = (self.texpr(x) for x in expr.args)
            if self._nonnegative(expr.args[0]):
                return f"({a} // {b})" if isinstance(expr, FloorDiv) else f"({a} % {b})"
            return f"_floordiv({a}, {b})" if isinstance(expr, FloorDiv) else f"_mod({a}, {b})"
        if isinstance(expr, Clamp):
            a, lo, hi = (self.texpr(x) for x in expr.args)
            return f"tl.minimum(tl.maximum({a}, {lo}), {hi})"
        if isinstance(expr, sympy.Max):
            return f"tl.maximum({self.texpr(expr.args[0])}, " \
                   f"{self.texpr(sympy.Max(*expr.args[1:]))})"
        if isinstance(expr, sympy.Min):
            return f"tl.minimum({self.texpr(expr.args[0])}, " \
                   f"{self.texpr(sympy.Min(*expr.args[1:]))})"
        raise NotImplementedError(f"cannot print index expression {expr!r} for Triton")

    def _nonnegative(self, expr: sympy.Expr) -> bool:
        if any(s.name.startswith("n") for s in expr.free_symbols):
            return False
        b = bounds(expr, self._ranges)
        return b is not None and b[0] >= 0

    # -- one node ------------------------------------------------------------------------
    def _node_subs(self, ni: int, n: ComputedBuffer) -> tuple[dict[sympy.Symbol, sympy.Expr],
                                                               tuple[int, ...]]:
        body = n.body
        assert body is not None
        sp = split_node(body, self.group.outer)
        assert sp is not None
        inner = tuple(sp.inner_ranges)
        key = self.inner_names.setdefault(inner, len(self.inner_names))
        subs: dict[sympy.Symbol, sympy.Expr] = {}
        for v, e in sp.subs.items():
            subs[v] = e.xreplace({inner_symbol(j): sympy.Symbol(f"r{key}_{j}", integer=True)
                                  for j in range(len(inner))})
        for op_id, op in enumerate(body.ops):
            if op.kind == "indirect":
                subs[sympy.Symbol(f"tmp{op_id}", integer=True)] = sympy.Symbol(
                    f"n{ni}_t{op_id}", integer=True)
        for j in range(len(inner)):
            self._ranges[sympy.Symbol(f"r{key}_{j}", integer=True)] = inner[j]
        return subs, inner

    def _sub(self, e: object, subs: dict[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
        assert isinstance(e, sympy.Expr)
        return sympy.expand(e.xreplace(subs))

    def _mask(self, level: str) -> str | None:
        if level == "c":
            return None
        if level == "r":
            return self._rmask()
        return "xmask"

    def _rmask(self) -> str:
        """The mask of the current node's r lanes (its own extent, `_enter`)."""
        base = "xmask & rmask" if self.reduction else "xmask"
        return base if self._extent_mask is None else f"{base} & {self._extent_mask}"

    def _enter(self, w: _Lines, ni: int) -> None:
        """Start node `ni`: a node over fewer elements than the group's r dimension (a
        reduction over a size-1 or empty dim) masks the lanes past its extent."""
        self._extent_mask = None
        numel = self.extents.get(ni)
        if numel is None or sympy.sympify(numel) == sympy.sympify(self.rnumel):
            return
        ridx = "ridx" if self.reduction or more_than_one(self.rnumel) else "xzero"
        w.add(f"n{ni}_rmask = {ridx} < {self.texpr(sympy.sympify(numel))}")
        self._extent_mask = f"n{ni}_rmask"

    def _zero(self, level: str) -> str:
        if level == "r" and self.reduction:
            return "xzero + rzero"
        return "xzero"

    def _check(self, w: _Lines, bad: str, value: str, level: str, check: KernelCheck) -> None:
        """Where `bad` holds, raise what eager raises: on the CPU (Triton's interpreter) through
        the error slots the wrapper reads after the kernel; on a GPU as a device-side assert,
        as eager CUDA kernels do (asynchronous: it surfaces at the next synchronization, and
        no read-back stalls the host). Eager CUDA's integer division by zero does not raise."""
        level = _max_level(level, "x")
        if not self.interpret:
            if check is ZERO_DIVISION:
                return
            self.asserts = True
            mask = self._mask(level)
            ok = f"({bad} == 0)" if mask is None else f"(({bad} == 0) | ({mask} == 0))"
            msg = check.message.replace("{value}", "").replace("  ", " ")
            w.add(f"tl.device_assert({ok}, {msg!r})")
            return
        if check not in self.checks:
            self.checks.append(check)
        cid = self.checks.index(check) + 1
        z = self._zero(level)
        # NOTE: `!= 0`: the interpreter makes `block & 0-d bool` an int32 block
        m = f"((({z} == 0) & {bad} & {self._mask(level)}) != 0)"
        w.add(f"tl.store(kernel_err + {z}, {cid}, mask={m})")
        w.add(f"tl.store(kernel_err + 1 + {z}, ({value}).to(tl.int64), mask={m})")

    def dtypes_comment(self) -> str:
        """A comment naming each argument's dtype, so part of the kernel's name: a JIT
        binary, the launcher's fast path and the workers' warm-up are for one set."""
        types = ", ".join(f"{arg}: {str(self.buffers[name].dtype).removeprefix('torch.')}"
                          + (" (a number)" if name in self.scalars else "")
                          for name, arg in self.params.items())
        return f"# {types}\n"

    def decorator(self, seeds: tuple[str, ...]) -> str:
        """`@triton.jit(...)` of this kernel: seeds and sizes unspecialized, `debug` on when
        it asserts."""
        opts = [f"do_not_specialize={list(seeds)!r}"] if seeds else []
        if self.asserts:
            opts.append("debug=True")
        return f"@triton.jit({', '.join(opts)})" if opts else "@triton.jit"

    def _emit_ops(self, w: _Lines, ni: int, n: ComputedBuffer, ops_: range,
                  subs: dict[sympy.Symbol, sympy.Expr], refs: dict[int, tuple[str, str]],
                  node_level: str) -> None:
        body = n.body
        assert body is not None
        for op_id in ops_:
            op = body.ops[op_id]
            if op.kind == "reduction":
                continue
            self._emit_op(w, ni, op_id, op, subs, refs, node_level)

    def _ref(self, refs: dict[int, tuple[str, str]], r: object) -> tuple[str, str]:
        assert isinstance(r, Ref)
        return refs[r.id]

    def _emit_op(self, w: _Lines, ni: int, op_id: int, op: LoopOp,
                 subs: dict[sympy.Symbol, sympy.Expr], refs: dict[int, tuple[str, str]],
                 node_level: str) -> None:
        a = op.args
        var = f"n{ni}_t{op_id}"
        if op.kind in ("store", "store_reduction"):
            name = str(a[0])
            value, vlevel = self._ref(refs, a[2])
            idx = self._sub(a[1], subs)
            self._store(w, name, idx, value, _max_level(vlevel, node_level))
            return
        level = "c"
        if op.kind == "load":
            text, level = self._load(str(a[0]), self._sub(a[1], subs), node_level)
            # NOTE: nodes of one group often load the same element (softmax's three reads
            # of x): one load per loop scope, the others name its variable
            if text.startswith("tl.load("):
                prev = self._loads.get(text)
                if prev is None:
                    self._loads[text] = var
                else:
                    text = prev
        elif op.kind == "constant":
            assert op.dtype is not None
            text = f"tl.full([], {literal(a[0], op.dtype)}, {TL_DTYPE[op.dtype]})"
        elif op.kind == "index_expr":
            assert op.dtype is not None
            e = self._sub(a[0], subs)
            level = self._level(e)
            text = (f"tl.full([], {int(e)}, {TL_DTYPE[op.dtype]})" if e.is_Integer
                    else f"({self.texpr(e)}).to({TL_DTYPE[op.dtype]})")
        elif op.kind == "to_dtype":
            src, level = self._ref(refs, a[0])
            dst = a[1]
            assert isinstance(dst, torch.dtype)
            text = f"({src} != 0)" if dst == torch.bool else cast_text(src, dst, self.interpret)
        elif op.kind == "indirect":
            text, level = self._indirect(w, a, refs, var)
        elif op.kind == "rand":
            seed, _ = self._ref(refs, a[0])
            e = self._sub(a[1], subs)
            level = _max_level(self._level(e), "x")
            fn = "tl.randn" if a[2] else "tl.rand"
            const, rest = e.as_coeff_Add()
            # NOTE: the op's stream number sits in the high bits: int64 past the int32 index
            off = f"({self.texpr(rest)} + {self._zero(level)}).to(tl.int64) + {int(const)}"
            text = f"{fn}({seed}, {off})"
        else:
            args = [self._ref(refs, x) for x in a]
            level = _max_level(*(lv for _, lv in args))
            text = compute_text(
                op, [t for t, _ in args], w.add, str(len(w.lines)),
                lambda bad, v: self._check(w, bad, v, _max_level(level, "x"), ZERO_DIVISION))
        w.add(f"{var} = {text}")
        refs[op_id] = (var, level)
        if op.kind == "indirect":
            self._indirect_levels[var] = level

    def _indirect(self, w: _Lines, a: tuple[object, ...], refs: dict[int, tuple[str, str]],
                  var: str) -> tuple[str, str]:
        x, level = self._ref(refs, a[0])
        size = int(a[1])  # type: ignore[call-overload]
        wrap = bool(a[2])
        check = a[3] if len(a) > 3 else None
        raw = f"{var}_raw"
        w.add(f"{raw} = {x}")
        if wrap:
            w.add(f"{raw} = tl.where({raw} < 0, {raw} + {size}, {raw})")
        if not isinstance(check, KernelCheck):
            return raw, level
        bad = f"{var}_bad"
        w.add(f"{bad} = ({raw} < 0) | ({raw} >= {size})")
        self._check(w, bad, x, level, check)
        return f"tl.where({bad}, 0, {raw})", level

    # -- memory ------------------------------------------------------------------------
    def _load(self, name: str, idx: sympy.Expr, node_level: str) -> tuple[str, str]:
        dtype = self.buffers[name].dtype
        cdt = compute_dtype(dtype)
        stored = self.values.get(name)
        if stored is not None:
            var, level = stored
            if cdt != dtype:  # NOTE: a half value is rounded as eager's buffer would be
                return f"{cast_text(var, dtype, self.interpret)}.to({TL_DTYPE[cdt]})", level
            return var, level
        param = self.params[name]
        if any(s == 0 for s in self.buffers[name].layout.size):
            # NOTE: an empty buffer has no element to read (a lowering reads one only where
            # a select discards the value): never an address past its storage
            text = f"tl.full([], 0, {TL_DTYPE[dtype]})"
            level = "c"
        elif name in self.scalars:
            text = param
            level = "c"
        else:
            level = self._level(idx)
            mask = self._mask(level)
            ptr = f"{param} + {self.texpr(idx)}"
            text = f"tl.load({ptr}, mask={mask}, other=0)" if mask else f"tl.load({ptr})"
        if cdt != dtype:
            text = f"{text}.to({TL_DTYPE[cdt]})"
        return text, level

    def _store(self, w: _Lines, name: str, idx: sympy.Expr, value: str, level: str) -> None:
        self.values[name] = (value, level)
        if name in self.group.local:
            return
        dtype = self.buffers[name].dtype
        if compute_dtype(dtype) != dtype:
            value = cast_text(value, dtype, self.interpret)
        ilevel = self._level(idx)
        level = _max_level(level, ilevel, "x")
        ptr = f"{self.params[name]} + {self.texpr(idx)}"
        if ilevel != level:
            ptr += f" + {self._zero(level)}"
        w.add(f"tl.store({ptr}, {value}, mask={self._mask(level)})")
        self._stored_in_loop.add(name)

    # -- kernels -----------------------------------------------------------------------
    def _prologue(self, w: _Lines) -> None:
        R = self.rnumel
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        if not self.reduction:
            w.add(f"xflat = {pid} * XBLOCK + tl.arange(0, XBLOCK)")
            w.add(f"xmask = xflat < {self.texpr(sympy.sympify(self.xnumel * R))}")
            w.add("xzero = xflat * 0")
            if more_than_one(R):
                w.add(f"xidx = xflat // {self.texpr(sympy.sympify(R))}")
                w.add(f"ridx = xflat % {self.texpr(sympy.sympify(R))}")
            else:
                w.add("xidx = xflat")
        else:
            w.add(f"xidx = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
            w.add(f"xmask = xidx < {self.texpr(sympy.sympify(self.xnumel))}")
            w.add("xzero = xidx * 0")
            w.add("rzero = tl.zeros([1, RBLOCK], tl.int32)")
        outer = self.group.outer
        for j, size in enumerate(outer):
            stride = math.prod(outer[j + 1:])
            e = "xidx" if stride == 1 else f"(xidx // {self.texpr(sympy.sympify(stride))})"
            if j > 0:
                e = f"({e} % {self.texpr(sympy.sympify(size))})"
            w.add(f"{outer_symbol(j)} = {e}")
            self._ranges[outer_symbol(j)] = size

    def _inner_decomposition(self, w: _Lines) -> None:
        for inner, key in self.inner_names.items():
            for j, size in enumerate(inner):
                stride = math.prod(inner[j + 1:])
                e = "ridx" if stride == 1 else f"(ridx // {self.texpr(sympy.sympify(stride))})"
                if j > 0:
                    e = f"({e} % {self.texpr(sympy.sympify(size))})"
                w.add(f"r{key}_{j} = {e}")

    def generate(self) -> TritonKernel:
        self._ranges: dict[sympy.Symbol, int] = {}
        self._indirect_levels: dict[str, str] = {}
        self._extent_mask = None
        self._stored_in_loop: set[str] = set()
        prepared = [(ni, n, *self._node_subs(ni, n)) for ni, n in enumerate(self.group.nodes)]
        w = _Lines()
        self._prologue(w)
        if not self.reduction:
            self._inner_decomposition(w)
            for ni, n, subs, inner in prepared:
                assert n.body is not None
                self._enter(w, ni)
                level = "r" if inner else "x"
                self._emit_ops(w, ni, n, range(len(n.body.ops)), subs, {}, level)
        elif self.persistent:
            self._persistent(w, prepared)
        elif self.one_block:
            # NOTE: a row of symbolic length: one block per row (`ONE_BLOCK`, when the
            # launcher's RBLOCK covers this call's rows), else looped over blocks
            w.add("if ONE_BLOCK:")
            w.level += 1
            self._persistent(w, prepared)
            w.level -= 1
            self.values.clear()
            self._loads.clear()
            self._stored_in_loop.clear()
            w.add("else:")
            w.level += 1
            self._looped(w, prepared)
            w.level -= 1
        else:
            self._looped(w, prepared)
        return self._finish(w)

    def _persistent(self, w: _Lines, prepared: list[tuple[int, ComputedBuffer,
                                                          dict[sympy.Symbol, sympy.Expr],
                                                          tuple[int, ...]]]) -> None:
        w.add("ridx = tl.arange(0, RBLOCK)[None, :]")
        w.add(f"rmask = ridx < {self.texpr(sympy.sympify(self.rnumel))}")
        self._inner_decomposition(w)
        for ni, n, subs, inner in prepared:
            self._persistent_node(w, ni, n, subs, inner)

    def _persistent_node(self, w: _Lines, ni: int, n: ComputedBuffer,
                         subs: dict[sympy.Symbol, sympy.Expr], inner: tuple[int, ...]) -> None:
        body = n.body
        assert body is not None
        refs: dict[int, tuple[str, str]] = {}
        self._enter(w, ni)
        level = "r" if inner else "x"
        red = _red_pos(body)
        if red is None:
            self._emit_ops(w, ni, n, range(len(body.ops)), subs, refs, level)
            return
        self._emit_ops(w, ni, n, range(red), subs, refs, "r")
        op = body.ops[red]
        var = f"n{ni}_t{red}"
        kind = str(op.args[0])
        v, vlevel = self._ref(refs, op.args[1])
        vt = _ref_dtype(op.args[1])
        init = reduction_init(kind, vt)
        full = f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])" if vlevel != "r" else v
        masked = f"tl.where({self._rmask()}, {full}, {init})"
        if kind in ("argmax", "argmin"):
            i, _ = self._ref(refs, op.args[2])
            idx = f"tl.broadcast_to({i}, [XBLOCK, RBLOCK])"
            w.add(f"{var}_v, {var} = tl.reduce(({masked}, {idx}), 1, _{kind})")
            w.add(f"{var} = {var}[:, None]")
        else:
            w.add(f"{var} = {reduce_text(kind, masked)}[:, None]")
        refs[red] = (var, "x")
        self._emit_ops(w, ni, n, range(red + 1, len(body.ops)), subs, refs, "x")

    def _looped(self, w: _Lines, prepared: list[tuple[int, ComputedBuffer,
                                                     dict[sympy.Symbol, sympy.Expr],
                                                     tuple[int, ...]]]) -> None:
        segments: list[list[int]] = []
        current: list[int] | None = None
        current_reds: set[str] = set()
        self._welford = match_welford(prepared, self._sub)
        for pos, (ni, n, _, inner) in enumerate(prepared):
            assert n.body is not None
            reads = {b for b, _ in n.body.reads()}
            if ni in self._welford:  # NOTE: computed without the mean it reads
                reads.discard(self._welford[ni].mean_of)
            if not inner and not n.body.is_reduction:
                current = None
                segments.append([pos])
                continue
            if current is None or reads & current_reds:
                current = []
                current_reds = set()
                segments.append(current)
            current.append(pos)
            if n.body.is_reduction:
                current_reds.add(n.name)
        stored_before: set[str] = set()
        for seg in segments:
            nodes = [prepared[p] for p in seg]
            ni, n, subs, inner = nodes[0]
            assert n.body is not None
            if len(seg) == 1 and not inner and not n.body.is_reduction:
                self._enter(w, ni)
                self._emit_ops(w, ni, n, range(len(n.body.ops)), subs, {}, "x")
                continue
            self._loop_segment(w, nodes, stored_before)

    def _loop_segment(self, w: _Lines, nodes: list[tuple[int, ComputedBuffer,
                                                          dict[sympy.Symbol, sympy.Expr],
                                                          tuple[int, ...]]],
                      stored_before: set[str]) -> None:
        reads: set[str] = set()
        for _, n, _, _ in nodes:
            assert n.body is not None
            reads |= {b for b, _ in n.body.reads()}
        if reads & stored_before:
            w.add("tl.debug_barrier()")
        accs: list[tuple[int, ComputedBuffer, str, torch.dtype]] = []
        for ni, n, _, _ in nodes:
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
                accs.append((ni, n, kind, vt))
                continue
            w.add(f"{acc} = tl.full([XBLOCK, RBLOCK], {reduction_init(kind, vt)}, "
                  f"{TL_DTYPE[vt]})")
            if kind in ("argmax", "argmin"):
                w.add(f"{acc}_i = tl.full([XBLOCK, RBLOCK], {2**62}, tl.int64)")
            accs.append((ni, n, kind, vt))
        rnumel = self.texpr(sympy.sympify(self.rnumel))
        w.add(f"for roffset in range(0, {rnumel}, RBLOCK):")
        w.level += 1
        self._loads.clear()
        w.add("ridx = roffset + tl.arange(0, RBLOCK)[None, :]")
        w.add(f"rmask = ridx < {rnumel}")
        self._inner_decomposition(w)
        refs_by_node: dict[int, dict[int, tuple[str, str]]] = {}
        loop_values: list[str] = []
        for ni, n, subs, _ in nodes:
            body = n.body
            assert body is not None
            refs: dict[int, tuple[str, str]] = {}
            refs_by_node[ni] = refs
            self._enter(w, ni)
            red = _red_pos(body)
            end = len(body.ops) if red is None else red
            if ni in self._welford:
                self._welford_step(w, ni, n, subs, refs)
                continue
            self._emit_ops(w, ni, n, range(end), subs, refs, "r")
            if red is None:
                loop_values.append(n.name)
                continue
            op = body.ops[red]
            kind = str(op.args[0])
            v, vlevel = self._ref(refs, op.args[1])
            full = f"tl.broadcast_to({v}, [XBLOCK, RBLOCK])" if vlevel != "r" else v
            acc = f"n{ni}_acc"
            if kind in ("argmax", "argmin"):
                i, _ = self._ref(refs, op.args[2])
                idx = f"tl.broadcast_to({i}, [XBLOCK, RBLOCK])"
                w.add(f"{acc}_nv, {acc}_ni = _{kind}({acc}, {acc}_i, {full}, {idx})")
                w.add(f"{acc} = tl.where({self._rmask()}, {acc}_nv, {acc})")
                w.add(f"{acc}_i = tl.where({self._rmask()}, {acc}_ni, {acc}_i)")
            else:
                comb = {"sum": f"{acc} + {full}", "prod": f"{acc} * {full}",
                        "max": f"_maximum({acc}, {full})", "min": f"_minimum({acc}, {full})",
                        "any": f"{acc} | ({full} != 0)", "all": f"{acc} & ({full} != 0)"}[kind]
                w.add(f"{acc} = tl.where({self._rmask()}, {comb}, {acc})")
        w.level -= 1
        self._loads.clear()
        self._extent_mask = None
        for name in loop_values:
            # NOTE: r-level values live in the loop; later loops load them from memory.
            self.values.pop(name, None)
            stored_before.add(name)
        for ni, n, kind, vt in accs:
            body = n.body
            assert body is not None
            red = _red_pos(body)
            assert red is not None
            var = f"n{ni}_t{red}"
            acc = f"n{ni}_acc"
            if kind in ("argmax", "argmin"):
                w.add(f"{var}_v, {var} = tl.reduce(({acc}, {acc}_i), 1, _{kind})")
                w.add(f"{var} = {var}[:, None]")
            elif kind == "welford":
                w.add(f"{var}_m, {var}, {var}_n = tl.reduce(({acc}_m, {acc}_2, {acc}_n), 1, "
                      "_welford)")
                w.add(f"{var} = {var}[:, None]")
            else:
                w.add(f"{var} = {reduce_text(kind, acc)}[:, None]")
            refs = {red: (var, "x")}
            subs = next(s for i, _, s, _ in nodes if i == ni)
            self._emit_ops(w, ni, n, range(red + 1, len(body.ops)), subs, refs, "x")

    def _welford_step(self, w: _Lines, ni: int, n: ComputedBuffer,
                      subs: dict[sympy.Symbol, sympy.Expr],
                      refs: dict[int, tuple[str, str]]) -> None:
        """One element into the node's Welford accumulators (`codegen/triton_welford.py`)."""
        body = n.body
        assert body is not None
        for op_id in self._welford[ni].chain:
            self._emit_op(w, ni, op_id, body.ops[op_id], subs, refs, "r")
        v, _ = refs[self._welford[ni].chain[-1]]
        acc = f"n{ni}_acc"
        m = self._rmask()
        w.add(f"{acc}_c = tl.where({m}, {acc}_n + 1, {acc}_n)")
        w.add(f"{acc}_d = {v} - {acc}_m")
        w.add(f"{acc}_m = tl.where({m}, {acc}_m + {acc}_d / tl.where({m}, {acc}_c, 1), "
              f"{acc}_m)")
        w.add(f"{acc}_2 = tl.where({m}, {acc}_2 + {acc}_d * ({v} - {acc}_m), {acc}_2)")
        w.add(f"{acc}_n = {acc}_c")

    def kernel_params(self) -> tuple[list[str], list[str], tuple[str, ...]]:
        """The kernel's buffer names and argument names in call order (the error slots last
        when it checks) and the arguments that are seeds."""
        names = list(self.params)
        args = [self.params[n] for n in names]
        seeds = tuple(self.params[n] for n in names if n in self.scalars)
        if self.checks:
            names.append(ERR_PARAM)
            args.append("kernel_err")
        return names, args, seeds

    def _finish(self, w: _Lines) -> TritonKernel:
        names, args, seeds = self.kernel_params()
        sizes: tuple[str, ...] = ()
        numels = ""
        if self.symbolic:
            used = size_symbols(self.xnumel, self.rnumel) | {
                sympy.Symbol(m, integer=True) for line in w.lines
                for m in _SIZE_SYMBOL.findall(line)}
            sizes = tuple(sorted({str(u) for u in used}, key=lambda n: int(n[1:])))
            args += sizes
            # NOTE: sizes take every value: no recompile per value class on the GPU
            seeds += sizes
            numels = f"({pyexpr(sympy.sympify(self.xnumel))}, {pyexpr(sympy.sympify(self.rnumel))})"
        constexprs = ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        if self.one_block:
            constexprs.append("ONE_BLOCK: tl.constexpr")
        sig = ", ".join([*args, *constexprs])
        kernel_text = f"{self.decorator(seeds)}\ndef KERNEL_NAME({sig}):\n" + "\n".join(w.lines) + "\n"
        header = module_header(self.interpret)
        if self._welford:
            header += WELFORD_HELPER
        source = header + "\n\n" + self.dtypes_comment() + kernel_text
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        name = f"triton_{digest}"
        return TritonKernel(
            name, source.replace("KERNEL_NAME", name), tuple(names), tuple(self.checks),
            frozenset(self.scalars), str(self.device), self.xnumel, self.rnumel,
            self.reduction, self.persistent, self._configs(), self.interpret, self.inplace,
            seeds, sizes=sizes, numels=numels, one_block=self.one_block, debug=self.asserts)

    def _configs(self) -> tuple[tuple[int, int, int], ...]:
        # NOTE: symbolic sizes: chosen from the example's sizes here (the launcher chooses
        # again for each call's sizes, `triton_configs`)
        return triton_configs(size_hint(self.xnumel), size_hint(self.rnumel), self.reduction,
                              self.persistent, self.interpret)


def _red_pos(body: LoopBody) -> int | None:
    return next((i for i, op in enumerate(body.ops) if op.kind == "reduction"), None)


def _ref_dtype(r: object) -> torch.dtype:
    assert isinstance(r, Ref)
    return r.dtype


def generate_triton(group: FusedGroup, buffers: dict[str, Buffer], *,
                    interpret: bool) -> TritonKernel:
    """The Triton kernel of `group` (`interpret`: for Triton's interpreter on the CPU);
    split reductions are generated by `codegen/triton_split.py`."""
    return TritonGen(group, buffers, interpret).generate()
