"""Differential cases: the builtins model code uses, on Python values and tensors."""

# ruff: noqa: B009, C406, C408, C409, C410, C417, FURB192  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import math

import pytest
import torch
from _differential import case, check, t


class Tag:
    pass


def builtin_len(x, items):
    return x * len(items) + len(x)


def builtin_isinstance(x, v):
    if isinstance(v, (int, float)):
        return x * v
    if isinstance(v, (list, tuple)):
        return x * len(v)
    return x


def builtin_isinstance_module(x, m):
    return m(x) if isinstance(m, torch.nn.Module) else x


def builtin_issubclass_and_type(x, v):
    if type(v) is Tag and issubclass(type(v), object):
        return x + 1
    return x


def builtin_getattr_hasattr(x, obj):
    if hasattr(obj, "scale"):
        x = x * getattr(obj, "scale")
    if not hasattr(obj, "missing"):
        x = x + 1
    return x


def builtin_min_max_python(x, a, b):
    return x * max(a, b) + min(a, b, 0) + max([3, 9, 1])


def builtin_min_max_of_shapes(x, y):
    n = min(x.shape[0], y.shape[0])
    return x[:n] + y[:n]


def builtin_abs(x, v):
    return abs(x) * abs(v)


def builtin_range_len_list(x):
    r = range(2, 11, 3)
    return x * len(r) + r[1] + list(r)[-1]


def builtin_zip_enumerate_lists(x, a, b):
    pairs = list(zip(a, b))
    idx = list(enumerate(a))
    return x * len(pairs) + idx[-1][0] + pairs[0][1]


def builtin_sum_of_tensors(x, ts):
    return sum(ts) + sum(ts, x)


def builtin_sum_python(x, vals):
    return x * sum(vals) + sum([0.5, 0.25])


def builtin_any_all(x, flags):
    return x * (any(flags) + all(flags) * 2)


def builtin_int_float_bool(x, s):
    return x * int(s) + float("0.5") + bool(s) + int(2.9)


def builtin_tuple_list_dict(x):
    tp = tuple([1, 2])
    ls = list((3, 4))
    d = dict(a=5, b=6)
    d2 = dict([("c", 7)])
    return x * (sum(tp) + sum(ls) + d["b"] + d2["c"])


def builtin_round_divmod_pow(x, v):
    q, r = divmod(17, v)
    return x * round(2.567, 1) + q + r + pow(2, v)


def builtin_sorted_reversed(x, vals):
    ordered = sorted(vals, reverse=True)
    back = list(reversed(vals))
    return x * ordered[0] + back[0]


def builtin_sorted_with_key(x, names):
    return x * sorted(names, key=len)[-1].count("a")


def builtin_map_filter(x, vals):
    doubled = list(map(lambda v: v * 2, vals))
    positive = list(filter(lambda v: v > 0, vals))
    return x * sum(doubled) + len(positive)


def builtin_callable(x, f):
    return f(x) if callable(f) else x


def builtin_iter_next(x, vals):
    it = iter(vals)
    first = next(it)
    second = next(it)
    return x * first + second + next(it, 100)


def builtin_math_module(x):
    return x * math.sqrt(16) + math.log(math.e) + math.floor(2.7) + math.ceil(0.2) + math.pi


def builtin_min_max_of_lists(x, y):
    sizes = [x.shape[0], y.shape[0], 5]
    return x * max(sizes) - min(sizes) + max(1.5, len(sizes))


def builtin_all_over_shapes(x, y):
    if all(a == b for a, b in zip(x.shape, y.shape)):
        return x + y
    return x


def builtin_isinstance_of_builtin_types(x, v):
    kinds = [isinstance(v, str), isinstance(v, dict), isinstance(v, bool), isinstance(x, torch.Tensor)]
    return x * sum(kinds)


def builtin_chr_ord_hex(x):
    return x * (ord("a") - 96), chr(98) + hex(255) + bin(2)


def builtin_type_call_of_tensor(x):
    return type(x)(x.shape).zero_() + x if type(x) is torch.Tensor else x


CASES = [
    case(builtin_len, t(3, 2), [1, 2, 3, 4]),
    case(builtin_isinstance, t(4), 2.0, id="builtin_isinstance_float"),
    case(builtin_isinstance, t(4), [1, 2], id="builtin_isinstance_list"),
    case(builtin_isinstance_module, t(4), torch.nn.ReLU()),
    case(builtin_issubclass_and_type, t(4), Tag()),
    case(builtin_getattr_hasattr, t(4), type("Obj", (), {"scale": 3.0})()),
    case(builtin_min_max_python, t(4), 2, 5),
    case(builtin_min_max_of_shapes, t(3, 2), t(5, 2, seed=1)),
    case(builtin_abs, t(4), -3),
    case(builtin_range_len_list, t(4)),
    case(builtin_zip_enumerate_lists, t(4), [1, 2, 3], [4, 5]),
    case(builtin_sum_of_tensors, t(4), [t(4, seed=1), t(4, seed=2)]),
    case(builtin_sum_python, t(4), [1, 2, 3]),
    case(builtin_any_all, t(4), [True, True]),
    case(builtin_int_float_bool, t(4), "3"),
    case(builtin_tuple_list_dict, t(4)),
    case(builtin_round_divmod_pow, t(4), 5),
    case(builtin_sorted_reversed, t(4), [3, 1, 2]),
    case(builtin_sorted_with_key, t(4), ["aa", "a", "banana"]),
    case(builtin_map_filter, t(4), [1, -2, 3]),
    case(builtin_callable, t(4), torch.sigmoid),
    case(builtin_iter_next, t(4), [1, 2]),
    case(builtin_math_module, t(4)),
    case(builtin_min_max_of_lists, t(2), t(3, seed=1)),
    case(builtin_all_over_shapes, t(2, 3), t(2, 3, seed=1)),
    case(builtin_isinstance_of_builtin_types, t(4), True),
    case(builtin_chr_ord_hex, t(4)),
    case(builtin_type_call_of_tensor, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_builtins(fn, args, opts):
    check(fn, *args, **opts)
