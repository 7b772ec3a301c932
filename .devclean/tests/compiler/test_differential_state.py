# ruff: noqa: RUF012, PLR0124  # a probe corpus: odd constructs (class-level dicts, s == s) on purpose
"""Differential probes, issue 11 groups 1-4: identity and aliasing, state read through
classes, modules and globals, side effects, Python semantics.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
from typing import Any

import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


# ------------------------------------------------------------------ 1. identity, aliasing


@probe
def dict_values_alias_then_not() -> Probe:
    x, y = T(3), T(3, seed=1)

    def f(d):
        d["a"].add_(1.0)
        return d["b"] * 2

    return Probe(f, [lambda fn: fn({"a": x, "b": x}), lambda fn: fn({"a": x, "b": y}),
                     lambda fn: fn({"a": y, "b": y})], lambda: (x, y))


G_A = T(3)
G_B = G_A


@probe
def globals_bound_to_one_tensor() -> Probe:
    global G_A, G_B
    G_A = T(3)
    G_B = G_A

    def f(x):
        G_A.mul_(2.0)
        return G_B + x

    def rebind(fn):
        global G_B
        G_B = T(3, seed=4)
        return fn(T(3, seed=2))

    return Probe(f, [lambda fn: fn(T(3, seed=2)), rebind, lambda fn: fn(T(3, seed=3))],
                 lambda: (G_A, G_B))


@probe
def input_is_a_view_of_another_input() -> Probe:
    x, y = T(4, 3), T(4, 3, seed=1)

    def f(a, b):
        a.add_(1.0)
        return b * 3

    return Probe(f, [lambda fn: fn(x, x[0]), lambda fn: fn(x, y[0]),
                     lambda fn: fn(y, y[1])], lambda: (x, y))


@probe
def attribute_objects_identity() -> Probe:
    class Holder:
        pass

    h = Holder()
    h.w = T(3)
    h.v = h.w

    def f(x):
        if h.w is h.v:
            return x * 2
        return x + h.v

    def split(fn):
        h.v = T(3, seed=5)
        return fn(T(3, seed=1))

    return Probe(f, [lambda fn: fn(T(3, seed=1)), split, lambda fn: fn(T(3, seed=2))])


@probe
def data_ptr_equality() -> Probe:
    x, y = T(6), T(6, seed=1)

    def f(a, b):
        if a.data_ptr() == b.data_ptr():
            return a * 2
        return a - b

    return Probe(f, [lambda fn: fn(x, x), lambda fn: fn(x, y), lambda fn: fn(x, x.view(6))])


@probe
def is_contiguous_branch() -> Probe:
    def f(x):
        if x.is_contiguous():
            return x.view(-1) * 2
        return x.reshape(-1) + 1

    x = T(3, 4)
    return Probe(f, [lambda fn: fn(x), lambda fn: fn(x.t().contiguous().t()),
                     lambda fn: fn(x.t()), lambda fn: fn(x)])


@probe
def requires_grad_branch() -> Probe:
    def f(x):
        if x.requires_grad:
            return x * 2
        return x + 100

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3).requires_grad_()),
                     lambda fn: fn(T(3))])


@probe
def grad_attribute_branch() -> Probe:
    w = T(3).requires_grad_()

    def f(x):
        if w.grad is not None:
            return x * w.grad
        return x + 1

    def backward(fn):
        (w * 3).sum().backward()
        return fn(T(3, seed=1))

    def zero(fn):
        w.grad = None
        return fn(T(3, seed=2))

    return Probe(f, [lambda fn: fn(T(3, seed=1)), backward, backward, zero],
                 lambda: w.grad)


@probe
def tied_weights_set_after_first_call() -> Probe:
    torch.manual_seed(0)
    a, b = nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False)

    def f(x):
        with torch.no_grad():
            a.weight.add_(1.0)
        return b(x)

    def tie(fn):
        b.weight = a.weight
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), tie, lambda fn: fn(T(2, 3, seed=1))],
                 lambda: (a.weight, b.weight))


@probe
def buffer_replaced() -> Probe:
    m = nn.Module()
    m.register_buffer("scale", torch.ones(3))

    def f(x):
        return x * m.scale

    def replace(fn):
        m.register_buffer("scale", torch.full((3,), 4.0))
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3, seed=1))])


@probe
def global_is_the_argument() -> Probe:
    global G_A
    G_A = T(3)
    x = G_A

    def f(t):
        t.add_(1.0)
        return G_A * 1

    def rebind(fn):
        global G_A
        G_A = T(3, seed=7)
        return fn(x)

    return Probe(f, [lambda fn: fn(x), rebind, lambda fn: fn(x)], lambda: (x, G_A))


@probe
def id_comparison() -> Probe:
    x, y = T(3), T(3, seed=1)

    def f(a, b):
        return a + 1 if id(a) == id(b) else a - b

    return Probe(f, [lambda fn: fn(x, x), lambda fn: fn(x, y), lambda fn: fn(y, y)])


@probe
def slice_storage_offset_used_as_int() -> Probe:
    base = T(10)

    def f(x):
        return x * x.storage_offset() + x.stride(0)

    return Probe(f, [lambda fn: fn(base[2:5]), lambda fn: fn(base[4:7]),
                     lambda fn: fn(base[1:7:2]), lambda fn: fn(base[3:6])])


# ------------------------------------------- 2. state read through classes, modules, globals


class Base:
    scale = 2.0

    def helper(self, x):
        return x * self.scale


class Sub(Base):
    def helper(self, x):
        return super().helper(x) + 1


@probe
def class_attribute_shadowed_by_instance() -> Probe:
    Base.scale = 2.0
    obj = Sub()

    def f(x):
        return x * obj.scale

    def shadow(fn):
        obj.scale = 5.0
        return fn(T(3))

    def unshadow(fn):
        del obj.scale
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), shadow, unshadow],
                 cleanup=lambda: setattr(Base, "scale", 2.0))


@probe
def base_class_attribute_read_through_subclass() -> Probe:
    Base.scale = 2.0

    def f(x):
        return x * Sub.scale

    def change(fn):
        Base.scale = 7.0
        return fn(T(3))

    def override(fn):
        Sub.scale = 11.0
        return fn(T(3))

    def cleanup() -> None:
        Base.scale = 2.0
        if "scale" in Sub.__dict__:
            del Sub.scale

    return Probe(f, [lambda fn: fn(T(3)), change, override], cleanup=cleanup)


@probe
def base_method_replaced_under_super() -> Probe:
    original = Base.helper
    obj = Sub()

    def f(x):
        return obj.helper(x)

    def replace(fn):
        Base.helper = lambda self, x: x - 100
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3, seed=1))],
                 cleanup=lambda: setattr(Base, "helper", original))


@probe
def classmethod_replaced() -> Probe:
    class K:
        factor = 3.0

        @classmethod
        def make(cls, x):
            return x * cls.factor

    def f(x):
        return K.make(x)

    def replace(fn):
        K.make = classmethod(lambda cls, x: x + cls.factor)
        return fn(T(3))

    def factor(fn):
        K.factor = -1.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, factor])


@probe
def property_reads_a_global() -> Probe:
    box = {"k": 2.0}

    class K:
        @property
        def k(self):
            return box["k"]

    obj = K()

    def f(x):
        return x * obj.k

    def change(fn):
        box["k"] = 9.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def call_dunder_replaced_on_class() -> Probe:
    class Op:
        def __call__(self, x):
            return x * 2

    op = Op()

    def f(x):
        return op(x) + 1

    def replace(fn):
        Op.__call__ = lambda self, x: x - 5
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3))])


@probe
def module_forward_replaced_on_instance_and_class() -> Probe:
    class M(nn.Module):
        def forward(self, x):
            return x * 2

    m = M()

    def f(x):
        return m(x) + 1

    def on_instance(fn):
        m.forward = lambda x: x * 10
        return fn(T(3))

    def removed(fn):
        del m.forward
        return fn(T(3))

    def on_class(fn):
        M.forward = lambda self, x: x - 3
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), on_instance, removed, on_class])


def _kw_helper(x, *, k=2.0):
    return x * k


@probe
def kwdefaults_changed() -> Probe:
    saved = dict(_kw_helper.__kwdefaults__)

    def f(x):
        return _kw_helper(x)

    def change(fn):
        _kw_helper.__kwdefaults__ = {"k": 5.0}
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))],
                 cleanup=lambda: setattr(_kw_helper, "__kwdefaults__", saved))


def _code_helper(x):
    return x * 2


def _other_code(x):
    return x + 100


@probe
def helper_code_replaced() -> Probe:
    saved = _code_helper.__code__

    def f(x):
        return _code_helper(x) - 1

    def change(fn):
        _code_helper.__code__ = _other_code.__code__
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))],
                 cleanup=lambda: setattr(_code_helper, "__code__", saved))


@probe
def tensor_method_added_then_replaced() -> Probe:
    torch.Tensor.h11_scaled = lambda self: self * 2

    def f(x):
        return x.h11_scaled() + 1

    def replace(fn):
        torch.Tensor.h11_scaled = lambda self: self * -3
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3))],
                 cleanup=lambda: delattr(torch.Tensor, "h11_scaled"))


@probe
def torch_function_monkeypatched() -> Probe:
    original = torch.tanh

    def f(x):
        return torch.tanh(x) * 2

    def patch(fn):
        torch.tanh = torch.sigmoid
        return fn(T(3))

    def restore(fn):
        torch.tanh = original
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), patch, restore],
                 cleanup=lambda: setattr(torch, "tanh", original))


def _uses_min(x):
    return x * min(2, 3)


@probe
def shadowing_global_removed() -> Probe:
    g = _uses_min.__globals__
    g["min"] = lambda a, b: 10

    def f(x):
        return _uses_min(x)

    def remove(fn):
        del g["min"]
        return fn(T(3))

    def cleanup() -> None:
        g.pop("min", None)

    return Probe(f, [lambda fn: fn(T(3)), remove, lambda fn: fn(T(3))], cleanup=cleanup)


@dataclasses.dataclass
class _Inner:
    scale: float = 2.0


@dataclasses.dataclass
class _Config:
    inner: _Inner
    mode: str = "mul"


CFG = _Config(_Inner())


@probe
def nested_config_attribute() -> Probe:
    global CFG
    CFG = _Config(_Inner())

    def f(x):
        if CFG.mode == "mul":
            return x * CFG.inner.scale
        return x + CFG.inner.scale

    def scale(fn):
        CFG.inner.scale = 3.0
        return fn(T(3))

    def inner(fn):
        CFG.inner = _Inner(-1.0)
        return fn(T(3))

    def mode(fn):
        CFG.mode = "add"
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), scale, inner, mode])


@probe
def module_object_attribute() -> Probe:
    mod = types.ModuleType("h11_fake_module")
    mod.factor = 2.0
    mod.items = [1.0]

    def f(x):
        return x * mod.factor + sum(mod.items)

    def change(fn):
        mod.factor = 4.0
        return fn(T(3))

    def grow(fn):
        mod.items.append(5.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, grow])


@probe
def forward_pre_hook_on_submodule() -> Probe:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

    def f(x):
        return m(x)

    handle: list[Any] = []

    def add(fn):
        handle.append(m[1].register_forward_pre_hook(lambda mod, args: (args[0] * -1,)))
        return fn(T(2, 3))

    def remove(fn):
        handle.pop().remove()
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), add, remove])


@probe
def slots_object_attribute() -> Probe:
    class S:
        __slots__ = ("k",)

        def __init__(self):
            self.k = 2.0

    s = S()

    def f(x):
        return x * s.k

    def change(fn):
        s.k = 6.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def getattr_hook_reads_a_dict() -> Probe:
    table = {"alpha": 2.0}

    class Dyn:
        def __getattr__(self, name):
            return table[name]

    d = Dyn()

    def f(x):
        return x * d.alpha

    def change(fn):
        table["alpha"] = -4.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def submodule_training_flag() -> Probe:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.0), nn.BatchNorm1d(3))

    def f(x):
        return m(x), m[2].training

    def sub_eval(fn):
        m[2].eval()
        return fn(T(4, 3))

    def sub_train(fn):
        m[2].train()
        return fn(T(4, 3, seed=1))

    return Probe(f, [lambda fn: fn(T(4, 3)), sub_eval, sub_train],
                 lambda: (m[2].running_mean, m[2].num_batches_tracked))


@probe
def module_list_attribute_mutated() -> Probe:
    m = nn.Module()
    m.scales = [1.0, 2.0]

    def f(x):
        return torch.stack([x * s for s in m.scales])

    def set_item(fn):
        m.scales[0] = 3.0
        return fn(T(3))

    def grow(fn):
        m.scales.append(4.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), set_item, grow])


N_ROWS = 2


@probe
def global_int_used_as_shape() -> Probe:
    global N_ROWS
    N_ROWS = 2

    def f(x):
        return x.view(N_ROWS, -1).sum(0)

    def change(fn):
        global N_ROWS
        N_ROWS = 3
        return fn(T(12))

    return Probe(f, [lambda fn: fn(T(12)), change, lambda fn: fn(T(12, seed=1))])


DTYPE = torch.float32


@probe
def global_dtype_changed() -> Probe:
    global DTYPE
    DTYPE = torch.float32

    def f(x):
        return x.to(DTYPE) * 2

    def change(fn):
        global DTYPE
        DTYPE = torch.float64
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def object_class_reassigned() -> Probe:
    class A:
        def go(self, x):
            return x * 2

    class B:
        def go(self, x):
            return x - 2

    o = A()

    def f(x):
        return o.go(x), type(o).__name__

    def swap(fn):
        o.__class__ = B
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), swap, lambda fn: fn(T(3))])


def _helper_a(x):
    return x * 2


def _helper_b(x):
    return x * -2


HELPER = _helper_a


@probe
def global_function_rebound() -> Probe:
    global HELPER
    HELPER = _helper_a

    def f(x):
        return HELPER(x) + 1

    def swap(fn):
        global HELPER
        HELPER = _helper_b
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), swap, lambda fn: fn(T(3))])


@probe
def class_level_dict_lookup() -> Probe:
    class K:
        table = {"relu": 1.0, "gelu": 2.0}

    def f(x, key):
        return x * K.table[key]

    def change(fn):
        K.table["relu"] = 10.0
        return fn(T(3), "relu")

    return Probe(f, [lambda fn: fn(T(3), "relu"), change, lambda fn: fn(T(3), "gelu")])


# ------------------------------------------------------------------ 3. side effects


@probe
def module_counts_its_calls() -> Probe:
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.seen = []

        def forward(self, x):
            self.calls += 1
            self.seen.append(self.calls)
            return x * self.calls

    m = M()
    return Probe(m, [lambda fn: fn(T(3))] * 4, lambda: (m.calls, list(m.seen)))


@probe
def list_in_another_module() -> Probe:
    mod = types.ModuleType("h11_log_module")
    mod.log = []

    def f(x):
        mod.log.append(x.sum())
        mod.last = len(mod.log)
        return x + 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1)), lambda fn: fn(T(3))],
                 lambda: (list(mod.log), mod.last))


REGISTRY: dict[str, Any] = {}


@probe
def dict_setdefault_update_del() -> Probe:
    REGISTRY.clear()
    REGISTRY["stale"] = 1

    def f(x):
        REGISTRY.setdefault("n", 0)
        REGISTRY["n"] += 1
        REGISTRY.update(last=x.shape[0])
        REGISTRY.pop("stale", None)
        return x * REGISTRY["n"]

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4)), lambda fn: fn(T(3))],
                 lambda: dict(REGISTRY))


SEEN: set[str] = set()


@probe
def set_add_and_membership() -> Probe:
    SEEN.clear()

    def f(x, tag):
        first = tag not in SEEN
        SEEN.add(tag)
        return x * 2 if first else x

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "a"),
                     lambda fn: fn(T(3), "b")], lambda: sorted(SEEN))


@probe
def list_arg_insert_extend_pop() -> Probe:
    lst: list[Any] = [1.0, 2.0]

    def f(x, items):
        items.insert(0, 5.0)
        items.extend([3.0, 4.0])
        last = items.pop()
        items.reverse()
        return x * last + items[0]

    return Probe(f, [lambda fn: fn(T(3), lst)] * 3, lambda: list(lst))


@probe
def dynamic_setattr_and_delattr() -> Probe:
    class O:
        pass

    o = O()
    o.tmp = 1
    names = ["a"]

    def f(x):
        setattr(o, names[0], x.sum())
        if hasattr(o, "tmp"):
            delattr(o, "tmp")
            return x * 2
        return x

    def rename(fn):
        names[0] = "b"
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rename, lambda fn: fn(T(3, seed=1))],
                 lambda: sorted(vars(o).items()))


NESTED: dict[str, Any] = {"lst": []}


@probe
def nested_container_mutation() -> Probe:
    NESTED["lst"] = []

    def f(x):
        NESTED["lst"].append(len(NESTED["lst"]))
        NESTED["count"] = len(NESTED["lst"])
        return x + NESTED["count"]

    def rebind(fn):
        NESTED["lst"] = [7, 7, 7]
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), rebind, lambda fn: fn(T(3))],
                 lambda: dict(NESTED))


LOG_LIST: list[Any] = []


@probe
def returns_the_global_list() -> Probe:
    LOG_LIST.clear()

    def f(x):
        LOG_LIST.append(1)
        return LOG_LIST, x * 2

    def check(fn):
        out, y = fn(T(3))
        return out is LOG_LIST, len(out), y

    return Probe(f, [check, check, check], lambda: list(LOG_LIST))


@probe
def mutable_default_dict_cache() -> Probe:
    def f(x, key, cache={}):  # noqa: B006 - the mutable default is the point
        if key in cache:
            return x * cache[key]
        cache[key] = float(len(cache) + 2)
        return x + cache[key]

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "a"),
                     lambda fn: fn(T(3), "b"), lambda fn: fn(T(3), "b")],
                 lambda: dict(f.__defaults__[0]))


@probe
def print_python_values() -> Probe:
    def f(x, n):
        print(f"n={n} shape={tuple(x.shape)} half={n / 2:.2f}")
        print("done", n, sep="|")
        return x * n

    return Probe(f, [lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 3), lambda fn: fn(T(4), 2)])


@probe
def try_finally_side_effect() -> Probe:
    log: list[str] = []

    def f(x, fail):
        try:
            if fail:
                raise ValueError("boom")
            return x * 2
        finally:
            log.append("finally")

    return Probe(f, [lambda fn: fn(T(3), False), lambda fn: fn(T(3), True),
                     lambda fn: fn(T(3), False)], lambda: list(log))


@probe
def caught_key_error_with_fallback() -> Probe:
    table = {"a": 2.0}

    def f(x, key):
        try:
            s = table[key]
        except KeyError:
            s = -1.0
            table[key] = 0.5
        return x * s

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "b"),
                     lambda fn: fn(T(3), "b"), lambda fn: fn(T(3), "c")],
                 lambda: dict(table))


@probe
def list_sort_in_place() -> Probe:
    order = [3, 1, 2]

    def f(x):
        order.sort()
        order.append(-len(order))
        return x * order[0]

    return Probe(f, [lambda fn: fn(T(3))] * 3, lambda: list(order))


# ------------------------------------------------------------------ 4. Python semantics


Z = 0.0


@probe
def global_negative_zero() -> Probe:
    global Z
    Z = 0.0

    def f(x):
        return x + math.copysign(1.0, Z)

    def flip(fn):
        global Z
        Z = -0.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), flip, lambda fn: fn(T(3))])


@probe
def int_bool_float_argument() -> Probe:
    x = torch.arange(4)

    def f(t, n):
        return t * n, type(n).__name__

    return Probe(f, [lambda fn: fn(x, 1), lambda fn: fn(x, True), lambda fn: fn(x, 1.0),
                     lambda fn: fn(x, False)])


@probe
def nan_argument() -> Probe:
    def f(x, s):
        return x * s if s == s else x + 1

    return Probe(f, [lambda fn: fn(T(3), float("nan")), lambda fn: fn(T(3), 2.0),
                     lambda fn: fn(T(3), float("nan"))])


@probe
def large_int_argument() -> Probe:
    def f(x, n):
        return x.long() + n % 1000, n // 3

    return Probe(f, [lambda fn: fn(torch.arange(3), 2**40), lambda fn: fn(torch.arange(3), -7),
                     lambda fn: fn(torch.arange(3), 2**62)])


@probe
def dict_order_matters() -> Probe:
    def f(x, d):
        return torch.stack([x * v for v in d.values()]), list(d)

    return Probe(f, [lambda fn: fn(T(3), {"a": 1.0, "b": 2.0}),
                     lambda fn: fn(T(3), {"b": 2.0, "a": 1.0})])


@probe
def tuple_versus_list() -> Probe:
    def f(x, seq):
        if isinstance(seq, tuple):
            return x * seq[0]
        return x + seq[0]

    return Probe(f, [lambda fn: fn(T(3), (2.0,)), lambda fn: fn(T(3), [2.0]),
                     lambda fn: fn(T(3), (2.0,))])


@probe
def empty_list_truthiness() -> Probe:
    def f(x, items):
        return x * 2 if items else x - 1

    return Probe(f, [lambda fn: fn(T(3), []), lambda fn: fn(T(3), [0]),
                     lambda fn: fn(T(3), [])])


@probe
def list_removed_while_iterated() -> Probe:
    def f(x, items):
        total = x
        for v in items:
            if v < 0:
                items.remove(v)
            total = total + v
        return total

    return Probe(f, [lambda fn: fn(T(3), [1, -2, 3]), lambda fn: fn(T(3), [-1, -2, 3, 4])])


@probe
def python_int_rounding() -> Probe:
    def f(x, a):
        return x * round(a) + int(a) + (-7 // 2) + (-7 % 3)

    return Probe(f, [lambda fn: fn(T(3), 2.5), lambda fn: fn(T(3), 3.5),
                     lambda fn: fn(T(3), -2.5)])


@probe
def kwargs_order_and_names() -> Probe:
    def f(x, **kw):
        return x * len(kw), list(kw)

    return Probe(f, [lambda fn: fn(T(3), a=1, b=2), lambda fn: fn(T(3), b=2, a=1),
                     lambda fn: fn(T(3), c=3)])


@probe
def set_iteration_of_strings() -> Probe:
    def f(x, tags):
        out = x
        for t in sorted(tags):
            out = out * 2 if t.startswith("m") else out + 1
        return out

    return Probe(f, [lambda fn: fn(T(3), {"mul", "add"}), lambda fn: fn(T(3), {"add"}),
                     lambda fn: fn(T(3), {"mul", "max", "add"})])


@probe
def comprehension_over_shape() -> Probe:
    def f(x):
        sizes = [s * 2 for s in x.shape]
        return x.sum() * sum(sizes), sizes

    return Probe(f, [lambda fn: fn(T(2, 3)), lambda fn: fn(T(4, 1)), lambda fn: fn(T(2, 3))])


@probe
def string_method_results() -> Probe:
    def f(x, name):
        if name.upper().endswith("_W"):
            return x * len(name)
        return x + name.count("a")

    return Probe(f, [lambda fn: fn(T(3), "foo_w"), lambda fn: fn(T(3), "banana"),
                     lambda fn: fn(T(3), "a_w")])


@probe
def tensor_item_in_python_arithmetic() -> Probe:
    def f(x):
        s = x.sum().item()
        return x * (s > 0), math.floor(s * 100)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(-T(3)), lambda fn: fn(T(3, seed=4))])


@probe
def functional_chosen_by_name() -> Probe:
    def f(x, name):
        return getattr(F, name)(x)

    return Probe(f, [lambda fn: fn(T(3), "relu"), lambda fn: fn(T(3), "gelu"),
                     lambda fn: fn(T(3), "relu")])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
