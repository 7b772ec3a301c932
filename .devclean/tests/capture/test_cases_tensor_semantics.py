"""Differential cases: tensor semantics that are easy to get wrong in a graph: mutation through
views of arguments, `out=`, aliasing outputs, random ops and generator state, requires_grad
changes, `.data`/`.grad`, inference mode, dtype promotion, default dtype, in-place on
broadcast results, and RNG state left to the caller."""

from __future__ import annotations

import capture
import pytest
import torch
import torch.nn.functional as F
from _differential import CountingBackend, assert_same, case, check, t


def inplace_through_view_of_argument(x):
    x[0].add_(10)
    x.view(-1)[1] = -5.0
    return x.sum()


def inplace_through_transpose_of_argument(x):
    x.t().mul_(2)
    return x + 0


def setitem_on_slice_of_argument(x, v):
    x[:, 1:] = v
    return x.mean()


def out_variant(x, y):
    out = torch.empty(4)
    torch.add(x, y, out=out)
    return out * 2


def output_is_view_of_input(x):
    return x.view(2, -1), x[1:], x.T if x.dim() == 2 else x


def output_aliases_another_output(x):
    y = x * 2
    return y, y.view(-1), y


def same_input_twice(x):
    return x * 2


def random_ops_seeded_in_caller(x):
    noise = torch.randn_like(x)
    mask = torch.rand(x.shape) > 0.5
    return x + noise, mask, torch.randint(0, 10, (3,))


def random_with_explicit_generator(x, g):
    return x + torch.randn(x.shape, generator=g)


def bernoulli_and_multinomial(x):
    p = torch.sigmoid(x)
    return torch.bernoulli(p), torch.multinomial(p.abs() + 0.1, 2)


def manual_seed_inside(x):
    torch.manual_seed(123)
    return x + torch.randn(4)


def requires_grad_on_new_tensor(x):
    w = torch.ones(4).requires_grad_()
    return (x * w).sum(), w.requires_grad


def detach_and_data(x):
    return x.detach() * 2, x.data + 1


def is_leaf_and_grad_fn_queries(x):
    y = x * 2
    return y * (1 if x.is_leaf else 2) + (0 if y.grad_fn is None else 1)


def grad_attribute_read(x):
    g = x.grad
    return x * 2 if g is None else x + g


def dtype_promotion(a, b):
    return a + b, a * 2.5, (a > 0) + b, torch.result_type(a, b) == torch.float32


def integer_division_semantics(a):
    return a // 3, a / 3, torch.div(a, 3, rounding_mode="trunc"), a % -3


def inplace_on_broadcast_result(x, y):
    z = x + y
    z.mul_(3)
    return z


def inference_mode_region(x):
    with torch.inference_mode():
        y = x * 2
    return y.is_inference(), x + 1


def empty_tensor_ops(x):
    e = x[:0]
    return e.sum(), torch.cat([e, x]), e.shape[0]


def zero_dim_tensor_ops(x):
    s = x.sum()
    return s * 2, s.dim(), s.reshape(1), torch.stack([s, s])


def contiguous_and_strides(x):
    y = x.permute(1, 0)
    return y.contiguous().stride(), y.stride(), y.contiguous() + 1


def bool_and_complex(x):
    c = torch.complex(x, x * 2)
    return c.abs(), c.real, (x > 0).logical_not(), torch.view_as_real(c)


def scatter_inplace_on_argument(x, idx):
    x.scatter_(0, idx, 0.0)
    x.index_add_(0, idx, torch.ones(2))
    return x.sum()


def masked_scatter_and_where_scalar(x, mask):
    return x.masked_scatter(mask, torch.arange(12.0)), torch.where(mask, x, 0.0)


def one_hot_and_embedding_grad(idx, w):
    oh = F.one_hot(idx, 5).float()
    return oh @ w


# Rare in model code: capture may compile these or run them eagerly, but never get them wrong.
MAY_FALL_BACK = {"fullgraph": False, "graphs": None}

CASES = [
    case(inplace_through_view_of_argument, t(3, 2)),
    case(inplace_through_transpose_of_argument, t(2, 3)),
    case(setitem_on_slice_of_argument, t(3, 3), t(3, 2, seed=1)),
    case(out_variant, t(4), t(4, seed=1)),
    case(output_is_view_of_input, t(4, 2)),
    case(output_aliases_another_output, t(4)),
    case(random_ops_seeded_in_caller, t(4)),
    case(bernoulli_and_multinomial, t(2, 4)),
    case(manual_seed_inside, t(4), **MAY_FALL_BACK),
    case(requires_grad_on_new_tensor, t(4), **MAY_FALL_BACK),
    case(detach_and_data, t(4, requires_grad=True)),
    case(is_leaf_and_grad_fn_queries, t(4, requires_grad=True), **MAY_FALL_BACK),
    case(grad_attribute_read, t(4, requires_grad=True), **MAY_FALL_BACK),
    case(dtype_promotion, t(4, dtype=torch.int64), t(4)),
    case(integer_division_semantics, torch.tensor([-7, -1, 0, 5, 9])),
    case(inplace_on_broadcast_result, t(3, 1), t(1, 4, seed=1)),
    case(inference_mode_region, t(4), **MAY_FALL_BACK),
    case(empty_tensor_ops, t(4)),
    case(zero_dim_tensor_ops, t(4)),
    case(contiguous_and_strides, t(2, 3)),
    case(bool_and_complex, t(4)),
    case(scatter_inplace_on_argument, t(5), torch.tensor([1, 3])),
    case(masked_scatter_and_where_scalar, t(3, 4), t(3, 4, dtype=torch.bool)),
    case(one_hot_and_embedding_grad, torch.tensor([0, 4, 2]), t(5, 3, requires_grad=True),
         grad=True),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_tensor_semantics(fn, args, opts):
    check(fn, *args, **opts)


def test_same_tensor_passed_twice_and_mutated():
    def fn(a, b):
        a.add_(1)
        return a + b

    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    e, c = t(4), t(4)
    assert_same(compiled(c, c), fn(e, e))
    assert_same(c, e)


def test_rng_state_after_call_matches_eager():
    capture.reset()
    compiled = capture.optimize(random_ops_seeded_in_caller, backend=CountingBackend(),
                                fullgraph=True)
    torch.manual_seed(7)
    random_ops_seeded_in_caller(t(4))
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    compiled(t(4))
    assert_same(torch.rand(3), expected_next)


def test_explicit_generator_state_advances():
    capture.reset()
    compiled = capture.optimize(random_with_explicit_generator, backend=CountingBackend(),
                                fullgraph=False)
    g_e, g_c = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for _ in range(2):
        assert_same(compiled(t(4), g_c), random_with_explicit_generator(t(4), g_e))


def test_default_dtype_change_recompiles_or_stays_correct():
    def fn(x):
        return x + torch.ones(4)

    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(fn, backend=backend, fullgraph=True)
    x = t(4).double()
    assert_same(compiled(x), fn(x))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert_same(compiled(x), fn(x))
    finally:
        torch.set_default_dtype(old)
    assert backend.frame_count == 2


def test_grad_flows_through_inplace_on_argument_clone():
    def fn(x):
        y = x.clone()
        y[0] = y[0] * 3
        return y.sum()

    check(fn, t(4, requires_grad=True), grad=True)
