"""Differential cases: `if` on Python values and on tensor metadata (shape, dtype, device, ...)."""

from __future__ import annotations

import pytest
import torch
from _differential import case, check, t


def if_shape_dim(x):
    if x.shape[0] > 2:
        return x * 2
    return x / 2


def if_size_method_negative(x):
    if x.size(-1) == 4:
        return x.sum(-1)
    return x.sum(0)


def if_ndim(x):
    if x.ndim == 2:
        return x @ x.T
    return x * x


def if_dim_method(x):
    return x.unsqueeze(0) if x.dim() < 3 else x


def if_dtype_equal(x):
    if x.dtype == torch.float32:
        return x.double() * 2
    return x * 2


def if_dtype_in_tuple(x):
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.float()
    return x + 1


def if_is_floating_point(x):
    if x.is_floating_point():
        return x.sigmoid()
    return x * 2


def if_device_type(x):
    if x.device.type == "cpu":
        return x + 1
    return x - 1


def if_device_equal(x):
    if x.device == torch.device("cpu"):
        return x * 3
    return x


def if_is_cuda(x):
    return x.cos() if not x.is_cuda else x.sin()


def if_requires_grad(x):
    if x.requires_grad:
        return x * 2
    return x.detach() + 1


def if_is_contiguous(x):
    y = x.t()
    if y.is_contiguous():
        return y
    return y.contiguous() * 2


def if_numel(x):
    if x.numel() > 10:
        return x.flatten()[:10]
    return x.flatten()


def if_len_of_tensor(x):
    return x[0] if len(x) > 1 else x.squeeze(0)


def if_shape_equals_tuple(x):
    if x.shape == (2, 3):
        return x.T
    return x


def if_shape_equals_other_tensor(x, y):
    if x.shape == y.shape:
        return x + y
    return x


def if_stride(x):
    if x.stride(-1) == 1:
        return x.view(-1)
    return x.reshape(-1)


def if_none_argument(x, mask):
    if mask is not None:
        x = x.masked_fill(mask, 0.0)
    return x * 2


def if_isinstance_tensor(x, y):
    if isinstance(y, torch.Tensor):
        return x + y
    return x * y


def if_elif_chain(x, mode):
    if mode == 0:
        return x
    elif mode == 1:
        return x + 1
    elif mode == 2:
        return x * 2
    else:
        return -x


def if_ternary_python(x, flag):
    scale = 2.0 if flag else 0.5
    return x * scale


def if_assert_metadata(x):
    assert x.dim() == 2, "expected a matrix"
    return x.sum(1)


def if_bool_of_python_list(x, items):
    if items:
        return x * len(items)
    return x


def if_shape_arithmetic(x):
    b, n = x.shape
    if n % 2 == 0 and b * n >= 8:
        return x.view(b, n // 2, 2).sum(-1)
    return x


def if_dtype_itemsize(x):
    if x.element_size() == 4 and x.dtype.is_floating_point:
        return x.half().float()
    return x


CASES = [
    case(if_shape_dim, t(3, 2)),
    case(if_shape_dim, t(1, 2), id="if_shape_dim_false_branch"),
    case(if_size_method_negative, t(3, 4)),
    case(if_ndim, t(2, 3)),
    case(if_ndim, t(3), id="if_ndim_vector"),
    case(if_dim_method, t(3, 4)),
    case(if_dtype_equal, t(4)),
    case(if_dtype_in_tuple, t(4, dtype=torch.bfloat16)),
    case(if_is_floating_point, t(4, dtype=torch.int32)),
    case(if_device_type, t(4)),
    case(if_device_equal, t(4)),
    case(if_is_cuda, t(4)),
    case(if_requires_grad, t(4, requires_grad=True), grad=True),
    case(if_requires_grad, t(4), id="if_requires_grad_false"),
    case(if_is_contiguous, t(2, 3)),
    case(if_numel, t(3, 5)),
    case(if_len_of_tensor, t(3, 2)),
    case(if_shape_equals_tuple, t(2, 3)),
    case(if_shape_equals_other_tensor, t(2, 3), t(2, 3, seed=1)),
    case(if_stride, t(2, 3)),
    case(if_none_argument, t(4), t(4, dtype=torch.bool)),
    case(if_none_argument, t(4), None, id="if_none_argument_none"),
    case(if_isinstance_tensor, t(4), 2.0),
    case(if_elif_chain, t(4), 2),
    case(if_ternary_python, t(4), False),
    case(if_assert_metadata, t(2, 3)),
    case(if_bool_of_python_list, t(4), [1, 2]),
    case(if_shape_arithmetic, t(2, 4)),
    case(if_dtype_itemsize, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_control_flow(fn, args, opts):
    check(fn, *args, **opts)
