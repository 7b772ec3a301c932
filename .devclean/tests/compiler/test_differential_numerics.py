"""Differential probes, issue 11 groups 1-8: tensor facts read by the program (version
counters, strides, conjugate and negative bits), modules restructured between calls, side
effects in helpers, generators and custom autograd functions, and the numeric corner cases
where a compiled kernel can part from eager (NaN propagation, ties, empty reductions, integer
wrap-around and rounding).

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


NAN = float("nan")
INF = float("inf")


# ------------------------------------------------------------ tensor facts


@probe
def version_counter_read() -> Probe:
    x = T(3)

    def f(t):
        t.add_(1.0)
        return t * 1, t._version

    return Probe(f, [lambda fn: fn(x)] * 3, lambda: x)


@probe
def strides_returned() -> Probe:
    def f(x):
        return x * 2, x.stride(), x.is_contiguous()

    x = T(3, 4)
    return Probe(f, [lambda fn: fn(x), lambda fn: fn(x.t()), lambda fn: fn(x[:, ::2])])


@probe
def conjugate_bit_input() -> Probe:
    z = torch.complex(T(3), T(3, seed=1))

    def f(t):
        return t * 2, t.is_conj()

    return Probe(f, [lambda fn: fn(z), lambda fn: fn(z.conj()), lambda fn: fn(z)])


@probe
def negative_bit_input() -> Probe:
    x = T(3)

    def f(t):
        return t + 1

    return Probe(f, [lambda fn: fn(x), lambda fn: fn(torch._neg_view(x)), lambda fn: fn(x)])


@probe
def in_place_on_an_offset_view_input() -> Probe:
    base = T(6)

    def f(v):
        v.mul_(10.0)
        return v.sum()

    return Probe(f, [lambda fn: fn(base[1:3]), lambda fn: fn(base[3:5]), lambda fn: fn(base[::2])],
                 lambda: base)


@probe
def same_tensor_in_two_keywords() -> Probe:
    x, y = T(3), T(3, seed=1)

    def f(*, a, b):
        a.add_(1.0)
        return b * 2

    return Probe(f, [lambda fn: fn(a=x, b=x), lambda fn: fn(a=x, b=y), lambda fn: fn(a=y, b=y)],
                 lambda: (x, y))


@probe
def rank_branch() -> Probe:
    def f(x):
        if x.ndim == 2:
            return x.sum(1)
        return x * 2

    return Probe(f, [lambda fn: fn(T(2, 3)), lambda fn: fn(T(3)), lambda fn: fn(T(2, 3)),
                     lambda fn: fn(T(1, 2, 3))])


# ------------------------------------------------------------ modules restructured


@probe
def submodule_replaced() -> Probe:
    torch.manual_seed(0)
    m = nn.Sequential()
    m.lin = nn.Linear(3, 3)
    m.act = nn.ReLU()

    def f(x):
        return m(x)

    def swap(fn):
        m.act = nn.Tanh()
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), swap, lambda fn: fn(T(2, 3, seed=1))])


@probe
def module_list_grows() -> Probe:
    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(3, 3)])

    def f(x):
        for layer in layers:
            x = layer(x)
        return x

    def grow(fn):
        layers.append(nn.Linear(3, 3))
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), grow, lambda fn: fn(T(2, 3))])


@probe
def module_dict_key_added() -> Probe:
    torch.manual_seed(0)
    heads = nn.ModuleDict({"a": nn.Linear(3, 1)})

    def f(x):
        return torch.cat([h(x) for h in heads.values()], dim=1), list(heads.keys())

    def add(fn):
        heads["b"] = nn.Linear(3, 2)
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), add, lambda fn: fn(T(2, 3))])


@probe
def root_training_flag_only() -> Probe:
    class M(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x - 2

    m = M()

    def evaluate(fn):
        m.training = False
        return fn(T(3))

    return Probe(m, [lambda fn: fn(T(3)), evaluate, lambda fn: fn(T(3))])


@probe
def module_dict_attribute_config() -> Probe:
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = {"k": 2.0, "act": "relu"}

        def forward(self, x):
            y = x * self.cfg["k"]
            return F.relu(y) if self.cfg["act"] == "relu" else torch.tanh(y)

    m = M()

    def change(fn):
        m.cfg["k"] = -1.0
        return fn(T(3))

    def act(fn):
        m.cfg["act"] = "tanh"
        return fn(T(3))

    return Probe(m, [lambda fn: fn(T(3)), change, act])


class Mode(enum.Enum):
    A = 1
    B = 2


MODE = Mode.A


@probe
def enum_global_rebound() -> Probe:
    global MODE
    MODE = Mode.A

    def f(x):
        return x * 2 if MODE is Mode.A else x + MODE.value

    def switch(fn):
        global MODE
        MODE = Mode.B
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), switch, lambda fn: fn(T(3))])


OP_NAME = "sin"


@probe
def torch_function_by_global_name() -> Probe:
    global OP_NAME
    OP_NAME = "sin"

    def f(x):
        return getattr(torch, OP_NAME)(x)

    def switch(fn):
        global OP_NAME
        OP_NAME = "cos"
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), switch, lambda fn: fn(T(3))])


@probe
def bound_method_of_another_object() -> Probe:
    class Scaler:
        def __init__(self):
            self.k = 2.0

        def apply(self, x):
            return x * self.k

    s = Scaler()
    cb = s.apply

    def f(x):
        return cb(x) + 1

    def change(fn):
        s.k = 5.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


# ------------------------------------------------------------ side effects in helpers


@probe
def side_effects_in_a_nested_helper_and_loop() -> Probe:
    log: list[Any] = []

    def record(tag, n):
        for i in range(n):
            log.append((tag, i))

    def f(x, n):
        record("a", n)
        _ = [log.append(("c", i)) for i in range(2)]
        return x * len(log)

    return Probe(f, [lambda fn: fn(T(3), 1), lambda fn: fn(T(3), 3), lambda fn: fn(T(3), 1)],
                 lambda: list(log))


@probe
def counter_in_init_of_an_object_made_inside() -> Probe:
    class Node:
        made = 0

        def __init__(self, v):
            type(self).made += 1
            self.v = v

    def f(x):
        a, b = Node(x), Node(x * 2)
        return a.v + b.v, Node.made

    return Probe(f, [lambda fn: fn(T(3))] * 3, lambda: Node.made)


@probe
def user_generator_with_side_effects() -> Probe:
    log: list[int] = []

    def gen(n):
        try:
            for i in range(n):
                log.append(i)
                yield i
        finally:
            log.append(-1)

    def f(x, n):
        total = x
        for i in gen(n):
            total = total + i
        return total

    return Probe(f, [lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 3)], lambda: list(log))


@probe
def list_argument_mutated_then_error() -> Probe:
    lst: list[int] = []

    def f(x, items, bad):
        items.append(1)
        if bad:
            raise KeyError("bad")
        return x * len(items)

    return Probe(f, [lambda fn: fn(T(3), lst, False), lambda fn: fn(T(3), lst, True),
                     lambda fn: fn(T(3), lst, False)], lambda: list(lst))


@probe
def set_changed_while_iterated() -> Probe:
    def f(x, s):
        for v in s:
            s.add(v + 10)
        return x

    return Probe(f, [lambda fn: fn(T(3), {1}), lambda fn: fn(T(3), set())])


SCALE_IN_BACKWARD = 2.0


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * SCALE_IN_BACKWARD


@probe
def custom_function_reads_a_global_in_backward() -> Probe:
    global SCALE_IN_BACKWARD
    SCALE_IN_BACKWARD = 2.0

    def f(x):
        return _ScaleGrad.apply(x).sum()

    def step(fn):
        x = T(3, grad=True)
        fn(x).backward()
        return x.grad

    def change(fn):
        global SCALE_IN_BACKWARD
        SCALE_IN_BACKWARD = -3.0
        return step(fn)

    return Probe(f, [step, change, step])


@probe
def checkpoint_inside() -> Probe:
    from torch.utils.checkpoint import checkpoint

    def block(x):
        return torch.sin(x) * x

    def f(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    def step(fn):
        x = T(3, grad=True)
        out = fn(x)
        out.backward()
        return out, x.grad

    return Probe(f, [step, step])


@probe
def training_steps_with_sgd_between() -> Probe:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def f(x):
        return m(x).pow(2).mean()

    def step(fn):
        opt.zero_grad()
        loss = fn(T(5, 3))
        loss.backward()
        opt.step()
        return loss

    return Probe(f, [step, step, step], lambda: [p.detach().clone() for p in m.parameters()])


# ------------------------------------------------------------ numerics


@probe
def nan_in_max_min_argmax() -> Probe:
    def f(x):
        return x.max(), x.min(), x.argmax(), x.amax(0), torch.maximum(x, torch.zeros_like(x))

    return Probe(f, [lambda fn: fn(torch.tensor([1.0, NAN, 3.0])),
                     lambda fn: fn(torch.tensor([[NAN, 1.0], [2.0, 0.0]])),
                     lambda fn: fn(torch.tensor([1.0, 2.0]))])


@probe
def argmax_and_max_ties() -> Probe:
    def f(x):
        v, i = x.max(dim=1)
        return x.argmax(dim=1), x.argmin(dim=1), v, i

    return Probe(f, [lambda fn: fn(torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])),
                     lambda fn: fn(torch.tensor([[0.0, 0.0, 0.0], [5.0, 1.0, 5.0]]))])


@probe
def clamp_and_relu_with_nan() -> Probe:
    def f(x):
        return x.clamp(-1.0, 1.0), F.relu(x), x.clamp(min=2.0, max=1.0), torch.nan_to_num(x)

    return Probe(f, [lambda fn: fn(torch.tensor([NAN, -5.0, 0.5, INF])),
                     lambda fn: fn(torch.tensor([-INF, 3.0]))])


@probe
def empty_reductions() -> Probe:
    def f(x):
        return x.sum(), x.prod(), x.mean(), x.sum(0)

    return Probe(f, [lambda fn: fn(torch.empty(0)), lambda fn: fn(torch.empty(0, 3)),
                     lambda fn: fn(T(2))])


@probe
def softmax_and_logsumexp_of_infinities() -> Probe:
    def f(x):
        return torch.softmax(x, dim=-1), torch.logsumexp(x, dim=-1), F.log_softmax(x, dim=-1)

    return Probe(f, [lambda fn: fn(torch.tensor([[-INF, -INF], [0.0, -INF]])),
                     lambda fn: fn(torch.tensor([[INF, 1.0], [2.0, 1.0]]))])


@probe
def integer_wraparound() -> Probe:
    def f(a, b):
        return a + 1, b - 3, a * 2, (a.int() * 100000).sum()

    return Probe(f, [lambda fn: fn(torch.tensor([127, -128], dtype=torch.int8),
                                    torch.tensor([1, 255], dtype=torch.uint8)),
                     lambda fn: fn(torch.tensor([100, 0], dtype=torch.int8),
                                   torch.tensor([0, 2], dtype=torch.uint8))])


@probe
def integer_rounding_modes() -> Probe:
    def f(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                torch.remainder(a, b), torch.fmod(a, b), a // b)

    return Probe(f, [lambda fn: fn(torch.tensor([-7, 7, -8]), torch.tensor([2, -2, 3])),
                     lambda fn: fn(torch.tensor([-7.5, 7.5]), torch.tensor([2.0, -2.0]))])


@probe
def float_rounding_and_casts() -> Probe:
    def f(x):
        return torch.round(x), x.int(), x.long(), torch.round(x, decimals=1), x.to(torch.uint8)

    return Probe(f, [lambda fn: fn(torch.tensor([0.5, 1.5, 2.5, -0.5, -1.7, 3.45])),
                     lambda fn: fn(torch.tensor([-2.5, 250.9]))])


@probe
def bool_arithmetic_and_promotion() -> Probe:
    def f(b, i):
        return b + b, b * 3, b & ~b, i + True, torch.where(b, i, 2.5), b.sum()

    return Probe(f, [lambda fn: fn(torch.tensor([True, False]), torch.tensor([1, 2])),
                     lambda fn: fn(torch.tensor([False, False]), torch.tensor([3, 4]))])


@probe
def sign_of_zero_results() -> Probe:
    def f(x):
        y = x * 0.0
        return 1.0 / y, torch.sign(x), torch.copysign(torch.ones_like(x), y), torch.atan2(y, -x.abs())

    return Probe(f, [lambda fn: fn(torch.tensor([-1.0, 2.0, -0.0])),
                     lambda fn: fn(torch.tensor([0.0, -3.0]))])


@probe
def sort_and_topk_with_ties() -> Probe:
    def f(x):
        v, i = torch.sort(x, stable=True)
        tv, ti = torch.topk(x, 2)
        return v, i, tv, ti

    return Probe(f, [lambda fn: fn(torch.tensor([3.0, 1.0, 3.0, 2.0])),
                     lambda fn: fn(torch.tensor([1.0, 1.0, 1.0]))])


@probe
def integer_sum_promotes() -> Probe:
    def f(x):
        return x.sum(), x.sum(dtype=torch.int32), x.cumsum(0), x.float().mean()

    return Probe(f, [lambda fn: fn(torch.tensor([2**30, 2**30, 2**30], dtype=torch.int32)),
                     lambda fn: fn(torch.tensor([1, 2], dtype=torch.int16))])


@probe
def errors_of_shapes_and_sizes() -> Probe:
    def f(x, kind):
        if kind == "reshape":
            return x.reshape(-1, -1)
        if kind == "zeros":
            return torch.zeros(-1)
        if kind == "stack":
            return torch.stack([])
        return x * 2

    return Probe(f, [lambda fn: fn(T(4), "ok"), lambda fn: fn(T(4), "reshape"),
                     lambda fn: fn(T(4), "zeros"), lambda fn: fn(T(4), "stack"),
                     lambda fn: fn(T(4), "ok")])


@probe
def linear_shape_mismatch() -> Probe:
    w = T(2, 3)

    def f(x):
        return F.linear(x, w) + 1

    return Probe(f, [lambda fn: fn(T(4, 3)), lambda fn: fn(T(4, 2)), lambda fn: fn(T(1, 3))])


@probe
def python_index_out_of_range_of_a_tensor() -> Probe:
    def f(x, i):
        return x[i] + 1

    return Probe(f, [lambda fn: fn(torch.tensor([1, 2]), 1), lambda fn: fn(torch.tensor([1, 2]), 5),
                     lambda fn: fn(torch.tensor([1, 2]), -2)])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
