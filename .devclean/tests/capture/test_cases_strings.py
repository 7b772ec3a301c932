"""Differential cases: strings, f-strings, str methods and string-keyed lookups."""

# ruff: noqa: UP031  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import pytest
import torch
from _differential import case, check, t


def fstring_int(x):
    n = x.shape[0]
    return x + 1, f"n={n}"


def fstring_shape_and_dtype(x):
    return x * 2, f"{tuple(x.shape)} {x.dtype}"


def fstring_format_spec(x):
    eps = 1e-5
    return x + eps, f"{eps:.2e}|{3.14159:.3f}|{7:04d}|{'ab':>4}"


def fstring_conversions(x):
    name = "relu"
    return x.relu(), f"{name!r} {name!s}"


def fstring_builds_dict_key(x, weights):
    out = x
    for i in range(2):
        out = out * weights[f"layer{i}"]
    return out


def str_format_method(x):
    return x - 1, "{}-{:d}-{name}".format("a", 3, name="z")


def str_percent_format(x):
    return x * 3, "%s:%d:%.1f" % ("k", 2, 0.25)


def str_concat_and_repeat(x, prefix):
    label = prefix + "_" + "x" * 3
    return x + len(label), label


def str_methods(x, s):
    parts = s.upper().split(",")
    joined = "-".join(p.strip() for p in parts)
    return x * len(parts), joined, s.startswith("a"), s.replace("a", "b")


def str_branch_on_mode(x, mode):
    if mode == "sum":
        return x.sum()
    elif mode.lower() == "mean":
        return x.mean()
    return x.max()


def str_in_string(x, act):
    if "gelu" in act:
        return torch.nn.functional.gelu(x)
    return x.relu()


def str_of_numbers(x):
    return x + 1, str(3) + str(2.5) + repr(True)


def str_dict_dispatch(x, act):
    table = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}
    return table[act](x)


def str_getattr_by_name(x, name):
    return getattr(x, name)()


def str_isinstance_check(x, value):
    if isinstance(value, str):
        return x * len(value)
    return x * value


CASES = [
    case(fstring_int, t(3)),
    case(fstring_shape_and_dtype, t(2, 3)),
    case(fstring_format_spec, t(4)),
    case(fstring_conversions, t(4)),
    case(fstring_builds_dict_key, t(4), {"layer0": 2.0, "layer1": 3.0}),
    case(str_format_method, t(4)),
    case(str_percent_format, t(4)),
    case(str_concat_and_repeat, t(4), "pre"),
    case(str_methods, t(4), "a, b ,c"),
    case(str_branch_on_mode, t(4), "sum", id="str_branch_on_mode_sum"),
    case(str_branch_on_mode, t(4), "MEAN", id="str_branch_on_mode_mean"),
    case(str_in_string, t(4), "approx_gelu"),
    case(str_of_numbers, t(4)),
    case(str_dict_dispatch, t(4), "sigmoid"),
    case(str_getattr_by_name, t(4), "exp"),
    case(str_isinstance_check, t(4), "abc"),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_strings(fn, args, opts):
    check(fn, *args, **opts)
