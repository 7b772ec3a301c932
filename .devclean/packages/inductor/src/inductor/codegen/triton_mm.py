"""Triton matmul templates (`max_autotune`): the kernel of a group that starts with a
`MatmulBuffer` (`lowering/matmul.py`) and holds its pointwise consumers.

In: the group (the matmul, then epilogue nodes over the same outer point: bias, activation,
residual add). Out: a `TritonKernel` whose `matmul` plan carries the template's candidate
configurations and the ATen alternative (the call, then the epilogue as a kernel of its own).

The template tiles the output in `[BLOCK_M, BLOCK_N]` blocks (programs grouped by GROUP_M
rows of blocks, so neighbours share operand tiles in L2; a bmm's batch is the grid's second
axis), walks k in BLOCK_K steps with masked loads (ragged edges), operands loaded in their
own dtype and multiplied by `tl.dot` into a float32 accumulator. The epilogue is the group's
own code (`TritonGen`), over the block's output coordinates, reading the accumulator where
it would load the matmul's buffer; the buffer is stored only when something else reads it.
Under Triton's interpreter (numpy has no bfloat16 dot) half operands are widened to float32
before the dot: products of halves are exact in float32, as on a GPU.
"""

from __future__ import annotations

import hashlib
import math

import torch

from inductor import config
from inductor.codegen.triton import (
    INT32_MAX,
    MatmulPlan,
    TritonGen,
    TritonKernel,
    _Lines,
    _red_pos,
)
from inductor.codegen.triton_prelude import module_header
from inductor.codegen.triton_split import generate_triton_kernel
from inductor.ir.nodes import Buffer, BufferView, ComputedBuffer, MatmulBuffer
from inductor.lowering.matmul import matmul_dims
from inductor.scheduler.fusion import FusedGroup, outer_symbol, split_node

GROUP_M = 8
Config = tuple[int, int, int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages


def is_matmul_group(group: FusedGroup) -> bool:
    """Whether the group is a matmul template's (its first node a `MatmulBuffer`)."""
    return isinstance(group.nodes[0], MatmulBuffer)


def matmul_can_fuse(group: FusedGroup, node: ComputedBuffer, outer: tuple[int, ...]) -> bool:
    """A matmul starts its own group; a matmul's group takes pointwise nodes over its
    output's points only (no reduction, no inner loops)."""
    if isinstance(node, MatmulBuffer):
        return False
    if not is_matmul_group(group):
        return True
    assert node.body is not None
    if node.body.is_reduction:
        return False
    sp = split_node(node.body, outer)
    return sp is not None and math.prod(sp.inner_ranges) == 1


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def matmul_configs(m: int, n: int, k: int, half: bool, interpret: bool) -> tuple[Config, ...]:
    """Candidate (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), blocks no larger than the
    problem (at least 16, what `tl.dot` takes)."""

    def fit(bm: int, bn: int, bk: int, warps: int, stages: int) -> Config:
        return (min(bm, max(16, _pow2(m))), min(bn, max(16, _pow2(n))),
                min(bk, max(16, _pow2(k))), warps, stages)

    if interpret:
        return (fit(64, 64, 32, 4, 1),)
    if half:
        cands = [(128, 128, 64, 8, 3), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4),
                 (64, 64, 64, 4, 3), (64, 32, 32, 4, 5)]
    else:
        cands = [(128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
                 (64, 64, 32, 4, 3), (32, 64, 32, 4, 5)]
    return tuple(dict.fromkeys(fit(*c) for c in cands))


def _operand(v: BufferView | None) -> tuple[str, tuple[int, ...], tuple[int, ...], int]:
    assert v is not None
    lay = v.layout
    return (v.buffer.name, tuple(int(s) for s in lay.size), tuple(int(s) for s in lay.stride),
            int(lay.offset))


class MatmulTemplateGen(TritonGen):
    """The template kernel of a matmul group (see the module docstring)."""

    def __init__(self, group: FusedGroup, buffers: dict[str, Buffer], interpret: bool) -> None:
        super().__init__(group, buffers, interpret)
        mb = group.nodes[0]
        assert isinstance(mb, MatmulBuffer) and mb.a is not None and mb.b is not None
        self.mb = mb
        self.dims = matmul_dims(mb)
        # NOTE: the epilogue reads what the group computed at the same point earlier in the
        # same program (fusion legality), which a re-run for timing computes again; only a
        # node storing under another name (a mutated input) makes the kernel unsafe to re-run
        self.inplace = any(name != n.name for n in group.nodes
                           for name, _ in (n.body.writes() if n.body is not None else []))

    def _needs_int64(self) -> bool:
        """int64 offsets when the output or an operand's storage passes 2^30 elements (the
        k loop's product is not an index)."""
        sizes = [self.xnumel]
        for name in self.params:
            lay = self.buffers[name].layout
            sizes.append(lay.storage_size() + abs(lay.offset))
        return max(sizes) > INT32_MAX // 2

    def _offsets(self, v: BufferView, rows: str, cols: str) -> str:
        """`v`'s element offsets at (`rows`, `cols`) of this program's batch."""
        lay = v.layout
        terms = [str(int(lay.offset))] if int(lay.offset) else []
        if len(lay.size) == 3 and self.dims[0] > 1:
            terms.append(f"pid_b * {int(lay.stride[0])}")
        for idx, stride in ((rows, int(lay.stride[-2])), (cols, int(lay.stride[-1]))):
            terms.append(idx if stride == 1 else f"{idx} * {stride}")
        return " + ".join(terms)

    def _main_loop(self, w: _Lines) -> None:
        batch, m, n, k = self.dims
        a, b = self.mb.a, self.mb.b
        assert a is not None and b is not None
        w.add("pid = tl.program_id(0)")
        if batch > 1:
            w.add("pid_b = tl.program_id(1)")
        w.add(f"grid_m = ({m} + BLOCK_M - 1) // BLOCK_M")
        w.add(f"grid_n = ({n} + BLOCK_N - 1) // BLOCK_N")
        w.add("width = GROUP_M * grid_n")
        w.add("group_id = pid // width")
        w.add("group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)")
        w.add("pid_m = group_id * GROUP_M + (pid % group_size)")
        w.add("pid_n = (pid % width) // group_size")
        w.add("rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
        w.add("rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        if self.int64:
            w.add("rm = rm.to(tl.int64)")
            w.add("rn = rn.to(tl.int64)")
            if batch > 1:
                w.add("pid_b = pid_b.to(tl.int64)")
        w.add("acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)")
        w.add(f"for k0 in range(0, {k}, BLOCK_K):")
        w.level += 1
        w.add("rk = k0 + tl.arange(0, BLOCK_K)")
        pa, pb = self.params[a.buffer.name], self.params[b.buffer.name]
        w.add(f"a = tl.load({pa} + ({self._offsets(a, 'rm[:, None]', 'rk[None, :]')}), "
              f"mask=(rm[:, None] < {m}) & (rk[None, :] < {k}), other=0.0)")
        w.add(f"b = tl.load({pb} + ({self._offsets(b, 'rk[:, None]', 'rn[None, :]')}), "
              f"mask=(rk[:, None] < {k}) & (rn[None, :] < {n}), other=0.0)")
        w.add(f"acc += {self._dot()}")
        w.level -= 1

    def _dot(self) -> str:
        dtype = self.mb.layout.dtype
        if dtype == torch.float32:
            # NOTE: eager's float32 matmul rounds like IEEE products unless TF32 is allowed
            tf32 = (not self.interpret and torch.backends.cuda.matmul.allow_tf32)
            return f"tl.dot(a, b, input_precision={'tf32' if tf32 else 'ieee'!r})"
        if self.interpret:
            return "tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision='ieee')"
        return "tl.dot(a, b)"

    def _coordinates(self, w: _Lines) -> None:
        """The group's outer loop symbols at each element of the output block: the group's
        loops refine the matmul's (batch,) M, N dims."""
        batch, m, n, _ = self.dims
        w.add("xm = rm[:, None] + rn[None, :] * 0")
        w.add("xn = rn[None, :] + rm[:, None] * 0")
        w.add(f"xmask = (xm < {m}) & (xn < {n})")
        w.add("xzero = xm * 0")
        assert self.mb.body is not None
        ranges = self.mb.body.index_ranges
        coords = ["(pid_b + xzero)", "xm", "xn"][3 - len(ranges):]
        if len(ranges) == 3 and batch == 1:
            raise NotImplementedError("a batch of one is squeezed out of the matmul's loops")
        outer = self.group.outer
        j = 0
        for size, coord in zip(ranges, coords):
            mine: list[int] = []
            covered = 1
            while covered < int(size) and j < len(outer):
                mine.append(j)
                covered *= int(outer[j])
                j += 1
            if covered != int(size):
                raise NotImplementedError("the group's loops do not refine the matmul's")
            for pos, jj in enumerate(mine):
                stride = math.prod(int(s) for s in outer[jj + 1:mine[-1] + 1])
                e = coord if stride == 1 else f"({coord} // {stride})"
                if pos > 0:
                    e = f"({e} % {int(outer[jj])})"
                w.add(f"{outer_symbol(jj)} = {e}")
                self._ranges[outer_symbol(jj)] = outer[jj]
        if j != len(outer):
            raise NotImplementedError("the group's loops do not refine the matmul's")

    def generate(self) -> TritonKernel:
        """The template kernel, with its plan (configurations, the ATen alternative)."""
        self._ranges = {}
        self._indirect_levels = {}
        self._stored_in_loop = set()
        prepared = [(ni, n, *self._node_subs(ni, n)) for ni, n in enumerate(self.group.nodes)]
        w = _Lines()
        self._main_loop(w)
        self._coordinates(w)
        _, mb, subs, _ = prepared[0]
        assert mb.body is not None
        red = _red_pos(mb.body)
        assert red is not None
        self._emit_ops(w, 0, mb, range(red + 1, len(mb.body.ops)), subs, {red: ("acc", "x")},
                       "x")
        for ni, n, subs, _ in prepared[1:]:
            assert n.body is not None
            self._emit_ops(w, ni, n, range(len(n.body.ops)), subs, {}, "x")
        return self._finish_template(w)

    def _epilogue(self) -> TritonKernel | None:
        """The group without the matmul, as the kernel run after ATen's call."""
        if len(self.group.nodes) == 1:
            return None
        group = FusedGroup(list(self.group.nodes[1:]), self.group.outer,
                           set(self.group.local) - {self.mb.name})
        epilogue = generate_triton_kernel(group, self.buffers, interpret=self.interpret)
        if (epilogue.checks != tuple(self.checks) or epilogue.debug != self.asserts
                or epilogue.split > 1 or epilogue.sizes):
            return None  # NOTE: the wrapper's error slots must mean the same in both
        return epilogue

    def _finish_template(self, w: _Lines) -> TritonKernel:
        names, args, seeds = self.kernel_params()
        constexprs = ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr",
                      "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"]
        sig = ", ".join([*args, *constexprs])
        kernel_text = f"{self.decorator(seeds)}\ndef KERNEL_NAME({sig}):\n" + "\n".join(w.lines) + "\n"
        source = module_header(self.interpret) + "\n\n" + self.dtypes_comment() + kernel_text
        name = f"triton_mm_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
        batch, m, n, k = self.dims
        epilogue = self._epilogue()
        setting = config.options.mm_template
        choice = "template" if setting == "always" else "aten" if self.interpret else "auto"
        if epilogue is None and len(self.group.nodes) > 1:
            choice = "template"
        mb = self.mb
        op = {torch.ops.aten.mm.default: "mm", torch.ops.aten.addmm.default: "addmm",
              torch.ops.aten.bmm.default: "bmm"}[mb.op]  # type: ignore[index]
        half = mb.layout.dtype != torch.float32
        plan = MatmulPlan(
            op, self.dims, _operand(mb.a), _operand(mb.b),
            _operand(mb.bias) if mb.bias is not None else None, mb.alpha, mb.beta,
            (mb.name, tuple(int(s) for s in mb.layout.size),
             tuple(int(s) for s in mb.layout.stride), 0),
            matmul_configs(m, n, k, half, self.interpret), choice, epilogue,
            has_aten=epilogue is not None or len(self.group.nodes) == 1)
        return TritonKernel(
            name, source.replace("KERNEL_NAME", name), tuple(names), tuple(self.checks),
            frozenset(self.scalars), str(self.device), batch * m * n, k, False, False,
            interpret=self.interpret, inplace=self.inplace, seeds=seeds, matmul=plan,
            debug=self.asserts)


def generate_matmul_template(group: FusedGroup, buffers: dict[str, Buffer], *,
                             interpret: bool) -> TritonKernel:
    """The kernel of a matmul group: the template (with its ATen alternative); a group
    whose loops the template cannot cover gets the generic kernel (the matmul as a
    reduction: slow, never wrong)."""
    try:
        return MatmulTemplateGen(group, buffers, interpret).generate()
    except NotImplementedError:
        return generate_triton_kernel(group, buffers, interpret=interpret)
