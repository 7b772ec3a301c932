"""Max pooling lowered to the loop IR (`lowering/pooling.py`): values and indices equal
eager's exactly (padding, dilation, ceil_mode, NaN, ties, -inf, channels-last, 3-D input),
on the C++ target and on the Triton target (interpreter on the CPU, CUDA on a GPU); in
inference the indices are not computed and no ATen pooling call remains."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from tests_inductor_support import run_and_compare

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
