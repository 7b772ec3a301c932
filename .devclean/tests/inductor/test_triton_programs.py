"""Whole programs through `compiler.compile(..., backend="inductor")` with the Triton
target: a matmul with its epilogue, a training step, dropout repeatable under
`torch.manual_seed`; and golden tests printing the generated Triton of small programs
(regenerate with `EXPECTTEST_ACCEPT=1`)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import expecttest
import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import config
from inductor.codegen.triton import TritonKernel
from inductor.ir.printer import normalize_kernel_names
from inductor.pipeline import plan
from inductor.scheduler.fusion import format_schedule
from tests_inductor_support import needs_compiler
from triton_support import DEVICE, OPTIONS, check, randn, triton_kernels


def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    import compiler

    compiler.reset()
    return compiler.compile(fn, backend="inductor", options={"cpu_backend": "triton"})


def test_matmul_epilogue_is_one_kernel_after_the_extern_call() -> None:
    w, b, r = randn(16, 8), randn(8), randn(4, 8)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x @ w + b) + r

    compiled = check(f, [randn(4, 16)], kernels=1, atol=1e-4, rtol=1e-4)
    assert sum(compiled.extern_calls.values()) == 1, compiled.extern_calls


@needs_compiler
def test_training_step_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(),
                                torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)).to(DEVICE)
    x, target = randn(6, 12), torch.randint(0, 3, (6,), device=DEVICE)

    def step(m: torch.nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
        for p in m.parameters():
            p.grad = None
        loss = F.cross_entropy(m(x), target)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters() if p.grad is not None]

    want_loss, want_grads = step(model)
    compiled = _compile(model)
    got_loss, got_grads = step(compiled)  # type: ignore[arg-type]
    torch.testing.assert_close(got_loss, want_loss, atol=1e-5, rtol=1e-5)
    assert len(got_grads) == len(want_grads) == 6
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)


@needs_compiler
def test_bfloat16_training_step_is_as_close_to_float64_as_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(),
                                torch.nn.LayerNorm(32), torch.nn.Linear(32, 5)).to(DEVICE)
    x, target = randn(16, 12), torch.randint(0, 5, (16,), device=DEVICE)

    def step(m: torch.nn.Module, dtype: torch.dtype) -> list[torch.Tensor]:
        for p in m.parameters():
            p.grad = None
        loss = F.cross_entropy(m(x.to(dtype)).float(), target)
        loss.backward()
        return [loss.detach()] + [p.grad.double() for p in m.parameters()
                                  if p.grad is not None]

    ref = step(copy.deepcopy(model).double(), torch.float64)
    eager = step(copy.deepcopy(model).bfloat16(), torch.bfloat16)
    bf16 = copy.deepcopy(model).bfloat16()
    got = step(_compile(bf16), torch.bfloat16)  # type: ignore[arg-type]
    assert all(p.grad.dtype == torch.bfloat16 for p in bf16.parameters())  # type: ignore[union-attr]
    assert len(got) == len(eager) == 7
    for g, e, r in zip(got, eager, ref):
        err, eager_err = (g.double() - r).abs().max().item(), (e.double() - r).abs().max().item()
        assert err <= 2 * eager_err + 1e-3 * r.abs().max().item(), (err, eager_err)

@needs_compiler
def test_dropout_is_repeatable_under_manual_seed() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.5, training=True) * 2

    g = _compile(f)
    x = torch.ones(64, 64, device=DEVICE)
    torch.manual_seed(3)
    a = g(x)
    torch.manual_seed(3)
    b = g(x)
    c = g(x)
    assert torch.equal(a, b)
    assert not torch.equal(b, c)
    kept = (a != 0).float().mean().item()
    assert 0.44 < kept < 0.56, kept  # NOTE: 4096 draws: 6 standard errors
    assert set(torch.unique(a).tolist()) <= {0.0, 4.0}


@needs_compiler
def test_rand_and_randn_moments() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rand_like(x), torch.randn_like(x)

    u, n = _compile(f)(torch.empty(128, 64, device=DEVICE))
    assert abs(u.mean().item() - 0.5) < 0.03 and 0.0 <= u.min().item() and u.max().item() < 1
    assert abs(n.mean().item()) < 0.06 and abs(n.std().item() - 1) < 0.06


def render(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> str:
    """The schedule, the wrapper and each kernel's function (imports and helpers left out)
    of `fn` on CPU tensors for the interpreter."""
    gm = trace_aten(fn, inputs)
    with config.patch(OPTIONS):
        p = plan(gm, inputs)
    parts = ["# schedule", format_schedule(p.steps), "# wrapper", p.wrapper_source.rstrip()]
    for k in p.kernels.values():
        assert isinstance(k, TritonKernel)
        text = k.source[k.source.index("@triton.jit\ndef triton_"):]
        split = f" split={k.split}" if k.split > 1 else ""
        split += f" tile={k.tile}" if k.tile else ""
        parts += [f"# configs {k.configs} persistent={k.persistent}{split}", text.rstrip()]
    # NOTE: content-hash names (they hash the argument dtypes too) become kernel0, ...
    text = re.sub(r"triton_(mm_)?([0-9a-f]{16})", r"kernel_\2", "\n".join(parts))
    return normalize_kernel_names(text).replace("triton_", "kernel") + "\n"


class TestTritonGolden(expecttest.TestCase):
    def test_pointwise_broadcast(self) -> None:
        def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x * 2 + y) - 1

        self.assertExpectedInline(render(f, [torch.randn(8, 16), torch.randn(16)]), """\
# schedule
step0: kernel outer=(8, 16) nodes=['buf0']
# wrapper
def call(arg0, arg1):
    buf0 = empty_strided((8, 16), (16, 1), dtype=torch.float32)
    kernel0(arg0, arg1, buf0)
    return (buf0,)
# configs ((128, 1, 4),) persistent=False
@triton.jit
def kernel0(in_ptr0, in_ptr1, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xflat = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xflat < 128
    xzero = xflat * 0
    xidx = xflat
    x0 = (xidx // 16)
    x1 = (xidx % 16)
    n0_t0 = tl.load(in_ptr0 + ((16 * x0) + x1), mask=xmask, other=0)
    n0_t1 = tl.full([], 2.0, tl.float32)
    n0_t2 = (n0_t0 * n0_t1)
    n0_t3 = tl.load(in_ptr1 + x1, mask=xmask, other=0)
    n0_t4 = (n0_t2 + n0_t3)
    n0_t5 = (1.0 / (1.0 + tl.exp(-n0_t4)))
    n0_t6 = tl.full([], 1.0, tl.float32)
    n0_t7 = (n0_t5 - n0_t6)
    tl.store(out_ptr0 + ((16 * x0) + x1), n0_t7, mask=xmask)
""")

    def test_softmax_persistent(self) -> None:
        self.assertExpectedInline(render(lambda x: torch.softmax(x, -1),
                                         [torch.randn(4, 100)]), """\
# schedule
step0: kernel outer=(4,) nodes=['buf0', 'buf1', 'buf2'] local=['buf0', 'buf1']
# wrapper
def call(arg0):
    buf2 = empty_strided((4, 100), (100, 1), dtype=torch.float32)
    kernel0(arg0, buf2)
    return (buf2,)
# configs ((4, 128, 4),) persistent=True
@triton.jit
def kernel0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xidx = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xidx < 4
    xzero = xidx * 0
    rzero = tl.zeros([1, RBLOCK], tl.int32)
    x0 = xidx
    ridx = tl.arange(0, RBLOCK)[None, :]
    rmask = ridx < 100
    r0_0 = ridx
    n0_t0 = tl.load(in_ptr0 + (r0_0 + (100 * x0)), mask=xmask & rmask, other=0)
    n0_t1 = tl.reduce(tl.where(xmask & rmask, n0_t0, float('-inf')), 1, _maximum)[:, None]
    n1_t0 = n0_t0
    n1_t1 = n0_t1
    n1_t2 = (n1_t0 - n1_t1)
    n1_t3 = tl.exp(n1_t2)
    n1_t4 = tl.sum(tl.where(xmask & rmask, n1_t3, 0.0), 1)[:, None]
    n2_t0 = n0_t0
    n2_t1 = n0_t1
    n2_t2 = (n2_t0 - n2_t1)
    n2_t3 = tl.exp(n2_t2)
    n2_t4 = n1_t4
    n2_t5 = (1.0 / n2_t4)
    n2_t6 = (n2_t3 * n2_t5)
    tl.store(out_ptr0 + (r0_0 + (100 * x0)), n2_t6, mask=xmask & rmask)
""")

    def test_layer_norm_looped(self) -> None:
        w, b = torch.randn(2000), torch.randn(2000)
        self.assertExpectedInline(render(lambda x: F.layer_norm(x, (2000,), w, b),
                                         [torch.randn(3, 2000)]), """\
# schedule
step0: kernel outer=(3,) nodes=['buf0', 'buf1', 'buf4'] local=['buf0', 'buf1']
# wrapper
def call(arg0):
    buf4 = empty_strided((3, 2000), (2000, 1), dtype=torch.float32)
    kernel0(arg0, const2, const3, buf4)
    return (buf4,)
# configs ((4, 1024, 4),) persistent=False
@triton.jit
def kernel0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xidx = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xidx < 3
    xzero = xidx * 0
    rzero = tl.zeros([1, RBLOCK], tl.int32)
    x0 = xidx
    n0_acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    n1_acc_m = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    n1_acc_2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    n1_acc_n = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for roffset in range(0, 2000, RBLOCK):
        ridx = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = ridx < 2000
        r0_0 = ridx
        n0_t0 = tl.load(in_ptr0 + (r0_0 + (2000 * x0)), mask=xmask & rmask, other=0)
        n0_acc = tl.where(xmask & rmask, n0_acc + n0_t0, n0_acc)
        n1_t0 = n0_t0
        n1_acc_c = tl.where(xmask & rmask, n1_acc_n + 1, n1_acc_n)
        n1_acc_d = n1_t0 - n1_acc_m
        n1_acc_m = tl.where(xmask & rmask, n1_acc_m + n1_acc_d / tl.where(xmask & rmask, n1_acc_c, 1), n1_acc_m)
        n1_acc_2 = tl.where(xmask & rmask, n1_acc_2 + n1_acc_d * (n1_t0 - n1_acc_m), n1_acc_2)
        n1_acc_n = n1_acc_c
    n0_t1 = tl.sum(n0_acc, 1)[:, None]
    n0_t2 = tl.full([], 2000.0, tl.float32)
    n0_t3 = (n0_t1 / n0_t2)
    n1_t4_m, n1_t4, n1_t4_n = tl.reduce((n1_acc_m, n1_acc_2, n1_acc_n), 1, _welford)
    n1_t4 = n1_t4[:, None]
    n1_t5 = tl.full([], 2000.0, tl.float32)
    n1_t6 = (n1_t4 / n1_t5)
    for roffset in range(0, 2000, RBLOCK):
        ridx = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = ridx < 2000
        r0_0 = ridx
        n2_t0 = tl.load(in_ptr0 + (r0_0 + (2000 * x0)), mask=xmask & rmask, other=0)
        n2_t1 = n0_t3
        n2_t2 = (n2_t0 - n2_t1)
        n2_t3 = n1_t6
        n2_t4 = tl.full([], 1e-05, tl.float32)
        n2_t5 = (n2_t3 + n2_t4)
        n2_t6 = (1.0 / tl.sqrt_rn(n2_t5))
        n2_t7 = (n2_t2 * n2_t6)
        n2_t8 = tl.load(in_ptr1 + r0_0, mask=xmask & rmask, other=0)
        n2_t9 = (n2_t7 * n2_t8)
        n2_t10 = tl.load(in_ptr2 + r0_0, mask=xmask & rmask, other=0)
        n2_t11 = (n2_t9 + n2_t10)
        tl.store(out_ptr0 + (r0_0 + (2000 * x0)), n2_t11, mask=xmask & rmask)
""")

    def test_transpose_is_a_2d_tile(self) -> None:
        self.assertExpectedInline(render(lambda x: x.t().contiguous() + 1,
                                         [torch.randn(32, 48)]), """\
# schedule
step0: kernel outer=(48, 32) nodes=['buf0']
# wrapper
def call(arg0):
    buf0 = empty_strided((48, 32), (32, 1), dtype=torch.float32)
    kernel0(arg0, buf0)
    return (buf0,)
# configs ((32, 32, 4),) persistent=False tile=(32, 48, 1)
@triton.jit
def kernel0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tx = pid % tl.cdiv(32, XBLOCK)
    ty = (pid // tl.cdiv(32, XBLOCK)) % tl.cdiv(48, RBLOCK)
    tz = pid // (tl.cdiv(32, XBLOCK) * tl.cdiv(48, RBLOCK))
    xi = tx * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    yi = ty * RBLOCK + tl.arange(0, RBLOCK)[:, None]
    xmask = (xi < 32) & (yi < 48)
    xzero = xi * 0 + yi * 0
    x0 = yi
    x1 = xi
    n0_t0 = tl.load(in_ptr0 + (x0 + (48 * x1)), mask=xmask, other=0)
    n0_t1 = tl.full([], 1.0, tl.float32)
    n0_t2 = (n0_t0 + n0_t1)
    tl.store(out_ptr0 + ((32 * x0) + x1), n0_t2, mask=xmask)
""")

    def test_split_full_sum_is_partials_then_final(self) -> None:
        # NOTE: 2^16 elements: 16 programs of 4096 (the partials), then one final program
        self.assertExpectedInline(render(lambda x: x.sum() * 2, [torch.randn(256, 256)]), """\
# schedule
step0: kernel outer=() nodes=['buf0', 'buf1'] local=['buf0']
# wrapper
def call(arg0):
    buf1 = empty_strided((), (), dtype=torch.float32)
    kernel0(arg0, buf1)
    return (buf1,)
# configs ((1, 1024, 4),) persistent=False split=16
@triton.jit
def kernel0(in_ptr0, out_ptr0, ws_n0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xidx = tl.program_id(1) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xidx < 1
    xzero = xidx * 0
    rzero = tl.zeros([1, RBLOCK], tl.int32)
    n0_acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    rstart = tl.program_id(0) * 4096
    for roffset in range(0, 4096, RBLOCK):
        ridx = rstart + roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = ridx < 65536
        r0_0 = (ridx // 256)
        r0_1 = (ridx % 256)
        n0_t0 = tl.load(in_ptr0 + ((256 * r0_0) + r0_1), mask=xmask & rmask, other=0)
        n0_acc = tl.where(xmask & rmask, n0_acc + n0_t0, n0_acc)
    tl.store(ws_n0 + xidx * 16 + tl.program_id(0), tl.sum(n0_acc, 1)[:, None], mask=xmask)


@triton.jit
def kernel0_final(in_ptr0, out_ptr0, ws_n0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xidx = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xidx < 1
    xzero = xidx * 0
    rzero = tl.zeros([1, RBLOCK], tl.int32)
    ridx = tl.arange(0, RBLOCK)[None, :]
    rmask = ridx < 16
    n0_t1 = tl.sum(tl.where(xmask & rmask, tl.load(ws_n0 + xidx * 16 + ridx, mask=xmask & rmask, other=0.0).to(tl.float64), 0.0), 1).to(tl.float32)[:, None]
    n1_t0 = n0_t1
    n1_t1 = tl.full([], 2.0, tl.float32)
    n1_t2 = (n1_t0 * n1_t1)
    tl.store(out_ptr0 + 0 + xzero, n1_t2, mask=xmask)
""")


def test_triton_kernels_helper_sees_only_triton() -> None:
    compiled = check(lambda x: x + 1, [randn(3)])
    assert len(triton_kernels(compiled)) == 1


def test_a_missing_triton_is_a_clear_error(monkeypatch: Any) -> None:
    from inductor import targets

    monkeypatch.setattr(targets, "triton_available", lambda: False)
    with config.patch(cpu_backend="triton"), pytest.raises(RuntimeError,
                                                           match="pip install triton"):
        targets.target_for(torch.device("cpu"))
    with pytest.raises(RuntimeError, match="pip install triton"):
        targets.target_for(torch.device("cuda"))
    assert not targets.has_target(torch.device("cuda"))
    with config.patch(cpu_backend="cuda-please"), pytest.raises(ValueError, match="cpu_backend"):
        targets.target_for(torch.device("cpu"))
