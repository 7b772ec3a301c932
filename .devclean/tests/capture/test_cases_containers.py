"""Differential cases: lists, tuples, dicts, sets, slices, namedtuples and dataclass instances."""

# ruff: noqa: PERF102  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

import pytest
import torch
from _differential import case, check, t

Pair = collections.namedtuple("Pair", ["first", "second"])


class Output(NamedTuple):
    logits: torch.Tensor
    hidden: torch.Tensor
    n: int


@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    count: int


def list_build_and_index(x):
    parts = [x, x * 2, x * 3]
    return parts[1] + parts[-1]


def list_append_local(x):
    out = []
    out.append(x.sin())
    out.append(x.cos())
    return torch.stack(out)


def list_extend_insert_pop(x):
    out = [x]
    out.extend([x + 1, x + 2])
    out.insert(0, x - 1)
    last = out.pop()
    return torch.cat(out) + last.sum()


def list_multiply_and_concat(x):
    zeros = [0] * 3
    items = zeros + [1, 2]
    return x * len(items) + sum(items)


def list_index_count(x, names):
    return x * names.index("b") + names.count("a")


def list_reverse_sort_python(x, values):
    vals = list(values)
    vals.sort()
    vals.reverse()
    return x * vals[0] - vals[-1]


def list_slice_assignment(x):
    parts = [x, x, x, x]
    parts[1:3] = [x * 10]
    return torch.stack(parts)


def list_returned(x):
    return [x + 1, x - 1]


def tuple_build_and_return_nested(x):
    return (x, (x * 2, [x * 3]))


def tuple_concat_and_count(x):
    sizes = (1, 2) + (3,)
    return x * sum(sizes) + sizes.count(2)


def dict_build_and_return(x):
    return {"a": x + 1, "b": x * 2}


def dict_update_and_items(x):
    d = {"a": 1.0}
    d.update(b=2.0, c=3.0)
    d["a"] = 5.0
    total = x * 0
    for k, v in d.items():
        total = total + v * x
    return total, list(d.keys())


def dict_pop_and_setdefault(x):
    d = {"a": x, "b": x * 2}
    a = d.pop("a")
    c = d.setdefault("c", x * 3)
    return a + c + d["b"], len(d)


def dict_with_int_keys(x):
    d = {0: x, 1: x + 1}
    return d[0] * d[1]


def dict_ordered(x):
    d = collections.OrderedDict()
    d["z"] = x
    d["a"] = x + 1
    return torch.stack(list(d.values())), list(d)


def dict_copy_is_independent(x, d):
    e = dict(d)
    e["new"] = 2.0
    return x * len(e) + len(d)


def set_membership_and_ops(x):
    s = {1, 2, 3}
    s.add(4)
    u = s | {5}
    both = s & {2, 4, 9}
    return x * len(u) + len(both) + (3 in s)


def slice_object(x):
    s = slice(1, 3)
    return x[s] * 2


def slice_from_python_values(x, start, stop):
    return x[start:stop].sum()


def namedtuple_in_and_out(x, p):
    return Pair(p.first * x, x + p.second)


def namedtuple_attribute_and_index(x, p):
    return p.first * x + p[1]


def namedtuple_class_returned(x):
    return Output(logits=x * 2, hidden=x + 1, n=3)


def namedtuple_replace_and_unpack(x):
    p = Pair(x, x * 2)
    q = p._replace(second=x * 5)
    a, b = q
    return a + b


def dataclass_input(x, s):
    return (x - s.mean) / s.count


def dataclass_created_and_returned(x):
    return Stats(mean=x.mean(0), count=x.shape[0])


def dataclass_fields_and_asdict_free(x, s):
    names = [f.name for f in dataclasses.fields(s)]
    return x * len(names)


def container_len_of_everything(x):
    return x * (len([1, 2]) + len((1,)) + len({"a": 1}) + len({1, 2, 3}) + len("abcd"))


def tensor_list_in_dict_in_list(x):
    data = [{"t": [x, x + 1]}, {"t": [x * 2]}]
    return sum(len(d["t"]) for d in data) * data[1]["t"][0]


CASES = [
    case(list_build_and_index, t(4)),
    case(list_append_local, t(4)),
    case(list_extend_insert_pop, t(3)),
    case(list_multiply_and_concat, t(4)),
    case(list_index_count, t(4), ["a", "b", "a"]),
    case(list_reverse_sort_python, t(4), [3, 1, 2]),
    case(list_slice_assignment, t(2)),
    case(list_returned, t(4)),
    case(tuple_build_and_return_nested, t(4)),
    case(tuple_concat_and_count, t(4)),
    case(dict_build_and_return, t(4)),
    case(dict_update_and_items, t(4)),
    case(dict_pop_and_setdefault, t(4)),
    case(dict_with_int_keys, t(4)),
    case(dict_ordered, t(4)),
    case(dict_copy_is_independent, t(4), {"a": 1}),
    case(set_membership_and_ops, t(4)),
    case(slice_object, t(5)),
    case(slice_from_python_values, t(6), 2, 5),
    case(namedtuple_in_and_out, t(4), Pair(2.0, 3.0)),
    case(namedtuple_attribute_and_index, t(4), Pair(t(4, seed=1), t(4, seed=2))),
    case(namedtuple_class_returned, t(4)),
    case(namedtuple_replace_and_unpack, t(4)),
    case(dataclass_input, t(3, 4), Stats(mean=t(4, seed=3), count=3)),
    case(dataclass_created_and_returned, t(3, 4)),
    case(dataclass_fields_and_asdict_free, t(4), Stats(mean=t(4), count=1)),
    case(container_len_of_everything, t(4)),
    case(tensor_list_in_dict_in_list, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_containers(fn, args, opts):
    check(fn, *args, **opts)
