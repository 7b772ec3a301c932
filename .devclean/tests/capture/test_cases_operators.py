"""Differential cases: binary, unary, comparison, in-place, identity and membership operators."""

# ruff: noqa: SIM201, PLR0133  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import operator

import pytest
import torch
from _differential import case, check, t

# Binary operators between two tensors, and between a tensor and a Python number (both sides).
TENSOR_BINARY = [
    ("add", lambda x, y: x + y),
    ("sub", lambda x, y: x - y),
    ("mul", lambda x, y: x * y),
    ("truediv", lambda x, y: x / (y.abs() + 1)),
    ("floordiv", lambda x, y: x // (y.abs() + 1)),
    ("mod", lambda x, y: x % (y.abs() + 1)),
    ("pow", lambda x, y: x.abs() ** y),
    ("matmul", lambda x, y: x @ y.T),
    ("lt", lambda x, y: x < y),
    ("le", lambda x, y: x <= y),
    ("gt", lambda x, y: x > y),
    ("ge", lambda x, y: x >= y),
    ("eq", lambda x, y: x == y),
    ("ne", lambda x, y: x != y),
    ("max_of_bools", lambda x, y: (x > 0) | (y > 0)),
    ("and_of_bools", lambda x, y: (x > 0) & (y < 0)),
    ("xor_of_bools", lambda x, y: (x > 0) ^ (y > 0)),
]

SCALAR_BINARY = [
    ("radd", lambda x: 2 + x),
    ("rsub", lambda x: 2 - x),
    ("rmul", lambda x: 3 * x),
    ("rtruediv", lambda x: 1 / (x.abs() + 1)),
    ("rpow", lambda x: 2 ** x),
    ("pow_scalar", lambda x: x ** 2),
    ("mixed_int_float", lambda x: x * 2 + 0.5 - 1),
    ("compare_scalar", lambda x: (x > 0.1).float() + (x <= -0.1).float()),
]

INT_TENSOR_BINARY = [
    ("bitand", lambda a, b: a & b),
    ("bitor", lambda a, b: a | b),
    ("bitxor", lambda a, b: a ^ b),
    ("lshift", lambda a, b: a << (b % 3)),
    ("rshift", lambda a, b: a >> (b % 3)),
    ("int_floordiv", lambda a, b: a // (b + 1)),
    ("int_mod", lambda a, b: a % (b + 1)),
]

UNARY = [
    ("neg", lambda x: -x),
    ("pos", lambda x: +x),
    ("abs", lambda x: abs(x)),
    ("invert_bool", lambda x: ~(x > 0)),
    ("not_python_bool_of_shape", lambda x: x + (not x.shape[0] == 3)),
]


def inplace_add_local(x, y):
    z = x.clone()
    z += y
    return z


def inplace_chain_local(x, y):
    z = x * 1
    z -= y
    z *= 2
    z /= 4
    return z


def inplace_add_on_argument(x, y):
    x += y
    return x


def inplace_mul_on_argument_no_return(x):
    x *= 3
    return x.sum()


def inplace_python_number(x):
    n = 2
    n **= 3
    n //= 3
    n %= 5
    return x * n


def inplace_matmul_local(x, w):
    y = x.clone()
    y @= w
    return y


def identity_is_none(x, y):
    if y is None:
        return x * 2
    return x


def identity_is_not(x, y):
    if x is not y:
        return x + y
    return x - 1


def identity_same_tensor_twice(x):
    return identity_is_not(x, x)


def membership_in_list(x, names):
    if "scale" in names:
        x = x * 2
    if "missing" not in names:
        x = x + 1
    return x


def membership_in_dict(x, d):
    return x * (3 if "k" in d else 1)


def membership_in_tuple_of_ints(x):
    return x + (1 if x.dim() in (1, 2) else 0)


def python_chained_compare(x, n):
    if 0 < n <= 4 < 10:
        return x * n
    return x


def python_bool_ops(x, a, b):
    flag = (a and not b) or (b and not a)
    return x + 1 if flag else x - 1


def python_and_returns_operand(x, k):
    return x * (k and 2 or 7)


def operator_module_functions(x, y):
    return operator.add(operator.mul(x, y), operator.neg(x))


def operator_getitem(x):
    return operator.getitem(x, 1) + operator.itemgetter(0)(x)


def tensor_int_float_promotion(a):
    return a * 1.5 + a // 2


def python_int_ops_on_shape(x):
    n = x.shape[0]
    m = x.shape[1]
    k = (n * m + 3) // 2 % 5 - (n ** 2) + abs(-m)
    return x * k


def python_float_division(x):
    return x * (x.shape[0] / 4) + x.shape[0] // 4


CASES = (
    [case(fn, t(3, 3), t(3, 3, seed=1), id=f"tensor_{name}") for name, fn in TENSOR_BINARY]
    + [case(fn, t(4), id=f"scalar_{name}") for name, fn in SCALAR_BINARY]
    + [
        case(fn, t(6, dtype=torch.int64), t(6, dtype=torch.int64, seed=3), id=f"int_{name}")
        for name, fn in INT_TENSOR_BINARY
    ]
    + [case(fn, t(3), id=f"unary_{name}") for name, fn in UNARY]
    + [
        case(inplace_add_local, t(4), t(4, seed=1)),
        case(inplace_chain_local, t(4), t(4, seed=1)),
        case(inplace_add_on_argument, t(4), t(4, seed=1)),
        case(inplace_mul_on_argument_no_return, t(4)),
        case(inplace_python_number, t(4)),
        case(inplace_matmul_local, t(2, 3), t(3, 3, seed=1)),
        case(identity_is_none, t(4), None),
        case(identity_is_not, t(4), t(4, seed=1)),
        case(identity_same_tensor_twice, t(4)),
        case(membership_in_list, t(4), ["scale", "bias"]),
        case(membership_in_dict, t(4), {"k": 1}),
        case(membership_in_tuple_of_ints, t(2, 2)),
        case(python_chained_compare, t(4), 3),
        case(python_bool_ops, t(4), True, False),
        case(python_and_returns_operand, t(4), 0),
        case(operator_module_functions, t(4), t(4, seed=1)),
        case(operator_getitem, t(3, 2)),
        case(tensor_int_float_promotion, t(5, dtype=torch.int64)),
        case(python_int_ops_on_shape, t(3, 5)),
        case(python_float_division, t(6)),
    ]
)


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_operators(fn, args, opts):
    check(fn, *args, **opts)
