"""Differential cases: list/dict/set comprehensions and generator expressions."""

from __future__ import annotations

import pytest
import torch
from _differential import case, check, t


def listcomp_range(x):
    return torch.stack([x * i for i in range(4)])


def listcomp_over_tensors(x, ts):
    return sum([a * x for a in ts])


def listcomp_with_condition(x):
    return torch.cat([x + i for i in range(6) if i % 2 == 0])


def listcomp_nested(x):
    rows = [[x * (i + j) for j in range(2)] for i in range(3)]
    return torch.stack([torch.stack(r) for r in rows])


def listcomp_captures_outer_tensor(x, w):
    return [w * k + x for k in (1, 2, 3)]


def listcomp_enumerate_zip(x, scales, shifts):
    return [x * s + b + i for i, (s, b) in enumerate(zip(scales, shifts))]


def dictcomp_over_items(x, d):
    return {k: x * v for k, v in d.items()}


def dictcomp_string_keys(x):
    return {f"p{i}": x.pow(i) for i in range(1, 4)}


def setcomp_of_shapes(x, y):
    dims = {t.dim() for t in (x, y)}
    return x.sum() + y.sum() + len(dims)


def genexpr_sum(x):
    return sum(x * i for i in range(5))


def genexpr_any_all(x, flags):
    if any(f for f in flags) and not all(f for f in flags):
        return x + 1
    return x - 1


def genexpr_tuple(x):
    return tuple(x[i] * 2 for i in range(x.shape[0]))


def genexpr_max_of_shapes(x, y):
    biggest = max(t.shape[-1] for t in (x, y))
    return torch.nn.functional.pad(x, (0, biggest - x.shape[-1]))


def genexpr_into_cat(x):
    return torch.cat(tuple(x.roll(i) for i in range(3)))


def listcomp_of_method_calls(x):
    parts = x.split(2)
    return [p.sum() for p in parts]


def listcomp_nested_loops_flat(x):
    return torch.stack([x * i - j for i in range(2) for j in range(3)])


CASES = [
    case(listcomp_range, t(3)),
    case(listcomp_over_tensors, t(3), [t(3, seed=1), t(3, seed=2)]),
    case(listcomp_with_condition, t(2)),
    case(listcomp_nested, t(2)),
    case(listcomp_captures_outer_tensor, t(3), t(3, seed=4)),
    case(listcomp_enumerate_zip, t(3), [1.0, 2.0], [0.5, -0.5]),
    case(dictcomp_over_items, t(3), {"a": 1.0, "b": 2.0}),
    case(dictcomp_string_keys, t(3)),
    case(setcomp_of_shapes, t(3), t(2, 3)),
    case(genexpr_sum, t(3)),
    case(genexpr_any_all, t(3), [True, False]),
    case(genexpr_tuple, t(3, 2)),
    case(genexpr_max_of_shapes, t(2, 3), t(2, 5)),
    case(genexpr_into_cat, t(4)),
    case(listcomp_of_method_calls, t(6)),
    case(listcomp_nested_loops_flat, t(3)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_comprehensions(fn, args, opts):
    check(fn, *args, **opts)
