"""Max pooling lowered to the loop IR (`lowering/pooling.py`): values and indices equal
eager's exactly (padding, dilation, ceil_mode, NaN, ties, -inf, channels-last, 3-D input),
on the C++ target and on the Triton target (interpreter on the CPU, CUDA on a GPU); in
inference the indices are not computed and no ATen pooling call remains. The backward
(`max_pool2d_with_indices_backward`) of a channels-last gradient equals eager's
(overlapping windows that pick the same element add up in eager's order) and fuses with the
gradient's consumer; NCHW and 3-D gradients stay ATen's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from tests_inductor_support import needs_compiler, run_and_compare

CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 9, 11), 3, 2, 1, 1, False),
    ((2, 3, 9, 11), 3, 2, 1, 1, True),
    ((1, 2, 8, 8), 2, None, 0, 1, False),
    ((2, 4, 10, 7), (3, 2), (2, 1), (1, 0), (2, 1), True),
    ((3, 10, 10), 3, 1, 1, 1, False),
]


def _input(shape: tuple[int, ...], dtype: torch.dtype, channels_last: bool,
           device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(*shape, generator=g).to(dtype)
    x[..., 1, 1] = float("nan")
    x[..., 2, :] = x[..., 3, :]  # NOTE: ties across window rows: the first one wins
    x[..., 5:, 0] = -float("inf")
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x.to(device)


def _pool(case: tuple[Any, ...]) -> Any:
    _, k, s, p, d, ceil = case

    def f(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v, i = F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True)
        return v * 2, i

    return f


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES)
def test_values_and_indices_equal_eager_on_cpp(case: tuple[Any, ...], dtype: torch.dtype,
                                               channels_last: bool) -> None:
    x = _input(case[0], dtype, channels_last)
    compiled = run_and_compare(_pool(case), [x], atol=0, rtol=0)
    assert not compiled.extern_calls, compiled.extern_calls


def test_inference_pool_is_one_fused_kernel_without_indices() -> None:
    x = _input((2, 4, 12, 12), torch.float32, True)
    compiled = run_and_compare(lambda t: F.max_pool2d(torch.relu(t), 3, 2, 1) + 1, [x],
                               atol=0, rtol=0)
    assert not compiled.extern_calls and len(compiled.kernels) == 1, compiled.output_code()
    assert "int64" not in compiled.wrapper_source  # NOTE: no index buffer is allocated


def test_large_windows_stay_aten() -> None:
    x = torch.randn(1, 2, 20, 20)
    compiled = run_and_compare(lambda t: F.max_pool2d(t, 9, 1), [x], atol=0, rtol=0)
    assert compiled.extern_calls


def test_triton_target() -> None:
    from triton_support import DEVICE, check

    for case in CASES[:2] + CASES[3:4]:
        for dtype in (torch.float32, torch.bfloat16):
            x = _input(case[0], dtype, True, DEVICE)
            check(_pool(case), [x], atol=0, rtol=0)


def _pool_backward(case: tuple[Any, ...]) -> Any:
    _, k, s, p, d, ceil = case
    k2, s2, p2, d2 = ([v, v] if isinstance(v, int) else list(v)
                      for v in (k, k if s is None else s, p, d))

    def f(g: torch.Tensor, t: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        gx = torch.ops.aten.max_pool2d_with_indices_backward(g, t, k2, s2, p2, d2, ceil, i)
        return torch.ops.aten.threshold_backward(gx, t, 0.0)

    return f


def _backward_inputs(case: tuple[Any, ...], dtype: torch.dtype, channels_last: bool,
                     device: str = "cpu") -> list[torch.Tensor]:
    x = _input(case[0], dtype, channels_last, device)
    x = torch.where(torch.isnan(x), x, x.round())  # NOTE: more ties: windows share maxima
    _, k, s, p, d, ceil = case
    v, i = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    g = torch.randn(v.shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    if channels_last and g.dim() == 4:
        g = g.contiguous(memory_format=torch.channels_last)
    return [g.to(device), x, i]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_backward_equals_eager_and_fuses(case: tuple[Any, ...], channels_last: bool) -> None:
    args = _backward_inputs(case, torch.float32, channels_last)
    compiled = run_and_compare(_pool_backward(case), args, atol=0, rtol=0)
    if channels_last and len(case[0]) == 4:
        assert not compiled.extern_calls and len(compiled.kernels) == 1, \
            compiled.output_code()
    else:
        assert compiled.extern_calls, compiled.output_code()


def test_backward_half_precision() -> None:
    args = _backward_inputs(CASES[0], torch.bfloat16, True)
    # NOTE: summed in float32 as eager's CUDA kernel does (eager's CPU kernel in bfloat16)
    run_and_compare(_pool_backward(CASES[0]), args, atol=2e-2, rtol=2e-2)


@needs_compiler
def test_training_step_through_the_pool() -> None:
    from compiler import compile as compile_fn

    conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 12, 12).contiguous(memory_format=torch.channels_last)

    def step(m: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.relu(m(t)), 3, 2, 1).square().sum()

    step(conv, x).backward()
    expected = [p.grad.clone() for p in conv.parameters()]  # type: ignore[union-attr]
    conv.zero_grad()
    compile_fn(step, backend="inductor")(conv, x).backward()
    for p, e in zip(conv.parameters(), expected):
        torch.testing.assert_close(p.grad, e, rtol=1e-5, atol=1e-5)


def test_backward_triton_target() -> None:
    from triton_support import DEVICE, check

    for case in CASES[:1] + CASES[3:4]:
        check(_pool_backward(case), _backward_inputs(case, torch.float32, True, DEVICE),
              atol=0, rtol=0)
