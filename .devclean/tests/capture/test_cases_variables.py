"""Differential cases: locals, globals, closures and cells."""

from __future__ import annotations

import math

import pytest
import torch
from _differential import case, check, t

G_SCALE = 2.5
G_TENSOR = torch.arange(4.0)
G_LIST = [1, 2, 3]
G_DICT = {"a": 1.5, "b": -2.0}
G_FLAG = True
G_TUPLE = (3, 4.0, "relu")


def _helper_double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def local_reassign(x):
    y = x + 1
    y = y * 2
    return y


def local_swap(x, y):
    x, y = y, x
    return x - y


def local_del(x):
    y = x * 3
    z = y + 1
    del y
    return z


def local_chain(x):
    a = x
    a = a + 1
    a = a * a
    a = a - x
    return a


def local_python_int_accumulates(x):
    n = 0
    n += 3
    n *= 2
    n -= 1
    return x * n


def local_unused_argument(x, y):
    return x.sin()


def local_many_locals(x):
    a, b, c, d, e = x + 1, x + 2, x + 3, x + 4, x + 5
    f = a * b - c * d + e
    g = f / 2
    return g, f


def local_shadow_builtin(x):
    len = 3
    return x * len


def local_default_argument(x, scale=2.0):
    return x * scale


def local_keyword_only(x, *, bias=1.0):
    return x + bias


def local_none_default(x, y=None):
    if y is None:
        y = torch.ones_like(x)
    return x + y


def global_scalar(x):
    return x * G_SCALE


def global_tensor(x):
    return x + G_TENSOR


def global_list(x):
    return x * G_LIST[1] + len(G_LIST)


def global_dict(x):
    return x * G_DICT["a"] + G_DICT["b"]


def global_flag_branch(x):
    if G_FLAG:
        return x + 1
    return x - 1


def global_tuple_constant(x):
    n, f, name = G_TUPLE
    out = x * n + f
    return out.relu() if name == "relu" else out


def global_module_math(x):
    return x * math.sqrt(2.0) + math.pi


def global_function(x):
    return _helper_double(x) + 1


def global_torch_attribute(x):
    return torch.float32 == x.dtype and x + 1


def _make_scaler(k):
    def scaled(x):
        return x * k

    return scaled


def _make_adder(bias):
    def add(x):
        return x + bias

    return add


def _make_two_level(a):
    def mid(b):
        def inner(x):
            return x * a + b

        return inner

    return mid


def _make_counter_scale():
    calls = [0]

    def scaled(x):
        return x * (len(calls) + 1)

    return scaled


closure_scalar = _make_scaler(3.0)
closure_tensor = _make_adder(torch.linspace(-1, 1, 4))
closure_two_levels = _make_two_level(2.0)(0.5)
closure_list_cell = _make_counter_scale()


def closure_inner_function(x):
    def inner(y):
        return y * 2 + x

    return inner(x) + inner(1.0)


def closure_nonlocal_write(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    bump()
    return x * count


def closure_lambda_local(x):
    k = 3
    f = lambda y: y + k
    return f(x)


def closure_cell_modified_after_definition(x):
    k = 1
    f = lambda: k
    k = 5
    return x * f()


def closure_default_binding_in_loop(x):
    fs = [lambda y, i=i: y * i for i in range(3)]
    total = torch.zeros_like(x)
    for f in fs:
        total = total + f(x)
    return total


def closure_tensor_cell_in_inner(x, w):
    def project(v):
        return v @ w

    return project(x).tanh()


CASES = [
    case(local_reassign, t(4)),
    case(local_swap, t(4), t(4, seed=1)),
    case(local_del, t(3, 2)),
    case(local_chain, t(5)),
    case(local_python_int_accumulates, t(4)),
    case(local_unused_argument, t(4), t(4, seed=2)),
    case(local_many_locals, t(2, 2)),
    case(local_shadow_builtin, t(4)),
    case(local_default_argument, t(4)),
    case(local_default_argument, t(4), 0.5, id="local_default_argument_overridden"),
    case(local_keyword_only, t(4), kwargs={"bias": -3.0}),
    case(local_none_default, t(4)),
    case(local_none_default, t(4), t(4, seed=3), id="local_none_default_given"),
    case(global_scalar, t(4)),
    case(global_tensor, t(4)),
    case(global_list, t(4)),
    case(global_dict, t(4)),
    case(global_flag_branch, t(4)),
    case(global_tuple_constant, t(4)),
    case(global_module_math, t(4)),
    case(global_function, t(4)),
    case(global_torch_attribute, t(4)),
    case(closure_scalar, t(4)),
    case(closure_tensor, t(4)),
    case(closure_two_levels, t(4)),
    case(closure_list_cell, t(4)),
    case(closure_inner_function, t(4)),
    case(closure_nonlocal_write, t(4)),
    case(closure_lambda_local, t(4)),
    case(closure_cell_modified_after_definition, t(4)),
    case(closure_default_binding_in_loop, t(4)),
    case(closure_tensor_cell_in_inner, t(2, 3), t(3, 3, seed=1)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_variables(fn, args, opts):
    check(fn, *args, **opts)
