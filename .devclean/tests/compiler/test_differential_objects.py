# ruff: noqa: RUF012, B023, S102  # a probe corpus: class-level lists, late-bound closures, modules made with exec
"""Differential probes, issue 11 groups 2 and 3 (session 13): state read through
descriptors, `__slots__`, `__getattr__`/`__getattribute__`, metaclasses, properties with
setters and `cached_property`; module hooks (forward pre-hooks with kwargs, forward hooks
removed by their handle, global module hooks, backward hooks), buffers registered and
removed, `train()`/`eval()` of batch norm, parameters frozen or replaced between calls;
closures, `nonlocal` and cells; another module's globals; `functools.partial` arguments
mutated; side effects in these replayed once per call.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

import torch
from _probe_runner import Probe, T, grads, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


# ------------------------------------------------------------------ descriptors and classes


@probe
def data_descriptor_with_state() -> Probe:
    class Scaled:
        def __init__(self) -> None:
            self.reads = 0

        def __get__(self, obj, owner=None):
            self.reads += 1
            return obj._k * 2

        def __set__(self, obj, value):
            obj._k = value

    desc = Scaled()

    class Holder:
        k = desc

    h = Holder()
    h.k = 1.5

    def f(x):
        return x * h.k

    def change(fn):
        h.k = -3.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))],
                 lambda: (desc.reads, h._k))


@probe
def non_data_descriptor_shadowed_by_instance() -> Probe:
    class Default:
        def __get__(self, obj, owner=None):
            return 2.0

    class Holder:
        k = Default()

    h = Holder()

    def f(x):
        return x * h.k

    def shadow(fn):
        h.__dict__["k"] = 5.0
        return fn(T(3))

    def unshadow(fn):
        del h.__dict__["k"]
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), shadow, unshadow])


@probe
def slots_attribute_rebound_and_deleted() -> Probe:
    class P:
        __slots__ = ("scale", "shift")

        def __init__(self) -> None:
            self.scale = 2.0
            self.shift = 1.0

    p = P()

    def f(x):
        return x * p.scale + p.shift

    def change(fn):
        p.scale = 7.0
        return fn(T(3))

    def delete(fn):
        del p.shift
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, delete])


@probe
def getattr_fallback_dict_changes() -> Probe:
    class Cfg:
        def __init__(self) -> None:
            self.table = {"alpha": 1.0}

        def __getattr__(self, name):
            try:
                return self.table[name]
            except KeyError:
                raise AttributeError(name) from None

    cfg = Cfg()

    def f(x):
        if hasattr(cfg, "beta"):
            return x * cfg.alpha + cfg.beta
        return x * cfg.alpha

    def add(fn):
        cfg.table["beta"] = 10.0
        return fn(T(3))

    def change(fn):
        cfg.table["alpha"] = -1.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), add, change])


@probe
def getattribute_override_counts() -> Probe:
    class Counting:
        def __init__(self) -> None:
            object.__setattr__(self, "hits", 0)
            object.__setattr__(self, "w", 3.0)

        def __getattribute__(self, name):
            if name == "w":
                object.__setattr__(self, "hits", object.__getattribute__(self, "hits") + 1)
            return object.__getattribute__(self, name)

    c = Counting()

    def f(x):
        return x * c.w + c.w

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3))],
                 lambda: object.__getattribute__(c, "hits"))


@probe
def metaclass_attribute_and_call_counter() -> Probe:
    class Meta(type):
        made = 0

        def __call__(cls, *args, **kwargs):
            Meta.made += 1
            return super().__call__(*args, **kwargs)

        @property
        def factor(cls):
            return cls._factor

    class Thing(metaclass=Meta):
        _factor = 2.0

        def __init__(self, v):
            self.v = v

    def f(x):
        t = Thing(x)
        return t.v * Thing.factor

    def change(fn):
        Thing._factor = 9.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))], lambda: Meta.made)


@probe
def property_setter_inside() -> Probe:
    class Box:
        def __init__(self) -> None:
            self._v = 1.0
            self.log: list[float] = []

        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, value):
            self.log.append(value)
            self._v = value

    b = Box()

    def f(x):
        b.v = b.v + 1.0
        return x * b.v

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), lambda fn: fn(T(3))],
                 lambda: (b._v, list(b.log)))


@probe
def cached_property_first_computed_inside() -> Probe:
    class Lazy:
        computed = 0

        @functools.cached_property
        def table(self):
            Lazy.computed += 1
            return 4.0

    obj = Lazy()

    def f(x):
        return x * obj.table

    def reset(fn):
        del obj.table
        Lazy.computed += 10
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), reset],
                 lambda: (Lazy.computed, dict(obj.__dict__)))


@probe
def classmethod_reads_subclass_attribute() -> Probe:
    class Base:
        k = 1.0

        @classmethod
        def scale(cls, x):
            return x * cls.k

    class Sub(Base):
        pass

    def f(x):
        return Sub.scale(x) + Base.scale(x)

    def set_sub(fn):
        Sub.k = 5.0
        return fn(T(3))

    def set_base(fn):
        Base.k = -2.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), set_sub, set_base])


@probe
def staticmethod_replaced_on_class() -> Probe:
    class Ops:
        @staticmethod
        def act(x):
            return x.relu()

    def f(x):
        return Ops.act(x) * 2

    def replace(fn):
        Ops.act = staticmethod(lambda x: x.sigmoid())
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3, seed=1))])


@probe
def init_subclass_registry() -> Probe:
    registry: list[str] = []

    class Base:
        def __init_subclass__(cls, **kw):
            registry.append(cls.__name__)

    def f(x):
        class Local(Base):
            pass

        return x * len(registry)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3))], lambda: list(registry))


@probe
def instance_class_swapped() -> Probe:
    class A:
        def go(self, x):
            return x + 1

    class B(A):
        def go(self, x):
            return x * 10

    obj = A()

    def f(x):
        return obj.go(x), isinstance(obj, B)

    def swap(fn):
        obj.__class__ = B
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), swap, lambda fn: fn(T(3))])


@probe
def frozen_dataclass_set_raises() -> Probe:
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        k: float = 1.0

    cfg = Cfg()
    log: list[str] = []

    def f(x, change):
        log.append("in")
        if change:
            cfg.k = 3.0  # type: ignore[misc]  # the error is the point
        return x * cfg.k

    return Probe(f, [lambda fn: fn(T(3), False), lambda fn: fn(T(3), True),
                     lambda fn: fn(T(3), False)], lambda: list(log))


# ------------------------------------------------------------------ modules and hooks


@probe
def forward_pre_hook_with_kwargs_changes_them() -> Probe:
    class M(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    m = M()

    def f(x):
        return m(x, scale=2.0)

    def hook(fn):
        def pre(mod, args, kwargs):
            return args, {**kwargs, "scale": -4.0}

        m.register_forward_pre_hook(pre, with_kwargs=True)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), hook, lambda fn: fn(T(3, seed=1))])


@probe
def forward_hook_removed_by_handle() -> Probe:
    lin = nn.Linear(3, 3)
    seen: list[int] = []
    box: dict[str, Any] = {}

    def f(x):
        return lin(x).sum(-1)

    def add(fn):
        def hook(mod, args, out):
            seen.append(out.shape[-1])
            return out * 0

        box["h"] = lin.register_forward_hook(hook)
        return fn(T(2, 3))

    def remove(fn):
        box["h"].remove()
        return fn(T(2, 3))

    return Probe(f, [lambda fn: fn(T(2, 3)), add, lambda fn: fn(T(2, 3, seed=1)), remove],
                 lambda: list(seen))


@probe
def global_module_forward_hook_added() -> Probe:
    lin = nn.Linear(3, 2)
    box: dict[str, Any] = {}

    def f(x):
        return lin(x)

    def add(fn):
        box["h"] = nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: out + 100.0)
        return fn(T(3))

    def remove(fn):
        box["h"].remove()
        return fn(T(3))

    def cleanup():
        if "h" in box:
            box["h"].remove()

    return Probe(f, [lambda fn: fn(T(3)), add, remove], cleanup=cleanup)


@probe
def full_backward_hook_records() -> Probe:
    lin = nn.Linear(3, 2)
    norms: list[float] = []

    def hook(mod, grad_in, grad_out):
        norms.append(round(float(grad_out[0].abs().sum()), 4))

    lin.register_full_backward_hook(hook)

    def f(x):
        return lin(x).pow(2).sum()

    def step(fn):
        lin.zero_grad()
        out = fn(T(4, 3, grad=True))
        out.backward()
        return out, grads(lin.weight)

    return Probe(f, [step, step], lambda: list(norms))


@probe
def buffer_registered_then_removed() -> Probe:
    m = nn.Module()
    m.register_buffer("shift", torch.ones(3))

    def f(x):
        if hasattr(m, "shift"):
            return x + m.shift
        return x - 1

    def remove(fn):
        del m.shift
        return fn(T(3))

    def none_buffer(fn):
        m.register_buffer("shift", None)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), remove, none_buffer])


@probe
def batch_norm_train_eval_toggle() -> Probe:
    bn = nn.BatchNorm1d(3)

    def f(x):
        return bn(x)

    def evaluate(fn):
        bn.eval()
        return fn(T(4, 3, seed=1))

    def train(fn):
        bn.train()
        return fn(T(4, 3, seed=2))

    return Probe(f, [lambda fn: fn(T(4, 3)), evaluate, train],
                 lambda: (bn.running_mean, bn.running_var, bn.num_batches_tracked))


@probe
def module_requires_grad_false_between_calls() -> Probe:
    lin = nn.Linear(3, 2)

    def f(x):
        y = lin(x)
        return y, y.requires_grad

    def freeze(fn):
        lin.requires_grad_(False)
        return fn(T(3))

    def thaw(fn):
        lin.requires_grad_(True)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), freeze, thaw])


@probe
def parameter_replaced_with_new_parameter() -> Probe:
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x)

    def replace(fn):
        lin.weight = nn.Parameter(torch.ones(2, 3))
        return fn(T(3))

    def plain_tensor(fn):
        del lin.weight
        lin.weight = torch.zeros(2, 3)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, plain_tensor])


@probe
def apply_init_between_calls() -> Probe:
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))

    def f(x):
        return net(x)

    def init(fn):
        def fill(m):
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.weight, 0.25)
                nn.init.zeros_(m.bias)

        net.apply(fill)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), init])


@probe
def sequential_insert_and_delete() -> Probe:
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

    def f(x):
        return net(x).sum()

    def append(fn):
        net.append(nn.Tanh())
        return fn(T(3))

    def delete(fn):
        del net[1]
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), append, delete])


@probe
def parameter_list_appended() -> Probe:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ps = nn.ParameterList([nn.Parameter(torch.ones(3))])

        def forward(self, x):
            for p in self.ps:
                x = x * p
            return x

    m = M()

    def f(x):
        return m(x)

    def grow(fn):
        m.ps.append(nn.Parameter(torch.full((3,), 2.0)))
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), grow])


@probe
def state_dict_loaded_between_calls() -> Probe:
    lin = nn.Linear(3, 2)
    other = nn.Linear(3, 2)
    with torch.no_grad():
        other.weight.fill_(0.5)

    def f(x):
        return lin(x)

    def load(fn):
        lin.load_state_dict(other.state_dict())
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), load])


@probe
def module_call_counter_attribute() -> Probe:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    m = M()

    def f(x):
        return m(x) + m(x)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3))], lambda: m.calls)


@probe
def forward_replaced_by_partial_on_instance() -> Probe:
    lin = nn.Linear(3, 2)

    def scaled(x, k):
        return x.sum(-1, keepdim=True) * k

    def f(x):
        return lin(x)

    def replace(fn):
        lin.forward = functools.partial(scaled, k=3.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace, lambda fn: fn(T(3, seed=1))])


# ------------------------------------------------------------------ closures and globals


@probe
def nonlocal_counter_in_a_closure() -> Probe:
    def make():
        count = 0

        def step(x):
            nonlocal count
            count += 1
            return x * count

        return step, lambda: count

    step, read = make()

    def f(x):
        return step(x) + step(x)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3))], read)


@probe
def closure_over_a_loop_variable() -> Probe:
    fns = [lambda x: x * i for i in range(3)]

    def f(x):
        return sum(g(x) for g in fns)

    def change(fn):
        fns.append(lambda x: x - 100)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change])


@probe
def cell_rebound_by_an_inner_function() -> Probe:
    def outer(x):
        k = 1.0

        def bump():
            nonlocal k
            k = k * 3

        bump()
        bump()
        return x * k

    return Probe(outer, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def returned_closure_captures_a_tensor() -> Probe:
    def f(x):
        y = x * 2

        def later(z):
            return z + y

        return later

    def step(fn):
        g = fn(T(3))
        return g(T(3, seed=1))

    return Probe(f, [step, step])


@probe
def other_module_global_rebound() -> Probe:
    mod = types.ModuleType("h11_other")
    mod.SCALE = 2.0
    sys.modules["h11_other"] = mod
    code = "def helper(x):\n    return x * SCALE + OFFSET\nOFFSET = 1.0\n"
    exec(compile(code, "h11_other.py", "exec"), mod.__dict__)

    def f(x):
        return mod.helper(x)

    def rebind(fn):
        mod.SCALE = -5.0
        return fn(T(3))

    def delete(fn):
        del mod.OFFSET
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rebind, delete],
                 cleanup=lambda: sys.modules.pop("h11_other", None))


@probe
def other_module_list_appended_by_helper() -> Probe:
    mod = types.ModuleType("h11_log")
    sys.modules["h11_log"] = mod
    exec(compile("LOG = []\ndef record(x):\n    LOG.append(x.shape[0])\n    return x\n",
                 "h11_log.py", "exec"), mod.__dict__)

    def f(x):
        return mod.record(x) * 2

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4)), lambda fn: fn(T(3))],
                 lambda: list(mod.LOG), cleanup=lambda: sys.modules.pop("h11_log", None))


@probe
def partial_positional_list_mutated() -> Probe:
    def weighted(ws, x):
        return sum(x * w for w in ws)

    ws = [1.0, 2.0]
    p = functools.partial(weighted, ws)

    def f(x):
        return p(x)

    def change(fn):
        ws.append(-10.0)
        return fn(T(3))

    def swap(fn):
        ws[0] = 0.5
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, swap])


@probe
def partial_of_a_partial_rebound() -> Probe:
    def lin(x, a, b):
        return x * a + b

    box = {"p": functools.partial(functools.partial(lin, a=2.0), b=1.0)}

    def f(x):
        return box["p"](x)

    def rebind(fn):
        box["p"] = functools.partial(lin, a=-1.0, b=0.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rebind])


@probe
def defaults_tuple_replaced() -> Probe:
    def helper(x, k=2.0):
        return x * k

    def f(x):
        return helper(x)

    def replace(fn):
        helper.__defaults__ = (7.0,)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), replace])


@probe
def class_counter_and_registry() -> Probe:
    class K:
        count = 0
        registry: list[float] = []

    def f(x):
        K.count += 1
        K.registry.append(float(K.count))
        return x * K.count

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), lambda fn: fn(T(3))],
                 lambda: (K.count, list(K.registry)))


@probe
def global_dict_of_tensors_updated() -> Probe:
    cache: dict[str, torch.Tensor] = {}

    def f(x):
        if "prev" in cache:
            out = x + cache["prev"]
        else:
            out = x * 1
        cache["prev"] = out
        return out

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), lambda fn: fn(T(3))],
                 lambda: dict(cache))


@probe
def builtin_shadowed_in_module_globals() -> Probe:
    mod = types.ModuleType("h11_shadow")
    exec(compile("def helper(xs):\n    return max(xs)\n", "h11_shadow.py", "exec"),
         mod.__dict__)

    def f(x):
        return x * mod.helper([1.0, 3.0, 2.0])

    def shadow(fn):
        mod.max = min
        return fn(T(3))

    def unshadow(fn):
        del mod.max
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), shadow, unshadow])


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
