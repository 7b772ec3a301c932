"""Differential cases: mutations of Python state the function can see are replayed exactly
(list/dict arguments, object and module attributes, globals, closure cells, tensor arguments)."""

# ruff: noqa: B009, B010  # the corpus spells these constructs on purpose: it tests them

from __future__ import annotations

import copy

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, case, check, t
from torch import nn


class Box:
    def __init__(self) -> None:
        self.value = 1.0
        self.history = []


def list_append_argument(x, log):
    y = x * 2
    log.append(y)
    return y + 1


def list_append_python_values(x, log):
    log.append(x.shape[0])
    log.append("seen")
    return x.cos()


def list_extend_and_pop_argument(x, items):
    items.extend([x, x * 2])
    first = items.pop(0)
    return first * x


def list_setitem_argument(x, items):
    items[0] = x + 100
    items[-1] = "last"
    return x * 2


def list_clear_argument(x, items):
    items.clear()
    return x + 1


def list_nested_mutation(x, nested):
    nested[0].append(x.sum())
    nested[1]["k"] = x.mean()
    return x - 1


def dict_set_key_argument(x, d):
    d["out"] = x * 3
    d["count"] = d.get("count", 0) + 1
    return x + 1


def dict_update_and_delete_argument(x, d):
    d.update({"a": x, "b": 2})
    del d["old"]
    return x * 2


def dict_setdefault_argument(x, cache):
    cache.setdefault("x", x * 5)
    return cache["x"] + 1


def object_setattr(x, box):
    box.value = box.value * 2
    box.new_attr = x.sum()
    return x * box.value


def object_attribute_list_append(x, box):
    box.history.append(x.mean())
    return x + len(box.history)


def object_setattr_builtin(x, box):
    setattr(box, "value", 7.0)
    return x * getattr(box, "value")


def object_delattr(x, box):
    box.tmp = 1
    del box.tmp
    return x + hasattr(box, "tmp")


def tensor_argument_inplace(x, y):
    x.add_(y)
    y.mul_(0.5)
    return x + y


def tensor_argument_in_list_inplace(x, items):
    items[0].sub_(x)
    return items[0] * 2


def mutation_then_read_back(x, d):
    d["scale"] = 4.0
    return x * d["scale"]


def returns_the_mutated_list(x, log):
    log.append(x + 1)
    return log


def new_list_with_alias_returned(x):
    inner = [x]
    outer = [inner, inner]
    inner.append(x * 2)
    return outer


CASES = [
    case(list_append_argument, t(4), []),
    case(list_append_python_values, t(3), [0]),
    case(list_extend_and_pop_argument, t(4), [2.0]),
    case(list_setitem_argument, t(4), [1, 2, 3]),
    case(list_clear_argument, t(4), [1, 2]),
    case(list_nested_mutation, t(4), [[], {}]),
    case(dict_set_key_argument, t(4), {"count": 5}),
    case(dict_update_and_delete_argument, t(4), {"old": 1, "keep": 2}),
    case(dict_setdefault_argument, t(4), {}),
    case(object_setattr, t(4), Box()),
    case(object_attribute_list_append, t(4), Box()),
    case(object_setattr_builtin, t(4), Box()),
    case(object_delattr, t(4), Box()),
    case(tensor_argument_inplace, t(4), t(4, seed=1)),
    case(tensor_argument_in_list_inplace, t(4), [t(4, seed=1)]),
    case(mutation_then_read_back, t(4), {"scale": 1.0}),
    case(returns_the_mutated_list, t(4), [1]),
    case(new_list_with_alias_returned, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_side_effects(fn, args, opts):
    check(fn, *args, **opts)


def test_aliasing_preserved_when_same_list_passed_twice():
    def fn(x, a, b):
        a.append(x)
        return x * len(b)

    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    e_list, c_list = [], []
    expected = fn(t(4), e_list, e_list)
    actual = compiled(t(4), c_list, c_list)
    assert_same(actual, expected)
    assert_same(c_list, e_list)


COUNTER = 0
LAST = None
LOG: list[object] = []


def global_write_int(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * 2


def global_write_tensor(x):
    global LAST
    LAST = x * 3
    return x + 1


def global_list_append(x):
    LOG.append(x.shape)
    return x - 1


@pytest.mark.parametrize("fn", [global_write_int, global_write_tensor, global_list_append])
def test_global_writes(fn):
    global COUNTER, LAST
    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    for call in range(2):
        COUNTER, LAST = 10, None
        LOG.clear()
        expected = fn(t(4))
        eager_state = (COUNTER, LAST, list(LOG))
        COUNTER, LAST = 10, None
        LOG.clear()
        actual = compiled(t(4))
        assert_same(actual, expected, f"call {call + 1}: result")
        assert_same((COUNTER, LAST, list(LOG)), eager_state, f"call {call + 1}: globals")


def _make_counter():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count

    return step


def test_closure_cell_write_persists():
    eager, target = _make_counter(), _make_counter()
    capture.reset()
    compiled = capture.optimize(target, backend=CountingBackend(), fullgraph=True)
    for call in range(3):
        assert_same(compiled(t(4)), eager(t(4)), f"call {call + 1}")
    assert target.__closure__[0].cell_contents == eager.__closure__[0].cell_contents == 3


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0
        self.cache = {}

    def forward(self, x):
        self.calls += 1
        y = self.fc(x)
        self.last_mean = y.mean()
        self.cache["y"] = y
        return y


def test_module_setattr_replayed():
    torch.manual_seed(0)
    eager = Counting()
    twin = copy.deepcopy(eager)
    capture.reset()
    compiled = capture.optimize(twin, backend=CountingBackend(), fullgraph=True)
    for call in range(2):
        x = t(2, 4, seed=call)
        assert_same(compiled(x), eager(x), f"call {call + 1}")
        assert twin.calls == eager.calls
        assert_same(twin.last_mean, eager.last_mean)
        assert_same(twin.cache["y"], eager.cache["y"])


def test_side_effect_on_argument_happens_once_per_call():
    log = []

    def fn(x, out):
        out.append(len(out))
        return x + 1

    capture.reset()
    compiled = capture.optimize(fn, backend=CountingBackend(), fullgraph=True)
    for _ in range(3):
        compiled(t(4), log)
    assert log == [0, 1, 2]
