# ruff: noqa: B023, UP033, PYI034  # a probe corpus: late-binding lambdas, lru_cache and a plain context manager on purpose
"""Differential probes, issue 11 groups 1-4 across graph breaks and Python idioms: aliasing
of containers and objects passed twice, identity of returned objects, side effects around
graph breaks, Python's own state (os.environ, the random module, iterators), closures made
inside the function, context managers.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import os
import random
import sys
from collections.abc import Callable
from typing import Any

import torch
from _probe_runner import Probe, T, main, probe_test, registry
from torch import nn

PROBES, probe = registry()


class Obj:
    def __init__(self) -> None:
        self.count = 0
        self.items: list[Any] = []


# ------------------------------------------------------------ aliasing of Python objects


@probe
def same_list_passed_twice_then_not() -> Probe:
    a, b = [1], [2]

    def f(x, l1, l2):
        l1.append(3)
        return x * len(l2)

    return Probe(f, [lambda fn: fn(T(3), a, a), lambda fn: fn(T(3), a, b),
                     lambda fn: fn(T(3), b, b)], lambda: (list(a), list(b)))


@probe
def same_object_passed_twice_then_not() -> Probe:
    o1, o2 = Obj(), Obj()

    def f(x, a, b):
        a.count += 1
        return x + b.count

    return Probe(f, [lambda fn: fn(T(3), o1, o1), lambda fn: fn(T(3), o1, o2),
                     lambda fn: fn(T(3), o2, o2)], lambda: (o1.count, o2.count))


@probe
def same_dict_passed_twice_then_not() -> Probe:
    d1, d2 = {"k": 1.0}, {"k": 2.0}

    def f(x, a, b):
        a["k"] = a["k"] + 1.0
        return x * b["k"]

    return Probe(f, [lambda fn: fn(T(3), d1, d1), lambda fn: fn(T(3), d1, d2),
                     lambda fn: fn(T(3), d2, d2)], lambda: (dict(d1), dict(d2)))


@probe
def tensor_stored_in_list_then_changed() -> Probe:
    lst: list[Any] = []

    def f(x):
        lst.append(x)
        x.add_(1.0)
        return lst[-1] is x, len(lst)

    def step(fn):
        x = T(3)
        out = fn(x)
        return out, lst[-1] is x, x

    return Probe(f, [step, step])


@probe
def result_cached_on_an_object() -> Probe:
    o = Obj()

    def f(x):
        y = x * 2
        o.cache = y
        return y

    def step(fn):
        out = fn(T(3))
        return out is o.cache, out

    return Probe(f, [step, step])


G_T = T(3)


@probe
def global_tensor_returned_is_the_global() -> Probe:
    def f(x):
        return G_T, x + G_T

    def step(fn):
        g, y = fn(T(3))
        return g is G_T, y

    return Probe(f, [step, step])


@probe
def intermediate_returned_twice() -> Probe:
    def f(x):
        y = x * 2
        return y, y, [y]

    def step(fn):
        a, b, c = fn(T(3))
        return a is b, c[0] is a, a

    return Probe(f, [step, step])


@probe
def mutated_list_argument_returned() -> Probe:
    lst: list[Any] = []

    def f(x, items):
        items.append(x.sum())
        return items

    def step(fn):
        out = fn(T(3), lst)
        return out is lst, len(out)

    return Probe(f, [step, step])


@probe
def chained_assignment_aliases_a_list() -> Probe:
    def f(x):
        a = b = []
        a.append(x * 2)
        rows = [[]] * 2
        rows[0].append(1)
        return len(b), len(rows[1]), b[0]

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def augmented_assignment_on_list_and_tuple_arguments() -> Probe:
    lst: list[Any] = [1]

    def f(x, seq):
        seq += [2]
        return x * len(seq)

    return Probe(f, [lambda fn: fn(T(3), lst), lambda fn: fn(T(3), (1,)),
                     lambda fn: fn(T(3), lst)], lambda: list(lst))


@probe
def tuple_item_augmented_assignment_raises_after_mutating() -> Probe:
    inner: list[Any] = []

    def f(x, t):
        try:
            t[0] += [1]
        except TypeError:
            return x * len(t[0])
        return x

    return Probe(f, [lambda fn: fn(T(3), (inner,)), lambda fn: fn(T(3), (inner,))],
                 lambda: list(inner))


@probe
def in_place_add_on_tensor_argument() -> Probe:
    x = T(3)

    def f(t, y):
        t += y
        return t

    def step(fn):
        out = fn(x, T(3, seed=1))
        return out is x, x

    return Probe(f, [step, step])


# ------------------------------------------------------------ side effects around breaks


@probe
def side_effects_around_a_print_break() -> Probe:
    o = Obj()

    def f(x):
        o.count += 1
        o.items.append("before")
        print("value", float(x.sum()) > 0)
        o.items.append("after")
        x.mul_(2.0)
        return x + o.count

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(-T(3)), lambda fn: fn(T(3))],
                 lambda: (o.count, list(o.items)))


@probe
def view_mutated_after_a_break() -> Probe:
    def f(x):
        y = x[0]
        print("break")
        y.add_(10.0)
        return x

    def step(fn):
        x = T(2, 3)
        out = fn(x)
        return out is x, x

    return Probe(f, [step, step])


G_COUNT = 0


@probe
def global_written_before_a_break_read_after() -> Probe:
    global G_COUNT
    G_COUNT = 0

    def f(x):
        global G_COUNT
        G_COUNT += 1
        n = len(x.tolist())
        return x * G_COUNT + n

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4)), lambda fn: fn(T(3))],
                 lambda: G_COUNT)


@probe
def data_dependent_branch_with_side_effects() -> Probe:
    log: list[str] = []

    def f(x):
        if x.sum() > 0:
            log.append("pos")
            return x * 2
        log.append("neg")
        return x - 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(-T(3)), lambda fn: fn(T(3))],
                 lambda: list(log))


@probe
def loop_over_rows_with_early_break() -> Probe:
    def f(x):
        total = torch.zeros(x.shape[1])
        for row in x:
            if row.sum().item() < -1:
                break
            total = total + row
        return total

    return Probe(f, [lambda fn: fn(T(4, 3)), lambda fn: fn(T(4, 3, seed=3)),
                     lambda fn: fn(T(5, 3, seed=5))])


@probe
def error_after_a_break_keeps_effects() -> Probe:
    o = Obj()

    def f(x, bad):
        o.count += 1
        print("break")
        o.items.append(o.count)
        if bad:
            raise RuntimeError("bad")
        return x * o.count

    return Probe(f, [lambda fn: fn(T(3), False), lambda fn: fn(T(3), True),
                     lambda fn: fn(T(3), False)], lambda: (o.count, list(o.items)))


@probe
def nonlocal_written_by_an_inner_function() -> Probe:
    def make() -> Callable[..., Any]:
        total = 0

        def f(x):
            def bump(k):
                nonlocal total
                total += k
            bump(2)
            bump(3)
            return x * total

        return f

    return Probe(make(), [lambda fn: fn(T(3))] * 3)


# ------------------------------------------------------------ Python's own state


@probe
def environment_variable_read() -> Probe:
    os.environ.pop("H11_PROBE_SCALE", None)

    def f(x):
        return x * float(os.environ.get("H11_PROBE_SCALE", "1"))

    def set_env(fn):
        os.environ["H11_PROBE_SCALE"] = "3"
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), set_env, lambda fn: fn(T(3))],
                 cleanup=lambda: os.environ.pop("H11_PROBE_SCALE", None))


def _unset(names: tuple[str, ...]) -> None:
    for name in names:
        os.environ.pop(name, None)


@probe
def environment_variables_set_changed_removed() -> Probe:
    # NOTE: transformers' SDPA attention reads os.environ.get(...) of an unset variable on
    # every call; the read is guarded (value, or absence), never a reason to run eagerly
    names = ("H11_ENV_A", "H11_ENV_B", "H11_ENV_C")
    _unset(names)

    def f(x):
        s = float(os.environ.get("H11_ENV_A", "1"))
        if "H11_ENV_B" in os.environ:
            s += 10
        v = os.getenv("H11_ENV_C")
        return x * (s if v is None else s + float(v))

    def change(*edits: tuple[str, str | None]) -> Callable[[Any], Any]:
        def step(fn):
            for name, value in edits:
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            return fn(T(3))
        return step

    return Probe(f, [lambda fn: fn(T(3)), change(("H11_ENV_A", "3")), lambda fn: fn(T(3)),
                     change(("H11_ENV_B", "")), change(("H11_ENV_A", "5"), ("H11_ENV_B", None)),
                     change(("H11_ENV_C", "0.5")), change(("H11_ENV_A", None)),
                     change(("H11_ENV_C", None))],
                 cleanup=functools.partial(_unset, names))


@probe
def python_random_module() -> Probe:
    def f(x):
        return x * random.random() + random.randint(0, 10)

    def step(fn):
        random.seed(7)
        a = fn(T(3))
        return a, fn(T(3)), random.random()

    return Probe(f, [step, step])


@probe
def global_iterator_advanced() -> Probe:
    counter = itertools.count()

    def f(x):
        return x + next(counter)

    return Probe(f, [lambda fn: fn(T(3))] * 3)


@probe
def lru_cached_helper() -> Probe:
    calls: list[int] = []

    @functools.lru_cache(maxsize=None)
    def scale(n):
        calls.append(n)
        return n * 1.5

    def f(x, n):
        return x * scale(n)

    return Probe(f, [lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 3)],
                 lambda: list(calls))


@probe
def partial_rebound() -> Probe:
    def mul(x, k):
        return x * k

    box = {"p": functools.partial(mul, k=2.0)}

    def f(x):
        return box["p"](x)

    def rebind(fn):
        box["p"] = functools.partial(mul, k=-1.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), rebind, lambda fn: fn(T(3))])


@probe
def hasattr_and_getattr_default() -> Probe:
    o = Obj()

    def f(x):
        k = getattr(o, "mode", "none")
        if hasattr(o, "flag"):
            return x * 2, k
        return x, k

    def add(fn):
        o.flag = True
        o.mode = "fast"
        return fn(T(3))

    def remove(fn):
        del o.flag
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), add, remove])


@probe
def instance_dict_read_directly() -> Probe:
    o = Obj()

    def f(x):
        return x * len(vars(o)) + o.__dict__["count"]

    def change(fn):
        o.count = 5
        o.extra = 1
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, lambda fn: fn(T(3))])


@probe
def parameter_versus_tensor_argument() -> Probe:
    def f(x):
        if isinstance(x, nn.Parameter):
            return x * 2
        return x + 1, type(x) is torch.Tensor

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(nn.Parameter(T(3))), lambda fn: fn(T(3))])


@probe
def empty_input_branch() -> Probe:
    def f(x):
        if x.numel() == 0:
            return torch.zeros(1)
        return x.mean().reshape(1)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(torch.empty(0)), lambda fn: fn(T(5))])


# ------------------------------------------------------------ objects made inside, closures


@probe
def object_made_inside_escapes_to_a_global() -> Probe:
    store: list[Any] = []

    def f(x):
        o = Obj()
        o.count = int(x.shape[0])
        o.items.append(x * 2)
        store.append(o)
        return o.items[0]

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(4))],
                 lambda: [(type(o).__name__, o.count, len(o.items)) for o in store])


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    n: int


@probe
def dataclass_and_namedtuple_returned() -> Probe:
    NT = collections.namedtuple("NT", ["y", "k"])

    def f(x, n):
        return Pair(x * n, n), NT(x + n, n)

    def step(fn, n):
        p, t = fn(T(3), n)
        return type(p).__name__, p.a, p.n, type(t).__name__, t.y, t.k

    return Probe(f, [lambda fn: step(fn, 2), lambda fn: step(fn, 3)])


@probe
def closure_returned_and_called_later() -> Probe:
    def f(x, k):
        def g(y):
            return y * k + x
        return g

    def step(fn, k):
        g = fn(T(3), k)
        return g(T(3, seed=1))

    return Probe(f, [lambda fn: step(fn, 2.0), lambda fn: step(fn, 3.0)])


@probe
def lambdas_in_a_loop_bind_late() -> Probe:
    def f(x):
        fns = [lambda t: t * i for i in range(3)]
        fns2 = [lambda t, i=i: t * i for i in range(3)]
        return [g(x) for g in fns], [g(x) for g in fns2]

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def global_deleted_inside() -> Probe:
    g = globals()
    g["H11_TEMP"] = 2.0

    def f(x):
        global H11_TEMP
        v = H11_TEMP
        del H11_TEMP
        return x * v

    def restore(fn):
        g["H11_TEMP"] = 5.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), restore],
                 lambda: g.get("H11_TEMP"), cleanup=lambda: g.pop("H11_TEMP", None))


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def __enter__(self) -> Recorder:
        self.events.append("enter")
        return self

    def __exit__(self, *exc: object) -> bool:
        self.events.append("exit" if exc[0] is None else f"exit {exc[0].__name__}")
        return False


@probe
def user_context_manager_with_error() -> Probe:
    rec = Recorder()

    def f(x, bad):
        with rec:
            y = x * 2
            if bad:
                raise ValueError("bad")
        return y

    return Probe(f, [lambda fn: fn(T(3), False), lambda fn: fn(T(3), True),
                     lambda fn: fn(T(3), False)], lambda: list(rec.events))


@probe
def generator_context_manager() -> Probe:
    events: list[str] = []

    @contextlib.contextmanager
    def scope(name):
        events.append(f"in {name}")
        yield name.upper()
        events.append(f"out {name}")

    def f(x, name):
        with scope(name) as tag:
            y = x * len(tag)
        return y

    return Probe(f, [lambda fn: fn(T(3), "ab"), lambda fn: fn(T(3), "abc")],
                 lambda: list(events))


@probe
def caught_torch_error_falls_back() -> Probe:
    def f(a, b):
        try:
            return a @ b
        except RuntimeError:
            return a.sum() + b.sum()

    return Probe(f, [lambda fn: fn(T(2, 3), T(3, 2)), lambda fn: fn(T(2, 3), T(2, 3)),
                     lambda fn: fn(T(2, 3), T(3, 1))])


@probe
def sorted_with_key_and_max_with_nan() -> Probe:
    def f(x, d):
        keys = sorted(d, key=lambda k: -d[k])
        return x * d[keys[0]], keys, max([1.0, float("nan"), 2.0])

    return Probe(f, [lambda fn: fn(T(3), {"a": 1.0, "b": 3.0}),
                     lambda fn: fn(T(3), {"a": 5.0, "b": 3.0})])


@probe
def dict_items_view_stored_then_mutated() -> Probe:
    d = {"a": 1.0}

    def f(x):
        items = d.items()
        d["b"] = 2.0
        return x * len(items), sorted(k for k, _ in items)

    def reset(fn):
        d.pop("b", None)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), reset], lambda: dict(d))


test_probe = probe_test(PROBES)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
