"""Differential cases: more Python seen in model code: match statements, user-defined context
managers (classes and @contextmanager), imports inside functions, augmented assignment on
subscripts and attributes, chained assignment, tuple comparison, `del` of items, f-string `=`,
module subclasses calling super().forward, Sequential subclasses, EMA buffer updates."""

from __future__ import annotations

import contextlib

import pytest
import torch
from _differential import case, check, check_module, t
from torch import nn


def match_on_string(x, mode):
    match mode:
        case "double":
            return x * 2
        case "half" | "third":
            return x / 2
        case _:
            return x + 1


def match_on_tuple_shape(x):
    match x.shape:
        case (n,):
            return x * n
        case (n, m):
            return x.sum(0) * (n + m)
        case _:
            return x.flatten()


def match_on_mapping(x, cfg):
    match cfg:
        case {"act": "relu", "scale": s}:
            return x.relu() * s
        case {"act": act}:
            return x * len(act)
    return x - 1


class Scaled:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return 3.0

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


def user_context_manager_class(x):
    log: list[str] = []
    with Scaled(log) as k:
        y = x * k
    return y, log


@contextlib.contextmanager
def _tagged(tags, name):
    tags.append(f"+{name}")
    try:
        yield len(tags)
    finally:
        tags.append(f"-{name}")


def generator_context_manager(x):
    tags: list[str] = []
    with _tagged(tags, "a") as n:
        y = x + n
    return y, tags


def import_inside_function(x):
    import math

    import torch.nn.functional as F

    return F.relu(x) * math.e


def augassign_subscript_and_attribute(x, d, box):
    d["n"] += 1
    d["t"] *= 2
    box.count += 10
    return x * d["n"] + box.count


def augassign_list_item_argument(x, lst):
    lst[0] *= 2
    lst[-1] += x.sum()
    return x + lst[0]


def chained_assignment(x):
    a = b = x + 1
    c, d = e = (x * 2, x * 3)
    return a + b + c + d + len(e)


def tuple_comparison(x, version):
    if version >= (2, 0) and (1, 2) < (1, 3):
        return x * 2
    return x


def del_list_item_argument(x, lst):
    del lst[0]
    del lst[-1:]
    return x * len(lst)


def fstring_equals_specifier(x):
    n = x.shape[0]
    return x + 1, f"{n=}", f"{n + 1 = }"


def list_reverse_slice_and_range_len(x, items):
    out = x
    for i in range(len(items)):
        out = out + items[::-1][i] * i
    return out


def bool_short_circuit_side_effect(x, log):
    ok = bool(log) or log.append("empty") or True
    return x * ok, log


def int_methods(x):
    n = 12
    return x * n.bit_length() + (7.0).is_integer() + round(2.345, 2)


def nested_function_writes_global(x):
    def bump():
        global _BUMPS
        _BUMPS += 1

    bump()
    return x * 2


_BUMPS = 0


class Box:
    def __init__(self) -> None:
        self.count = 1


CASES = [
    case(match_on_string, t(4), "double"),
    case(match_on_string, t(4), "third", id="match_on_string_or_pattern"),
    case(match_on_tuple_shape, t(2, 3)),
    case(match_on_mapping, t(4), {"act": "relu", "scale": 2.0}),
    case(user_context_manager_class, t(4)),
    case(generator_context_manager, t(4)),
    case(import_inside_function, t(4)),
    case(augassign_subscript_and_attribute, t(4), {"n": 1, "t": t(4, seed=1)}, Box()),
    case(augassign_list_item_argument, t(4), [1.0, t(4, seed=1)]),
    case(chained_assignment, t(4)),
    case(tuple_comparison, t(4), (2, 1)),
    case(del_list_item_argument, t(4), [1, 2, 3, 4]),
    case(fstring_equals_specifier, t(3)),
    case(list_reverse_slice_and_range_len, t(4), [1.0, 2.0, 3.0]),
    case(bool_short_circuit_side_effect, t(4), []),
    case(int_methods, t(4)),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_python_misc(fn, args, opts):
    check(fn, *args, **opts)


def test_inlined_function_global_write():
    import capture
    from _differential import CountingBackend, assert_same

    global _BUMPS
    capture.reset()
    compiled = capture.optimize(nested_function_writes_global, backend=CountingBackend(),
                                fullgraph=True)
    _BUMPS = 0
    expected = nested_function_writes_global(t(4))
    _BUMPS = 0
    assert_same(compiled(t(4)), expected)
    assert _BUMPS == 1


class DoubledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class ResidualSequential(nn.Sequential):
    def forward(self, x):
        for module in self:
            x = x + module(x)
        return x


class EMA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        y = self.fc(x)
        if self.training:
            with torch.no_grad():
                self.running.mul_(0.9).add_(y.mean(0), alpha=0.1)
                self.steps += 1
        return y - self.running


class ArgsKwargsForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, *inputs, scale=1.0, **extra):
        out = sum(self.fc(v) for v in inputs) * scale
        return out + extra.get("bias", 0.0)


MODULES = [
    pytest.param(lambda: DoubledLinear(4, 3), (t(2, 4),), id="subclass_super_forward"),
    pytest.param(lambda: ResidualSequential(nn.Linear(4, 4), nn.Tanh()), (t(2, 4),),
                 id="sequential_subclass_iteration"),
    pytest.param(lambda: EMA(), (t(3, 4),), id="ema_buffer_update"),
    pytest.param(lambda: ArgsKwargsForward(), (t(2, 4), t(2, 4, seed=1)), id="star_args_forward"),
]


@pytest.mark.parametrize(("make", "args"), MODULES)
def test_module_misc(make, args):
    torch.manual_seed(0)
    check_module(make(), *args, grad=True)
