"""The Triton target against eager: pointwise kernels, broadcasting, strided and
channels-last inputs, 2-D tiles for transposes, each kind of reduction (persistent and looped), Welford's one-pass
variance, fused softmax / layer norm / log-softmax, half precision, indirect indexing with
its bounds check.

Without a GPU the kernels run on CPU tensors through Triton's interpreter; sizes are small
(the interpreter runs each program in Python)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import config
from inductor.ir.checks import ERR_PARAM
from triton_support import DEVICE, check, compile_triton, randn, triton_kernels


def test_pointwise_chain_is_one_kernel() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x * 2 + y).relu() - torch.tanh(x) * torch.erf(y)

    check(f, [randn(8, 16), randn(8, 16)], kernels=1)


def test_math_functions() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = x.abs() + 0.5
        return (torch.log1p(a), torch.expm1(x), torch.sqrt(a), torch.rsqrt(a), a.log(),
                torch.atan2(x, a), x.floor(), x.ceil(), x.round(), x.trunc(), x.sign(),
                torch.where(x > 0, x, x * 0.1), x.clamp(-0.5, 0.5), x.pow(2), a.pow(x))

    check(f, [randn(37)], atol=1e-5, rtol=1e-4)


def test_integer_ops_and_division() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (a // b, a % b, torch.fmod(a, b), a * b + 3, a & b, (a > b).int(), a.pow(2))

    a = torch.randint(-20, 20, (33,), device=DEVICE)
    b = torch.randint(1, 7, (33,), device=DEVICE) * torch.where(
        torch.rand(33, device=DEVICE) > 0.5, 1, -1)
    check(f, [a, b])


def test_broadcasting() -> None:
    def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x + y * z + 1.5

    check(f, [randn(4, 1, 5), randn(1, 3, 5), randn(5)], kernels=1)


def test_strided_and_channels_last_inputs() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.t() * 2 + 1, y.relu() + y.mean(dim=(2, 3), keepdim=True)

    x = randn(12, 20)
    y = randn(2, 6, 5, 4).contiguous(memory_format=torch.channels_last)
    check(f, [x, y])
    check(lambda v: v[:, ::2] + v[:, 1::2], [randn(6, 10)])



def test_transposes_and_layout_changes_are_tiled_in_two_dims() -> None:
    x_cl = randn(2, 20, 4, 18).contiguous(memory_format=torch.channels_last)
    cases: list[tuple[object, list[torch.Tensor]]] = [
        (lambda x: x.t().contiguous() * 2, [randn(40, 50)]),
        (lambda x: (x + 1).contiguous(memory_format=torch.channels_last),
         [randn(2, 20, 4, 18)]),
        (lambda x: (x * 3).contiguous(), [x_cl]),
        (lambda x, y: x.transpose(1, 2) + y, [randn(3, 17, 33), randn(3, 33, 17)]),
    ]
    for fn, inputs in cases:
        compiled = check(fn, inputs)  # type: ignore[arg-type]
        assert [bool(k.tile) for k in triton_kernels(compiled)] == [True]
    # NOTE: contiguous pointwise work stays a flat 1-D kernel
    assert not triton_kernels(check(lambda v: v * 2 + 1, [randn(40, 50)]))[0].tile

@pytest.mark.parametrize("n", [7, 64, 1500])  # NOTE: 1500 > 1024: a looped reduction
def test_reductions_each_kind(n: int) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.sum(-1), x.mean(-1), x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1),
                (x > 0.5).any(-1), (x > -3).all(-1), (x * 0.1 + 1).prod(-1))

    x = randn(5, n)
    x[1, 3] = float("nan")
    compiled = check(f, [x], rtol=1e-4, atol=1e-4)
    reductions = [k for k in triton_kernels(compiled) if k.reduction]
    assert reductions
    assert all(k.persistent == (n <= 1024) for k in reductions)


def test_argmax_ties_take_the_first_index() -> None:
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]], device=DEVICE)
    check(lambda v: (v.argmax(-1), v.argmin(-1), v.argmax(0)), [x])


def test_column_and_full_reductions() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.sum(0), x.amax(0), x.sum(), x.mean()

    check(f, [randn(300, 24)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [40, 1300])
def test_variance_and_several_reductions_over_the_same_rows(n: int) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        var, mean = torch.var_mean(x, -1)
        return var, mean, x.std(-1), x.sum(-1) * x.amax(-1)

    compiled = check(f, [randn(6, n) * 3 + 2], rtol=1e-4, atol=1e-4)
    # NOTE: one kernel computes all five reductions and the pointwise epilogues over whole
    # rows' results (std's sqrt, sum * amax)
    assert len(triton_kernels(compiled)) == 1
    if n > 1024:  # NOTE: looped: Welford's variance reads each row once, with the sums
        src = triton_kernels(compiled)[0].source
        assert src.count("for roffset") == 1 and "_welford)" in src, src


def test_batch_norm_statistics_are_one_pass_welford() -> None:
    w, b = randn(3), randn(3)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, w, b, training=True)

    compiled = check(f, [randn(8, 3, 40, 40) * 0.5 + 100], atol=1e-3, rtol=1e-4)
    stats = [k for k in triton_kernels(compiled) if k.reduction]
    assert len(stats) == 1 and stats[0].source.count("for roffset") == 1


@pytest.mark.parametrize("n", [48, 1200])
def test_softmax_layer_norm_log_softmax_fuse(n: int) -> None:
    w, b = randn(n), randn(n)
    check(lambda x: torch.softmax(x, -1), [randn(6, n)], kernels=1)
    check(lambda x: F.log_softmax(x, -1), [randn(6, n)], kernels=1)
    check(lambda x: F.layer_norm(x, (n,), w, b), [randn(6, n)], kernels=1, atol=1e-4,
          rtol=1e-4)


def test_rms_norm_and_nll_loss() -> None:
    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    check(rms, [randn(6, 64), randn(64)], kernels=1, atol=1e-5, rtol=1e-4)
    target = torch.randint(0, 10, (6,), device=DEVICE)
    check(lambda x: F.nll_loss(F.log_softmax(x, -1), target), [randn(6, 10)], atol=1e-5,
          rtol=1e-4, kernels=1)
    check(lambda x: F.cross_entropy(x, target), [randn(6, 10)], atol=1e-5, rtol=1e-4,
          kernels=1)


def test_layer_norm_with_saved_statistics_is_one_kernel() -> None:
    # NOTE: training's forward also returns mean and rstd (row epilogues of the reductions)
    w, b = randn(64), randn(64)
    check(lambda x: torch.ops.aten.native_layer_norm(x, [64], w, b, 1e-5), [randn(6, 64)],
          atol=1e-5, rtol=1e-4, kernels=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_stored_in_its_type(dtype: torch.dtype) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * y + 1, torch.softmax(x, -1)

    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    compiled = check(f, [randn(8, 32, dtype=dtype), randn(8, 32, dtype=dtype)], atol=tol,
                     rtol=tol)
    src = "\n".join(k.source for k in triton_kernels(compiled))
    assert ".to(tl.float32)" in src


def test_indirect_indexing_and_its_bounds_check() -> None:
    w = randn(10, 4)
    check(lambda i: F.embedding(i, w) * 2, [torch.tensor([[1, 9], [0, 3]], device=DEVICE)])
    check(lambda i: w[i] + 1, [torch.tensor([[1, 9], [0, -1]], device=DEVICE)])
    if DEVICE == "cpu":  # NOTE: on a GPU eager reports a device-side assert instead
        compiled = compile_triton(lambda i: w[i] + 1, [torch.tensor([[1, 9], [0, -1]])])
        with pytest.raises(IndexError):
            compiled(torch.tensor([[1, 10], [0, 2]]))


def test_gpu_kernels_check_bounds_with_device_asserts() -> None:
    """The kernel a GPU gets checks indices as eager's CUDA kernels do, with a device-side
    assert (no error slots read back, which would stall the host on every call), compiled
    with `debug` on; integer division by zero does not raise there, as in eager CUDA."""
    from inductor.codegen.triton_split import generate_triton_kernel
    from inductor.pipeline import plan
    from inductor.scheduler.fusion import FusedGroup

    w = torch.randn(10, 4)
    i = torch.tensor([[1, 9], [0, -1]])
    d = torch.tensor([3, 4])

    def kernels(fn: Callable[..., Any], inputs: list[torch.Tensor]) -> list[Any]:
        with config.patch(cpu_backend="triton"):
            p = plan(trace_aten(fn, inputs), inputs)
        return [generate_triton_kernel(g, p.ctx.buffers, interpret=False)
                for g in p.steps if isinstance(g, FusedGroup)]

    (gpu,) = kernels(lambda i: w[i] + 1, [i])
    assert gpu.debug and not gpu.checks and ERR_PARAM not in gpu.params
    assert "tl.device_assert(" in gpu.source and "debug=True" in gpu.source
    assert "kernel_err" not in gpu.source
    (div,) = kernels(lambda a, b: a // b, [d, d])
    assert not div.debug and not div.checks and "device_assert" not in div.source
    if DEVICE == "cpu":  # NOTE: the interpreter's kernel keeps the error slots
        (interp,) = triton_kernels(compile_triton(lambda i: w[i] + 1, [i]))
        assert interp.checks and not interp.debug and "kernel_err" in interp.source


def test_cat_pad_and_gather() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.cat([x, y * 2], 1), F.pad(x, (1, 2)),
                torch.gather(x, 1, torch.tensor([[0, 2], [1, 1], [3, 0]], device=x.device)))

    check(f, [randn(3, 4), randn(3, 5)])
