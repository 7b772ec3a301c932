"""Differential cases: sequence unpacking, starred targets and argument unpacking."""

from __future__ import annotations

import pytest
import torch
from _differential import case, check, t


def _three(a, b, c):
    return a * 3 + b * 2 + c


def _kw(x, *, scale, shift):
    return x * scale + shift


def unpack_tuple(x):
    a, b = x * 2, x + 1
    return a - b


def unpack_list_argument(x, pair):
    lo, hi = pair
    return x.clamp(lo, hi)


def unpack_star_rest(x, values):
    first, *rest = values
    return x * first + len(rest) + sum(rest)


def unpack_star_init(x, values):
    *init, last = values
    return x * last - len(init)


def unpack_star_middle(x, values):
    a, *mid, z = values
    return x * (a + z) + sum(mid)


def unpack_nested(x):
    a, (b, c) = x, (x * 2, x * 3)
    return a + b * c


def unpack_shape(x):
    b, c = x.shape
    return x.reshape(c, b) * b


def unpack_shape_starred(x):
    *_, h, w = x.shape
    return x.flatten(-2) * (h + w)


def unpack_tensor_rows(x):
    a, b = x
    return a * b


def unpack_chunk_result(x):
    q, k, v = x.chunk(3, dim=-1)
    return q @ k.T + v.sum()


def unpack_function_result(x):
    def two(y):
        return y.sin(), y.cos()

    s, c = two(x)
    return s * s + c * c


def unpack_call_star_args(x, args):
    return _three(x, *args)


def unpack_call_star_star_kwargs(x, opts):
    return _kw(x, **opts)


def unpack_call_mixed(x, args, opts):
    return _three(*args, **opts) + x


def unpack_dict_merge(x):
    base = {"scale": 2.0, "shift": 1.0}
    over = {"shift": -1.0}
    merged = {**base, **over}
    return _kw(x, **merged)


def unpack_list_splat(x):
    items = [*[x, x + 1], *(x * 2,)]
    return torch.stack(items)


def unpack_in_for_loop(x, pairs):
    out = x
    for scale, shift in pairs:
        out = out * scale + shift
    return out


def unpack_enumerate_tuples(x, pairs):
    out = x
    for i, (a, b) in enumerate(pairs):
        out = out + i * a - b
    return out


def unpack_swap_three(x, y, z):
    x, y, z = z, x, y
    return x * 100 + y * 10 + z


def unpack_tuple_return_of_method(x):
    values, indices = x.max(dim=0)
    return values + indices


CASES = [
    case(unpack_tuple, t(4)),
    case(unpack_list_argument, t(5), [-0.5, 0.5]),
    case(unpack_star_rest, t(4), [2, 3, 4]),
    case(unpack_star_init, t(4), (1, 2, 3, 4)),
    case(unpack_star_middle, t(4), [1, 2, 3, 4, 5]),
    case(unpack_nested, t(4)),
    case(unpack_shape, t(2, 3)),
    case(unpack_shape_starred, t(2, 3, 4)),
    case(unpack_tensor_rows, t(2, 3)),
    case(unpack_chunk_result, t(2, 6)),
    case(unpack_function_result, t(4)),
    case(unpack_call_star_args, t(4), (1.0, 2.0)),
    case(unpack_call_star_star_kwargs, t(4), {"scale": 3.0, "shift": -1.0}),
    case(unpack_call_mixed, t(4), (t(4, seed=1),), {"b": 2.0, "c": 1.0}),
    case(unpack_dict_merge, t(4)),
    case(unpack_list_splat, t(3)),
    case(unpack_in_for_loop, t(4), [(2.0, 1.0), (0.5, -1.0)]),
    case(unpack_enumerate_tuples, t(4), [(1.0, 2.0), (3.0, 4.0)]),
    case(unpack_swap_three, t(2), t(2, seed=1), t(2, seed=2)),
    case(unpack_tuple_return_of_method, t(3, 4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_unpacking(fn, args, opts):
    check(fn, *args, **opts)
