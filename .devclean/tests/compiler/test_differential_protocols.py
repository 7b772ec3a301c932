# ruff: noqa: S102  # a probe corpus: a function with its own globals is made with exec
"""Differential probes, issue 11 groups 1-8 through Python's protocols and torch's flags:
dunder methods replaced on a class (`__add__`, `__len__`, `__bool__`, `__getitem__`,
`__iter__`), functions with other globals, containers of the standard library mutated in
place, Python arithmetic corner cases, torch's global flags read in the function, and errors
ATen raises on values or dtypes.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import builtins
import collections
import functools
import heapq
import math
import sys
import types
from typing import Any

import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


# ------------------------------------------------------------ dunder methods replaced


def _protocol_class() -> type:
    class Box:
        def __init__(self, k: float) -> None:
            self.k = k
            self.items = [1.0, 2.0]

        def __add__(self, other):
            return other * self.k

        def __len__(self):
            return len(self.items)

        def __bool__(self):
            return self.k > 0

        def __getitem__(self, i):
            return self.items[i]

        def __iter__(self):
            return iter(self.items)

    return Box


@probe
def add_dunder_replaced_on_class() -> Probe:
    Box = _protocol_class()
    b = Box(2.0)

    def f(x):
        return b + x

    def replace(fn):
        Box.__add__ = lambda self, other: other - self.k
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3))])


@probe
def len_dunder_replaced_on_class() -> Probe:
    Box = _protocol_class()
    b = Box(2.0)

    def f(x):
        return x * len(b)

    def replace(fn):
        Box.__len__ = lambda self: 7
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3))])


@probe
def bool_dunder_and_state() -> Probe:
    Box = _protocol_class()
    b = Box(2.0)

    def f(x):
        return x + 1 if b else x - 1

    def negate(fn):
        b.k = -1.0
        return fn(T(3))

    def replace(fn):
        Box.__bool__ = lambda self: True
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), negate, replace])


@probe
def getitem_and_iter_dunders() -> Probe:
    Box = _protocol_class()
    b = Box(2.0)

    def f(x):
        return x * b[0] + sum(v for v in b)

    def mutate(fn):
        b.items[0] = 10.0
        return fn(T(3))

    def replace(fn):
        Box.__getitem__ = lambda self, i: -1.0
        Box.__iter__ = lambda self: iter([100.0])
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), mutate, replace])


@probe
def wrapped_helper_closure_changed() -> Probe:
    box = {"scale": 2.0}

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(x):
            return fn(x) * box["scale"]
        return wrapper

    @deco
    def helper(x):
        return x + 1

    def f(x):
        return helper(x)

    def change(fn):
        box["scale"] = -3.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def function_with_its_own_globals() -> Probe:
    namespace: dict[str, Any] = {"K": 2.0, "__builtins__": builtins}
    exec("def helper(x):\n    return x * K\n", namespace)
    helper = namespace["helper"]

    def f(x):
        return helper(x) + 1

    def change(fn):
        namespace["K"] = 9.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def builtin_patched_in_builtins() -> Probe:
    original = builtins.abs

    def f(x, n):
        return x * abs(n)

    def patch(fn):
        builtins.abs = lambda v: 100
        return fn(T(3), -2)

    def restore(fn):
        builtins.abs = original
        return fn(T(3), -2)

    return Probe(f, [lambda fn: fn(T(3), -2), patch, restore],
                 cleanup=lambda: setattr(builtins, "abs", original))


@probe
def module_alias_global_rebound() -> Probe:
    g = globals()
    g["H11_MATH"] = math

    def f(x):
        return x * H11_MATH.pi  # noqa: F821 - set in globals by the probe

    def rebind(fn):
        g["H11_MATH"] = types.SimpleNamespace(pi=3.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rebind, lambda fn: fn(T(3))],
                 cleanup=lambda: g.pop("H11_MATH", None))


@probe
def plain_tensor_attribute_of_a_module_replaced() -> Probe:
    m = nn.Module()
    m.scale = torch.tensor(2.0)

    def f(x):
        return x * m.scale

    def replace(fn):
        m.scale = torch.tensor(-5.0)
        return fn(T(3))

    def in_place(fn):
        m.scale.fill_(7.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, in_place])


@probe
def parameters_tied_then_untied() -> Probe:
    m = nn.Module()
    m.a = nn.Parameter(torch.ones(3))
    m.b = m.a

    def f(x):
        with torch.no_grad():
            m.a.mul_(2.0)
        return x * m.b

    def untie(fn):
        m.b = nn.Parameter(torch.ones(3))
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), untie, lambda fn: fn(T(3))],
                 lambda: (m.a.detach(), m.b.detach()))


# ------------------------------------------------------------ standard library containers


H11_HEAP: list[Any] = []


@probe
def heapq_on_a_global_list() -> Probe:
    H11_HEAP.clear()

    def f(x, k):
        heapq.heappush(H11_HEAP, k)
        return x * H11_HEAP[0]

    return Probe(f, [lambda fn: fn(T(3), 5), lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 9)],
                 lambda: list(H11_HEAP))


@probe
def deque_with_maxlen() -> Probe:
    dq: collections.deque[Any] = collections.deque(maxlen=2)

    def f(x):
        dq.append(float(x.shape[0]))
        return x * len(dq) + dq[0]

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4)), lambda fn: fn(T(5))],
                 lambda: list(dq))


@probe
def counter_and_defaultdict() -> Probe:
    counts: collections.Counter[str] = collections.Counter()
    groups: collections.defaultdict[str, list[Any]] = collections.defaultdict(list)

    def f(x, tag):
        counts[tag] += 1
        groups[tag].append(counts[tag])
        return x * counts[tag]

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "b")],
                 lambda: (dict(counts), dict(groups)))


@probe
def global_list_cleared_and_dict_popitem() -> Probe:
    log = [1, 2]
    table = {"a": 1, "b": 2}

    def f(x):
        log.clear()
        log.append(len(table))
        k, v = table.popitem()
        return x * v, k

    def refill(fn):
        table["z"] = 26
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), refill, lambda fn: fn(T(3))],
                 lambda: (list(log), dict(table)))


@probe
def instance_dict_update_and_globals_write() -> Probe:
    class O:
        pass

    o = O()
    g = globals()

    def f(x):
        o.__dict__.update(k=float(x.shape[0]))
        g["H11_WRITTEN"] = o.k
        return x * o.k

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4))],
                 lambda: (vars(o), g.get("H11_WRITTEN")),
                 cleanup=lambda: g.pop("H11_WRITTEN", None))


@probe
def property_setter_side_effect() -> Probe:
    class P:
        def __init__(self) -> None:
            self._v = 0.0
            self.sets = 0

        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, value):
            self.sets += 1
            self._v = value

    p = P()

    def f(x):
        p.v = p.v + 1.0
        return x * p.v

    return Probe(f, [lambda fn: fn(T(3))] * 3, lambda: (p._v, p.sets))


# ------------------------------------------------------------ Python arithmetic


@probe
def int_float_dict_keys() -> Probe:
    table = {1: "int", 2.5: "float"}

    def f(x, k):
        return x * len(table[k]), table.get(k * 2, "none")

    return Probe(f, [lambda fn: fn(T(3), 1), lambda fn: fn(T(3), 1.0), lambda fn: fn(T(3), True)])


@probe
def division_and_powers() -> Probe:
    def f(x, a, b):
        q, r = divmod(a, b)
        return x * (a / b) + q + r + pow(a, -1) + int(-2.5)

    return Probe(f, [lambda fn: fn(T(3), 7, 2), lambda fn: fn(T(3), -7, 2),
                     lambda fn: fn(T(3), 7, -3)])


@probe
def star_unpacking_length_changes() -> Probe:
    def f(x, seq):
        first, *rest = seq
        return x * first + len(rest)

    return Probe(f, [lambda fn: fn(T(3), [1, 2, 3]), lambda fn: fn(T(3), [4]),
                     lambda fn: fn(T(3), [5, 6])])


@probe
def python_errors_caught() -> Probe:
    def f(x, items):
        try:
            i = items.index(3)
        except ValueError:
            i = -1
        try:
            m = min(items)
        except ValueError:
            m = 0
        return x * i + m

    return Probe(f, [lambda fn: fn(T(3), [1, 3]), lambda fn: fn(T(3), [1]),
                     lambda fn: fn(T(3), [])])


@probe
def zip_strict_raises() -> Probe:
    def f(x, a, b):
        return x * sum(p * q for p, q in zip(a, b, strict=True))

    return Probe(f, [lambda fn: fn(T(3), [1, 2], [3, 4]), lambda fn: fn(T(3), [1, 2], [3]),
                     lambda fn: fn(T(3), [1], [2])])


@probe
def infinities_and_all_any() -> Probe:
    def f(x, s):
        return x * s if math.isfinite(s) else x + 1, all([]), any([]), s > 1e308

    return Probe(f, [lambda fn: fn(T(3), 2.0), lambda fn: fn(T(3), float("inf")),
                     lambda fn: fn(T(3), -float("inf"))])


@probe
def shape_compared_with_a_tuple() -> Probe:
    def f(x):
        if x.shape == (2, 3):
            return x.sum(0)
        return x.sum()

    return Probe(f, [lambda fn: fn(T(2, 3)), lambda fn: fn(T(3, 2)), lambda fn: fn(T(2, 3))])


@probe
def dtype_as_string_branch() -> Probe:
    def f(x):
        if str(x.dtype) == "torch.float64":
            return x * 2
        return x + 1, str(x.dtype)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3).double()), lambda fn: fn(T(3))])


# ------------------------------------------------------------ torch's global flags


@probe
def initial_seed_read_after_reseeding() -> Probe:
    def f(x):
        return x * (torch.initial_seed() % 7)

    def reseed(fn):
        torch.manual_seed(12)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), reseed, lambda fn: fn(T(3))])


@probe
def default_dtype_read() -> Probe:
    saved = torch.get_default_dtype()

    def f(x):
        return x * 2 if torch.get_default_dtype() == torch.float32 else x - 2

    def change(fn):
        torch.set_default_dtype(torch.float64)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change],
                 cleanup=lambda: torch.set_default_dtype(saved))


@probe
def num_threads_read() -> Probe:
    saved = torch.get_num_threads()

    def f(x):
        return x * torch.get_num_threads()

    def change(fn):
        torch.set_num_threads(1 if saved != 1 else 2)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))],
                 cleanup=lambda: torch.set_num_threads(saved))


@probe
def backend_flag_read() -> Probe:
    saved = torch.backends.mkldnn.enabled

    def f(x):
        return x + 1 if torch.backends.mkldnn.enabled else x - 1

    def flip(fn):
        torch.backends.mkldnn.enabled = not saved
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), flip, lambda fn: fn(T(3))],
                 cleanup=lambda: setattr(torch.backends.mkldnn, "enabled", saved))


@probe
def autocast_state_read() -> Probe:
    def f(x):
        return x * 2 if torch.is_autocast_enabled("cpu") else x + 2

    def cast(fn):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), cast, lambda fn: fn(T(3))])


@probe
def fork_rng_inside() -> Probe:
    def f(x):
        with torch.random.fork_rng():
            torch.manual_seed(3)
        return x + 1

    def step(fn):
        out = fn(T(3))
        return out, torch.get_rng_state()[:16]

    return Probe(f, [step, step])


@probe
def grad_assigned_inside() -> Probe:
    w = T(3, grad=True)

    def f(x):
        w.grad = x * 2
        return x + 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))], lambda: w.grad)


@probe
def retain_graph_twice() -> Probe:
    def f(x):
        y = (x * x).sum()
        (g1,) = torch.autograd.grad(y, x, retain_graph=True)
        (g2,) = torch.autograd.grad(y, x)
        return g1 + g2

    return Probe(f, [lambda fn: fn(T(3, grad=True)), lambda fn: fn(T(3, seed=1, grad=True))])


# ------------------------------------------------------------ errors ATen raises


@probe
def nll_loss_target_out_of_range() -> Probe:
    def f(logp, target):
        return F.nll_loss(logp, target)

    return Probe(f, [lambda fn: fn(T(2, 3).log_softmax(1), torch.tensor([0, 2])),
                     lambda fn: fn(T(2, 3).log_softmax(1), torch.tensor([0, 5])),
                     lambda fn: fn(T(2, 3).log_softmax(1), torch.tensor([1, 1]))])


@probe
def in_place_type_promotion_error() -> Probe:
    def f(a, b):
        a.add_(b)
        return a

    return Probe(f, [lambda fn: fn(torch.arange(3), torch.tensor([1, 1, 1])),
                     lambda fn: fn(torch.arange(3), torch.tensor([0.5, 0.5, 0.5])),
                     lambda fn: fn(torch.arange(3), torch.tensor([2, 2, 2]))])


@probe
def in_place_true_division_of_ints() -> Probe:
    def f(a):
        b = a.clone()
        b.div_(2)
        return b

    return Probe(f, [lambda fn: fn(torch.tensor([1.0, 2.0])), lambda fn: fn(torch.tensor([1, 2])),
                     lambda fn: fn(torch.tensor([3.0]))])


@probe
def reduction_dim_out_of_range() -> Probe:
    def f(x, d):
        return x.sum(dim=d) * 2

    return Probe(f, [lambda fn: fn(T(2, 3), 1), lambda fn: fn(T(2, 3), 2),
                     lambda fn: fn(T(2, 3), 0)])


@probe
def masked_fill_with_a_bad_mask() -> Probe:
    def f(x, mask):
        return x.masked_fill(mask, 0.0) + 1

    return Probe(f, [lambda fn: fn(T(2, 3), torch.tensor([True, False, True])),
                     lambda fn: fn(T(2, 3), torch.tensor([True, False])),
                     lambda fn: fn(T(2, 3), torch.tensor([False, False, True]))])


@probe
def matmul_of_mixed_dtypes() -> Probe:
    def f(a, b):
        return a @ b

    return Probe(f, [lambda fn: fn(T(2, 2), T(2, 2)), lambda fn: fn(T(2, 2), T(2, 2).double()),
                     lambda fn: fn(T(2, 2), T(2, 2, seed=1))])


@probe
def repeat_interleave_with_counts() -> Probe:
    def f(x, counts):
        return torch.repeat_interleave(x, counts) * 2

    return Probe(f, [lambda fn: fn(T(3), torch.tensor([1, 2, 0])),
                     lambda fn: fn(T(3), torch.tensor([1, -1, 0])),
                     lambda fn: fn(T(3), torch.tensor([2, 2, 2]))])


@probe
def narrow_out_of_range() -> Probe:
    def f(x, start):
        return x.narrow(0, start, 2) + 1

    return Probe(f, [lambda fn: fn(T(4), 1), lambda fn: fn(T(4), 3), lambda fn: fn(T(4), 2)])


@probe
def select_index_out_of_range() -> Probe:
    def f(x, i):
        return x[i] * 2

    return Probe(f, [lambda fn: fn(T(3, 2), 1), lambda fn: fn(T(3, 2), 3),
                     lambda fn: fn(T(3, 2), -4)])


@probe
def bincount_and_unique_values() -> Probe:
    def f(x):
        return torch.bincount(x).float().sum() + torch.unique(x).numel()

    return Probe(f, [lambda fn: fn(torch.tensor([0, 1, 1])), lambda fn: fn(torch.tensor([-1, 1])),
                     lambda fn: fn(torch.tensor([2, 2]))])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
