"""Differential cases: for loops over Python iterables and while loops with known conditions."""

from __future__ import annotations

import pytest
import torch
from _differential import case, check, t


def for_range(x):
    for _ in range(3):
        x = x * 2 + 1
    return x


def for_range_start_stop_step(x):
    acc = x * 0
    for i in range(1, 10, 3):
        acc = acc + x * i
    return acc


def for_range_negative_step(x):
    out = []
    for i in range(3, 0, -1):
        out.append(x * i)
    return torch.stack(out)


def for_list(x, scales):
    for s in scales:
        x = x * s
    return x


def for_tuple_of_tensors(x, ts):
    for w in ts:
        x = x @ w
    return x


def for_dict_keys(x, d):
    for k in d:
        x = x + d[k]
    return x


def for_dict_items_values(x, d):
    total = 0.0
    for v in d.values():
        total += v
    for k, v in d.items():
        x = x * v if k.startswith("m") else x + v
    return x + total


def for_zip(x, a, b):
    for u, v in zip(a, b):
        x = x * u + v
    return x


def for_enumerate_start(x, items):
    for i, s in enumerate(items, start=1):
        x = x + s * i
    return x


def for_reversed(x, items):
    out = []
    for s in reversed(items):
        out.append(x * s)
    return torch.cat(out)


def for_nested(x):
    acc = x * 0
    for i in range(3):
        for j in range(i):
            acc = acc + x * (i - j)
    return acc


def for_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + i
    return x


def for_continue(x):
    for i in range(6):
        if i % 2:
            continue
        x = x * 2 - i
    return x


def for_else(x, items):
    for v in items:
        if v < 0:
            break
    else:
        x = x + 100
    return x * 2


def for_early_return(x):
    for i in range(5):
        x = x + 1
        if i == 2:
            return x * 10
    return x


def for_over_tensor_rows(x):
    out = x[0] * 0
    for row in x:
        out = out + row.relu()
    return out


def for_over_shape(x):
    n = 1
    for d in x.shape:
        n *= d
    return x.reshape(n)


def for_over_split(x):
    outs = []
    for part in x.split(2, dim=0):
        outs.append(part.mean(0))
    return torch.stack(outs)


def while_counter(x):
    i = 0
    while i < 4:
        x = x + x.sin()
        i += 1
    return x


def while_list_pop(x, items):
    todo = list(items)
    while todo:
        x = x * todo.pop()
    return x


def while_true_break(x):
    n = 0
    while True:
        n += 1
        x = x - 0.5
        if n >= 3:
            break
    return x


def while_on_shape(x):
    while x.shape[-1] > 2:
        x = x[..., ::2] + x[..., 1::2]
    return x


def for_accumulate_python_list_of_shapes(x, ts):
    shapes = []
    for a in ts:
        shapes.append(a.shape[0])
    return x * sum(shapes)


CASES = [
    case(for_range, t(4)),
    case(for_range_start_stop_step, t(4)),
    case(for_range_negative_step, t(2)),
    case(for_list, t(4), [2.0, 0.5, -1.0]),
    case(for_tuple_of_tensors, t(2, 3), (t(3, 3, seed=1), t(3, 3, seed=2))),
    case(for_dict_keys, t(4), {"a": 1.0, "b": t(4, seed=1)}),
    case(for_dict_items_values, t(4), {"mul": 2.0, "add": 3.0}),
    case(for_zip, t(4), [1.0, 2.0, 3.0], [0.0, 1.0]),
    case(for_enumerate_start, t(4), [1.0, 2.0]),
    case(for_reversed, t(2), [1.0, 2.0, 3.0]),
    case(for_nested, t(4)),
    case(for_break, t(4)),
    case(for_continue, t(4)),
    case(for_else, t(4), [1, 2, 3], id="for_else_no_break"),
    case(for_else, t(4), [1, -2, 3], id="for_else_break"),
    case(for_early_return, t(4)),
    case(for_over_tensor_rows, t(3, 4)),
    case(for_over_shape, t(2, 3, 4)),
    case(for_over_split, t(6, 3)),
    case(while_counter, t(4)),
    case(while_list_pop, t(4), [2.0, 3.0]),
    case(while_true_break, t(4)),
    case(while_on_shape, t(2, 16)),
    case(for_accumulate_python_list_of_shapes, t(4), [t(2), t(3)]),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_loops(fn, args, opts):
    check(fn, *args, **opts)
