"""Values that share memory with another buffer are never overwritten while still read.

autograd's formulas wrap gradients in `conj_physical`, which on a real tensor returns its
input: an ATen call that does so without an alias annotation in its schema once let the
buffer planner hand the input's memory to a later kernel while the "copy" was still to be
read, so `x`'s gradient of `(x @ w).tanh() * x.sigmoid()` came out wrong.
"""

import compiler
import pytest
import torch


def _grads(fn, *shapes, compiled=False):
    torch.manual_seed(0)
    args = [torch.randn(*s, requires_grad=True) for s in shapes]
    run = compiler.compile(fn, backend="inductor") if compiled else fn
    out = run(*args)
    out.backward(torch.ones_like(out))
    return out.detach(), [a.grad for a in args]


def mm_tanh_times_sigmoid(x, w):
    return (x @ w).tanh() * x.sigmoid()


def two_paths_through_sigmoid(x, w):
    s = x.sigmoid()
    return (s @ w).tanh() + s * x.tanh()


def conj_of_real(x, w):
    return torch.conj_physical(x @ w) * x + x.resolve_neg().resolve_conj()


@pytest.mark.parametrize("fn", [mm_tanh_times_sigmoid, two_paths_through_sigmoid,
                                conj_of_real])
def test_gradients_equal_eager(fn):
    compiler.reset()
    ref, ref_grads = _grads(fn, (5, 4), (4, 4))
    out, grads = _grads(fn, (5, 4), (4, 4), compiled=True)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


def test_resolve_conj_of_a_complex_tensor_is_not_overwritten():
    def f(z):
        r = z.resolve_conj()
        return r * 2, (z + 1).abs()

    compiler.reset()
    z = torch.randn(6, dtype=torch.complex64)
    ref = f(z)
    got = compiler.compile(f, backend="inductor")(z)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
