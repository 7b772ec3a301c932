# ruff: noqa: RUF012  # a probe corpus: a class-level list on purpose
"""Differential probes, issue 11 groups 1-3: state the program reads, changed between calls
from outside the compiled function (a partial's keywords, a mutable default, a closure's
list, a class-level list, parameters swapped or cast, buffers added, hooks on parameters).

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from _probe_runner import Probe, T, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


@probe
def partial_keywords_mutated() -> Probe:
    def mul(x, k=1.0):
        return x * k

    p = functools.partial(mul, k=2.0)

    def f(x):
        return p(x) + 1

    def change(fn):
        p.keywords["k"] = -4.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def mutable_default_changed_from_outside() -> Probe:
    def f(x, scales=[1.0]):  # noqa: B006 - the mutable default is the point
        return x * sum(scales)

    def change(fn):
        f.__defaults__[0].append(2.0)
        return fn(T(3))

    def set_item(fn):
        f.__defaults__[0][0] = 10.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, set_item])


@probe
def closure_list_changed_from_outside() -> Probe:
    weights = [1.0, 2.0]

    def f(x):
        return torch.stack([x * w for w in weights]).sum(0)

    def change(fn):
        weights[1] = -5.0
        return fn(T(3))

    def grow(fn):
        weights.append(3.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, grow])


@probe
def class_level_list_changed_from_outside() -> Probe:
    class Registry:
        items: list[float] = [1.0]

    def f(x):
        return x * len(Registry.items) + Registry.items[-1]

    def grow(fn):
        Registry.items.append(7.0)
        return fn(T(3))

    def rebind(fn):
        Registry.items = [0.5]
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), grow, rebind])


@probe
def instance_tensor_replaced_through_dict() -> Probe:
    class Holder:
        pass

    h = Holder()
    h.w = T(3)

    def f(x):
        return x * h.w

    def replace(fn):
        h.__dict__["w"] = T(3, seed=9)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3))])


@probe
def parameter_data_swapped() -> Probe:
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(x):
        return m(x)

    def same_shape(fn):
        m.weight.data = torch.ones(2, 3)
        return fn(T(1, 3))

    def new_shape(fn):
        m.weight.data = torch.ones(2, 3).t().contiguous().t()
        return fn(T(1, 3))

    return Probe(f, [lambda fn: fn(T(1, 3)), same_shape, new_shape])


@probe
def module_cast_between_calls() -> Probe:
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(x):
        return m(x.to(m.weight.dtype))

    def double(fn):
        m.double()
        return fn(T(1, 3))

    def back(fn):
        m.float()
        return fn(T(1, 3))

    return Probe(f, [lambda fn: fn(T(1, 3)), double, back])


@probe
def buffer_added_and_read_with_default() -> Probe:
    m = nn.Module()

    def f(x):
        extra = getattr(m, "extra", None)
        return x if extra is None else x + extra

    def add(fn):
        m.register_buffer("extra", torch.full((3,), 5.0), persistent=False)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), add, lambda fn: fn(T(3))])


@probe
def gradient_hook_on_a_parameter_added() -> Probe:
    torch.manual_seed(0)
    m = nn.Linear(3, 1)
    handles: list[Any] = []

    def f(x):
        return m(x).sum()

    def step(fn):
        m.zero_grad()
        fn(T(2, 3)).backward()
        return m.weight.grad.clone()

    def hook(fn):
        handles.append(m.weight.register_hook(lambda g: g * 0))
        return step(fn)

    def unhook(fn):
        handles.pop().remove()
        return step(fn)

    return Probe(f, [step, hook, unhook])


@probe
def global_read_through_sys_modules() -> Probe:
    mod = sys.modules[__name__]
    mod.H11_SCALE = 2.0  # type: ignore[attr-defined]

    def f(x):
        return x * sys.modules[__name__].H11_SCALE

    def change(fn):
        mod.H11_SCALE = -1.0  # type: ignore[attr-defined]
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))],
                 cleanup=lambda: delattr(mod, "H11_SCALE"))


@probe
def nested_dict_list_changed_from_outside() -> Probe:
    cfg: dict[str, Any] = {"layers": [{"k": 1.0}, {"k": 2.0}]}

    def f(x):
        for layer in cfg["layers"]:
            x = x * layer["k"]
        return x

    def change(fn):
        cfg["layers"][1]["k"] = 3.0
        return fn(T(3))

    def drop(fn):
        cfg["layers"].pop(0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, drop])


@probe
def weight_tied_through_attribute_alias() -> Probe:
    torch.manual_seed(0)
    emb = nn.Embedding(4, 3)
    head = nn.Linear(3, 4, bias=False)

    def f(idx):
        return head(emb(idx))

    def tie(fn):
        head.weight = emb.weight
        return fn(torch.tensor([1, 2]))

    def update(fn):
        with torch.no_grad():
            emb.weight.mul_(2.0)
        return fn(torch.tensor([1, 2]))

    return Probe(f, [lambda fn: fn(torch.tensor([1, 2])), tie, update])


@probe
def object_method_rebound_to_another_function() -> Probe:
    class O:
        def go(self, x):
            return x * 2

    o = O()

    def other(x):
        return x - 7

    def f(x):
        return o.go(x)

    def rebind(fn):
        o.go = other
        return fn(T(3))

    def restore(fn):
        del o.go
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rebind, restore])


@probe
def closure_cell_of_a_helper_changed() -> Probe:
    def make_helper(k):
        def helper(x):
            return x * k
        return helper

    box = {"h": make_helper(2.0)}

    def f(x):
        return box["h"](x) + 1

    def change(fn):
        box["h"] = make_helper(5.0)
        return fn(T(3))

    def same_code_other_cell(fn):
        box["h"].__closure__[0].cell_contents = -1.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, same_code_other_cell])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
