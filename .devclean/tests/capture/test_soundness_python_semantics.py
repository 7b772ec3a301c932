"""Python semantics kept exactly (issue 11, group 4): `-0.0` and `0.0`, NaN, and `1`/`1.0`/
`True` are different constants; changing a dict while iterating over it raises as in eager;
a list appended while iterated is iterated to its new end; dict views are live; set
iteration order, sorted and reversed. Each program runs eagerly and compiled over several
calls with the arguments or globals changed between calls (see `_twin.py`)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from _twin import BACKENDS, twin_run


def _with(*values: Any) -> Any:
    def args(i: int) -> tuple[Any, ...]:
        return (torch.arange(3.0) + 1, values[i % len(values)])

    return args


SIGNED_ZERO_ARG = """
def f(x, c):
    return x / c, math.copysign(1.0, c), c
"""

SIGNED_ZERO_GLOBAL = """
SCALE = 0.0

def f(x):
    return x * SCALE, 1.0 / (SCALE + 1e-300 if SCALE == 0 else SCALE) if False else x + SCALE, str(SCALE)
"""

NAN_ARG = """
def f(x, c):
    return x + c, c != c
"""

NUMBER_TYPES = """
def f(x, c):
    return x * c, type(c).__name__, [c], c / 2
"""


def _flip_scale(ns: dict[str, Any], i: int) -> None:
    ns["SCALE"] = -0.0 if i % 2 else 0.0


DICT_CHANGED_WHILE_ITERATING = """
def f(x, d):
    for k in d:
        d[k + "_copy"] = 1
    return x
"""

DICT_VALUES_CHANGED_WHILE_ITERATING = """
def f(x, d):
    for k in d:
        d[k] = d[k] + 1
    return x + len(d)
"""

DICT_POP_WHILE_ITERATING = """
def f(x, d):
    for k in d:
        if k == "a":
            d.pop("b")
    return x
"""

LIST_APPENDED_WHILE_ITERATED = """
def f(x, lst):
    out = []
    for v in lst:
        if v < 3:
            lst.append(v + 10)
        out.append(v)
    return x * len(out), out
"""

LIST_GLOBAL_APPENDED_WHILE_ITERATED = """
QUEUE = [1, 2]

def f(x):
    total = 0
    for v in QUEUE:
        total += v
        if len(QUEUE) < 5:
            QUEUE.append(v * 10)
    return x + total
"""

KEYS_VIEW_LIVE = """
def f(x, d):
    ks = d.keys()
    vs = d.values()
    its = d.items()
    d["new"] = 5
    return x + len(ks), list(ks), list(vs), list(its)
"""

KEYS_VIEW_LIVE_GLOBAL = """
D = {"a": 1}

def f(x):
    ks = D.keys()
    D["n" + str(len(D))] = 1
    return x * len(ks), sorted(ks)
"""

SET_ORDER = """
def f(x):
    s = {10, 1, 5, 17, 3}
    s.add(9)
    s.discard(1)
    order = [v for v in s]
    strs = {"b", "a", "c", "zz"}
    return x + order[0], order, list(strs), sorted(strs), list(reversed(order))
"""

SET_ORDER_ARG = """
def f(x, s):
    return x + 1, [v for v in s], sorted(s, reverse=True)
"""

SORTED_REVERSED = """
def f(x, items):
    a = sorted(items, key=lambda p: p[1])
    b = list(reversed(items))
    c = sorted(items, reverse=True)
    d = max(items, key=lambda p: p[1])
    return x + len(a), a, b, c, d
"""

MIXED_NUMBER_SORT = """
def f(x):
    vals = [1, 1.0, True, 0.5, False, 0]
    return x + 1, sorted(vals), max(vals), min(vals), sum(vals)
"""

REVERSED_ITERATOR_OF_GLOBAL = """
L = [1, 2, 3]

def f(x):
    r = reversed(L)
    first = next(r)
    return x * first, list(r)
"""

ENUMERATE_APPENDED = """
def f(x, lst):
    seen = []
    for i, v in enumerate(lst):
        if v < 3 and len(lst) < 6:
            lst.append(v + 10)
        seen.append((i, v))
    return x + len(seen), seen
"""

ITER_NEXT_APPENDED = """
def f(x, lst):
    it = iter(lst)
    first = next(it)
    lst.append(99)
    rest = list(it)
    return x * first, rest
"""

SET_POP_AND_ORDER = """
def f(x):
    s = set()
    for v in (40, 8, 3, 16, 1, 24):
        s.add(v)
    s.discard(8)
    s.add(32)
    first = s.pop()
    return x + first, first, list(s), {v % 5 for v in s}
"""

DICT_POPITEM_ORDER = """
def f(x, d):
    d["z"] = 0
    last = d.popitem()
    merged = {**d, "a": -1, **{"q": 1}}
    return x + len(merged), last, list(merged.items()), dict.fromkeys(d, 0)
"""

MIN_MAX_TIES = """
def f(x, items):
    return x, min(items, key=lambda p: p[1]), max(items, key=lambda p: p[1]), sorted(items, key=lambda p: p[1])
"""

EQUAL_KEYS_OF_OTHER_TYPES = """
def f(x, d):
    lit = {1: "a", True: "b", 1.0: "c"}
    d[True] = "t"
    d[2.0] = "two"
    built = dict([(0, "z"), (False, "f")])
    s = {1, True, 1.0}
    s2 = set()
    s2.add(0.0)
    s2.add(False)
    return x + 1, list(lit.items()), list(d.items()), list(built.items()), list(s), list(s2)
"""


def _int_dicts(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), {1: "one", 2: i})


def _dicts(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), {"a": i, "b": 2})


def _lists(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), [1, 5, 2][: 2 + i % 2])


def _sets(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), [{1, 9, 17}, {17, 9, 1}, {33, 1}][i % 3])


def _pairs(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0), [("a", 2), ("b", 1), ("c", 2 + i)])


def _x(i: int) -> tuple[Any, ...]:
    return (torch.arange(3.0) + i,)


# (id, source, args, between, most compiles over 5 calls or None)
CASES: list[Any] = [
    ("signed_zero_arg", SIGNED_ZERO_ARG, _with(0.0, -0.0), None, None),
    ("signed_zero_arg_neg_first", SIGNED_ZERO_ARG, _with(-0.0, 0.0), None, None),
    ("signed_zero_global", SIGNED_ZERO_GLOBAL, _x, _flip_scale, None),
    ("nan_arg", NAN_ARG, _with(math.nan, math.nan, 1.0), None, 3),
    ("number_types_int_float_bool", NUMBER_TYPES, _with(1, 1.0, True), None, None),
    ("number_types_bool_int", NUMBER_TYPES, _with(True, 1, 0, False, 0.0), None, None),
    ("dict_changed_while_iterating", DICT_CHANGED_WHILE_ITERATING, _dicts, None, None),
    ("dict_values_changed_while_iterating", DICT_VALUES_CHANGED_WHILE_ITERATING, _dicts, None, None),
    ("dict_pop_while_iterating", DICT_POP_WHILE_ITERATING, _dicts, None, None),
    ("list_appended_while_iterated", LIST_APPENDED_WHILE_ITERATED, _lists, None, None),
    ("global_list_appended_while_iterated", LIST_GLOBAL_APPENDED_WHILE_ITERATED, _x, None, None),
    ("keys_view_live", KEYS_VIEW_LIVE, _dicts, None, None),
    ("keys_view_live_global", KEYS_VIEW_LIVE_GLOBAL, _x, None, None),
    ("set_order", SET_ORDER, _x, None, None),
    ("set_order_arg", SET_ORDER_ARG, _sets, None, None),
    ("sorted_reversed", SORTED_REVERSED, _pairs, None, None),
    ("mixed_number_sort", MIXED_NUMBER_SORT, _x, None, None),
    ("reversed_iterator_of_global", REVERSED_ITERATOR_OF_GLOBAL, _x, None, None),
    ("enumerate_appended", ENUMERATE_APPENDED, _lists, None, None),
    ("iter_next_appended", ITER_NEXT_APPENDED, _lists, None, None),
    ("set_pop_and_order", SET_POP_AND_ORDER, _x, None, None),
    ("dict_popitem_order", DICT_POPITEM_ORDER, _dicts, None, None),
    ("min_max_ties", MIN_MAX_TIES, _pairs, None, None),
    ("equal_keys_of_other_types", EQUAL_KEYS_OF_OTHER_TYPES, _int_dicts, None, None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("src", "args", "between", "max_compiles"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_python_semantics(src: str, args: Any, between: Any, max_compiles: int | None,
                          backend: str) -> None:
    twin_run(src, args, calls=5, between=between, backend=backend, max_compiles=max_compiles)


def test_nan_constant_does_not_recompile_every_call() -> None:
    """A NaN argument is the same constant on every call: one entry, not one per call."""
    result = twin_run(NAN_ARG, _with(math.nan), calls=5)
    assert result.compiles == 1, result.compiles
