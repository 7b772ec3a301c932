"""Differential probes, issue 11 groups 4 and 6 (session 13): containers changed while
iterated (dict, list, set, deque), `sorted`/`reversed`/`enumerate`/`zip` over live containers,
side effects around exceptions (`finally`, `else`, chained and re-raised), generators left
half-consumed between calls, Python numbers from tensors (`.item()`, `int(t)`, `bool(t)`,
`tolist()`), printing, warnings, `assert` on tensor values, and errors eager raises (shapes,
indices, dtypes, Python arithmetic) raised the same way.

Runs through `_probe_runner.py` (every backend, several calls); as a script it prints
OK/BAD per probe, and `--torch` gives torch.compile's answers.
"""

from __future__ import annotations

import collections
import itertools
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from _probe_runner import Probe, T, main, probe_test, registry

PROBES, probe = registry()


class ProbeWarning(UserWarning):
    """The warning the probes raise (others, from torch or the compiler, are not compared)."""


def with_warnings(call: Callable[[], Any]) -> Any:
    """`call()`'s result and the messages of the ProbeWarnings it raised."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in seen if issubclass(w.category, ProbeWarning)]


# ------------------------------------------------------------------ containers while iterated


@probe
def dict_key_added_while_iterated() -> Probe:
    def f(x, d):
        for k in d:
            if k == "a":
                d["z"] = 1.0
            x = x + d[k]
        return x

    return Probe(f, [lambda fn: fn(T(3), {"b": 1.0}), lambda fn: fn(T(3), {"a": 1.0}),
                     lambda fn: fn(T(3), {"b": 2.0})])


@probe
def dict_value_replaced_while_iterated() -> Probe:
    def f(x, d):
        for k in d:
            d[k] = d[k] * 2
            x = x + d[k]
        return x

    d = {"a": 1.0, "b": 2.0}
    return Probe(f, [lambda fn: fn(T(3), d), lambda fn: fn(T(3), d)], lambda: dict(d))


@probe
def list_grows_while_iterated() -> Probe:
    def f(x, items):
        for v in items:
            if v > 0 and len(items) < 5:
                items.append(-v)
            x = x * 1 + v
        return x

    def step(fn):
        items = [1.0, 2.0]
        return fn(T(3), items), items

    return Probe(f, [step, step])


@probe
def list_shrinks_while_iterated() -> Probe:
    def f(x, items):
        seen = []
        for v in items:
            seen.append(v)
            if v == 2:
                items.remove(v)
        return x * len(seen), seen

    def step(fn):
        items = [1, 2, 3, 4]
        return fn(T(3), items), items

    return Probe(f, [step, step])


@probe
def deque_mutated_while_iterated() -> Probe:
    def f(x, dq):
        for v in dq:
            if v == 1:
                dq.append(9)
            x = x + v
        return x

    return Probe(f, [lambda fn: fn(T(3), collections.deque([0, 2])),
                     lambda fn: fn(T(3), collections.deque([0, 1, 2]))])


@probe
def list_grows_while_iterated_across_a_break() -> Probe:
    def f(x, items):
        for v in items:
            print(v)
            if v > 0 and len(items) < 4:
                items.append(-v)
            x = x + v
        return x

    def step(fn):
        items = [1.0, 2.0]
        return fn(T(3), items), items

    return Probe(f, [step, step])


@probe
def dict_key_added_while_iterated_across_a_break() -> Probe:
    def f(x, d):
        for k in d:
            print(k)
            if k == "a":
                d["z"] = 1.0
            x = x + d[k]
        return x

    return Probe(f, [lambda fn: fn(T(3), {"b": 1.0}), lambda fn: fn(T(3), {"a": 1.0}),
                     lambda fn: fn(T(3), {"b": 2.0, "c": 3.0})])


@probe
def deque_contents_changed_between_calls() -> Probe:
    dq = collections.deque([1.0])

    def f(x):
        for v in dq:
            x = x + v
        return x

    def change(fn):
        dq[0] = 5.0
        return fn(T(3))

    def grow(fn):
        dq.appendleft(-2.0)
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), change, grow])


@probe
def registry_object_with_iter_changed() -> Probe:
    class Registry:
        def __init__(self) -> None:
            self.items = [1.0]

        def __iter__(self):
            return iter(self.items)

    reg = Registry()

    def f(x):
        for v in reg:
            x = x * v
        return x

    def grow(fn):
        reg.items.append(3.0)
        return fn(T(3))

    def change(fn):
        reg.items[0] = -1.0
        return fn(T(3))

    return Probe(f, [lambda fn: fn(T(3)), grow, change])


@probe
def sorted_snapshot_then_mutated() -> Probe:
    def f(x, items):
        order = sorted(items)
        items.append(-100)
        return x * order[0], order

    def step(fn):
        items = [3, 1, 2]
        return fn(T(3), items), items

    return Probe(f, [step, step])


@probe
def reversed_over_a_live_list() -> Probe:
    def f(x, items):
        out = []
        for v in reversed(items):
            out.append(v)
            if v == 3:
                items.pop()
        return x * len(out), out

    def step(fn):
        items = [1, 2, 3]
        return fn(T(3), items), items

    return Probe(f, [step, step])


@probe
def enumerate_with_insert_at_front() -> Probe:
    def f(x, items):
        total = 0
        for i, v in enumerate(items):
            if i == 0:
                items.insert(0, 10)
            total += v
            if i > 3:
                break
        return x * total

    def step(fn):
        return fn(T(3), [1, 2, 3])

    return Probe(f, [step, step])


@probe
def zip_of_a_list_and_its_mutation() -> Probe:
    def f(x, a, b):
        acc = x
        for p, q in zip(a, b):
            b.append(p)
            acc = acc + p * q
        return acc

    def step(fn):
        b = [1.0, 2.0]
        return fn(T(3), [3.0, 4.0, 5.0], b), b

    return Probe(f, [step, step])


@probe
def dict_views_live_after_mutation() -> Probe:
    def f(x, d):
        keys = d.keys()
        vals = d.values()
        d["new"] = 5.0
        return x * len(keys), list(keys), sum(vals)

    def step(fn):
        return fn(T(3), {"a": 1.0})

    return Probe(f, [step, step])


@probe
def set_discard_while_iterated() -> Probe:
    def f(x, s):
        for v in s:
            s.discard(v)
            x = x + 1
        return x

    return Probe(f, [lambda fn: fn(T(3), {1}), lambda fn: fn(T(3), {1, 2})])


@probe
def dict_pop_in_comprehension_source() -> Probe:
    def f(x, d):
        return [x * d.pop(k) for k in list(d)], d

    return Probe(f, [lambda fn: fn(T(3), {"a": 1.0, "b": 2.0}), lambda fn: fn(T(3), {})])


@probe
def ordered_dict_move_to_end() -> Probe:
    def f(x, od):
        od.move_to_end("a")
        first = next(iter(od))
        return x * od[first], list(od)

    def step(fn):
        od = collections.OrderedDict([("a", 1.0), ("b", 2.0)])
        return fn(T(3), od)

    return Probe(f, [step, step])


@probe
def list_slice_assignment_and_del() -> Probe:
    def f(x, items):
        items[1:3] = [10, 20, 30]
        del items[::2]
        return x * sum(items), list(items)

    def step(fn):
        items = [1, 2, 3, 4, 5]
        r = fn(T(3), items)
        return r, items

    return Probe(f, [step, step])


@probe
def defaultdict_factory_called() -> Probe:
    made: list[int] = []

    def factory():
        made.append(1)
        return 0.5

    dd = collections.defaultdict(factory)

    def f(x, key):
        return x * dd[key]

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "a"),
                     lambda fn: fn(T(3), "b")], lambda: (len(made), dict(dd)))


# ------------------------------------------------------------------ exceptions


@probe
def finally_runs_on_error_and_success() -> Probe:
    log: list[str] = []

    def f(x, bad):
        try:
            log.append("try")
            if bad:
                raise ValueError("bad")
            return x * 2
        finally:
            log.append("finally")

    return Probe(f, [lambda fn: fn(T(3), False), lambda fn: fn(T(3), True),
                     lambda fn: fn(T(3), False)], lambda: list(log))


@probe
def try_else_branch() -> Probe:
    log: list[str] = []

    def f(x, d, k):
        try:
            v = d[k]
        except KeyError:
            log.append("missing")
            v = -1.0
        else:
            log.append("found")
        return x * v

    d = {"a": 3.0}
    return Probe(f, [lambda fn: fn(T(3), d, "a"), lambda fn: fn(T(3), d, "b"),
                     lambda fn: fn(T(3), d, "a")], lambda: list(log))


@probe
def exception_object_stored_globally() -> Probe:
    box: dict[str, Any] = {}

    def f(x, v):
        try:
            if v < 0:
                raise ValueError(f"negative {v}")
        except ValueError as e:
            box["err"] = str(e)
            return x * 0
        return x * v

    return Probe(f, [lambda fn: fn(T(3), 2), lambda fn: fn(T(3), -1), lambda fn: fn(T(3), -5)],
                 lambda: dict(box))


@probe
def exception_raised_from_a_helper_with_effects() -> Probe:
    log: list[int] = []

    def helper(x, n):
        log.append(n)
        if n > 1:
            raise RuntimeError("too big")
        return x + n

    def f(x, n):
        y = x * 2
        return helper(y, n)

    return Probe(f, [lambda fn: fn(T(3), 1), lambda fn: fn(T(3), 2), lambda fn: fn(T(3), 0)],
                 lambda: list(log))


@probe
def exception_chained_and_reraised() -> Probe:
    log: list[str] = []

    def f(x, k):
        try:
            try:
                return x * {"a": 1.0}[k]
            except KeyError as e:
                log.append("inner")
                raise ValueError("wrapped") from e
        except ValueError:
            log.append("outer")
            raise

    return Probe(f, [lambda fn: fn(T(3), "a"), lambda fn: fn(T(3), "b")], lambda: list(log))


@probe
def exception_in_a_comprehension() -> Probe:
    def f(x, vals):
        try:
            return [x / v if v != 0 else 1 / v for v in vals]
        except ZeroDivisionError:
            return [x * 0]

    return Probe(f, [lambda fn: fn(T(3), [1, 2]), lambda fn: fn(T(3), [1, 0])])


@probe
def loop_with_continue_and_else() -> Probe:
    def f(x, vals):
        for v in vals:
            if v < 0:
                continue
            if v > 10:
                break
            x = x + v
        else:
            x = x * -1
        return x

    return Probe(f, [lambda fn: fn(T(3), [1, -2, 3]), lambda fn: fn(T(3), [1, 20, 3])])


# ------------------------------------------------------------------ generators


@probe
def generator_left_half_consumed_between_calls() -> Probe:
    def gen():
        for i in range(10):
            yield float(i)

    g = gen()

    def f(x):
        return x * next(g) + next(g)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), lambda fn: fn(T(3))])


@probe
def generator_argument_partly_consumed() -> Probe:
    def f(x, it):
        first = next(it)
        return x * first

    def step(fn):
        g = (i * 2.0 for i in range(4))
        r = fn(T(3), g)
        return r, list(g)

    return Probe(f, [step, step])


@probe
def generator_with_finally_closed() -> Probe:
    log: list[str] = []

    def gen():
        try:
            yield 1.0
            yield 2.0
        finally:
            log.append("closed")

    def f(x):
        g = gen()
        v = next(g)
        g.close()
        return x * v

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3))], lambda: list(log))


@probe
def generator_send_values() -> Probe:
    def acc():
        total = 0.0
        while True:
            v = yield total
            total += v

    def f(x, vals):
        g = acc()
        next(g)
        out = 0.0
        for v in vals:
            out = g.send(v)
        return x * out

    return Probe(f, [lambda fn: fn(T(3), [1.0, 2.0]), lambda fn: fn(T(3), [5.0])])


@probe
def itertools_count_global() -> Probe:
    counter = itertools.count(1)

    def f(x):
        return x * next(counter)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3)), lambda fn: fn(T(3))],
                 lambda: next(counter.__reduce__()[1].__iter__()))


# ------------------------------------------------------------------ Python numbers from tensors


@probe
def int_of_a_tensor_as_repeat_count() -> Probe:
    def f(x, n):
        k = int(n)
        return x.repeat(k), k

    return Probe(f, [lambda fn: fn(T(2), torch.tensor(2)), lambda fn: fn(T(2), torch.tensor(3)),
                     lambda fn: fn(T(2), torch.tensor(2.7))])


@probe
def bool_of_a_tensor_branch() -> Probe:
    def f(x):
        if bool((x > 0).all()):
            return x * 2
        return x - 1

    return Probe(f, [lambda fn: fn(torch.ones(3)), lambda fn: fn(T(3)),
                     lambda fn: fn(torch.ones(3))])


@probe
def item_into_a_python_list() -> Probe:
    log: list[float] = []

    def f(x):
        v = x.sum().item()
        log.append(round(v, 4))
        return x / v

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))], lambda: list(log))


@probe
def tolist_arithmetic() -> Probe:
    def f(x):
        vals = x.tolist()
        return [v * 2 for v in vals], max(vals)

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(torch.arange(4))])


@probe
def float_of_a_tensor_formatted() -> Probe:
    def f(x):
        return f"{float(x.mean()):.3f}", x * 1

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(T(3, seed=1))])


@probe
def tensor_used_as_a_python_index() -> Probe:
    def f(x, i):
        items = [10, 20, 30]
        return items[i], x[i]

    return Probe(f, [lambda fn: fn(T(3), torch.tensor(1)), lambda fn: fn(T(3), torch.tensor(2)),
                     lambda fn: fn(T(3), torch.tensor(5))])


# ------------------------------------------------------------------ printing and warnings


@probe
def print_tensor_with_grad_fn() -> Probe:
    def f(x):
        y = x * 2
        print(y)
        return y + 1

    return Probe(f, [lambda fn: fn(torch.ones(2, requires_grad=True)),
                     lambda fn: fn(torch.ones(2))])


@probe
def print_sep_end_and_values() -> Probe:
    def f(x, name):
        print("value", name, x.shape, sep="|", end="!\n")
        print(x.dtype, [1, 2], {"k": name})
        return x + 1

    return Probe(f, [lambda fn: fn(T(2), "a"), lambda fn: fn(T(2, 2), "b")])


@probe
def warning_on_a_condition() -> Probe:
    def f(x, limit):
        if x.shape[0] > limit:
            warnings.warn(f"long input {x.shape[0]}", ProbeWarning, stacklevel=1)
        return x * 2

    return Probe(f, [lambda fn: with_warnings(lambda: fn(T(3), 5)),
                     lambda fn: with_warnings(lambda: fn(T(6), 5)),
                     lambda fn: with_warnings(lambda: fn(T(6), 5))])


@probe
def warning_turned_into_error() -> Probe:
    def f(x):
        warnings.warn("careful", ProbeWarning, stacklevel=1)
        return x + 1

    def strict(fn):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ProbeWarning)
            return fn(T(3))

    return Probe(f, [lambda fn: with_warnings(lambda: fn(T(3))), strict,
                     lambda fn: with_warnings(lambda: fn(T(3)))])


@probe
def assert_on_a_tensor_value_with_message() -> Probe:
    def f(x):
        assert (x >= 0).all(), f"negative values in {tuple(x.shape)}"
        return x.sqrt()

    return Probe(f, [lambda fn: fn(torch.ones(3)), lambda fn: fn(-torch.ones(3)),
                     lambda fn: fn(torch.full((3,), 4.0))])


@probe
def assert_on_a_shape() -> Probe:
    def f(x):
        assert x.shape[-1] == 3, "need 3 features"
        return x.sum(-1)

    return Probe(f, [lambda fn: fn(T(2, 3)), lambda fn: fn(T(2, 4)), lambda fn: fn(T(5, 3))])


# ------------------------------------------------------------------ errors eager raises


@probe
def view_of_a_non_contiguous_input() -> Probe:
    def f(x):
        return x.view(-1)

    return Probe(f, [lambda fn: fn(T(2, 3)), lambda fn: fn(T(3, 2).t()),
                     lambda fn: fn(T(2, 3, seed=1))])


@probe
def tensor_plus_a_string() -> Probe:
    def f(x, other):
        return x + other

    return Probe(f, [lambda fn: fn(T(3), 1.0), lambda fn: fn(T(3), "a"),
                     lambda fn: fn(T(3), 2)])


@probe
def stack_of_different_shapes() -> Probe:
    def f(a, b):
        return torch.stack([a, b])

    return Probe(f, [lambda fn: fn(T(3), T(3)), lambda fn: fn(T(3), T(4)),
                     lambda fn: fn(T(2), T(2))])


@probe
def squeeze_dim_out_of_range() -> Probe:
    def f(x, d):
        return x.squeeze(d)

    return Probe(f, [lambda fn: fn(T(1, 3), 0), lambda fn: fn(T(1, 3), 5),
                     lambda fn: fn(T(1, 3), -1)])


@probe
def index_select_out_of_range() -> Probe:
    def f(x, idx):
        return torch.index_select(x, 0, idx)

    return Probe(f, [lambda fn: fn(T(4), torch.tensor([0, 3])),
                     lambda fn: fn(T(4), torch.tensor([0, 4])),
                     lambda fn: fn(T(4), torch.tensor([1]))])


@probe
def boolean_mask_of_the_wrong_shape() -> Probe:
    def f(x, m):
        return x[m]

    return Probe(f, [lambda fn: fn(T(4), torch.tensor([True, False, True, False])),
                     lambda fn: fn(T(4), torch.tensor([True, False])),
                     lambda fn: fn(T(4), torch.tensor([False, False, True, True]))])


@probe
def float_index_tensor() -> Probe:
    def f(x, i):
        return x[i]

    return Probe(f, [lambda fn: fn(T(4), torch.tensor([1])),
                     lambda fn: fn(T(4), torch.tensor([1.0]))])


@probe
def expand_to_an_incompatible_size() -> Probe:
    def f(x, n):
        return x.expand(n, 3)

    return Probe(f, [lambda fn: fn(T(1, 3), 4), lambda fn: fn(T(2, 3), 4),
                     lambda fn: fn(T(1, 3), 2)])


@probe
def singular_matrix_inverse() -> Probe:
    def f(a):
        return torch.linalg.inv(a)

    return Probe(f, [lambda fn: fn(torch.eye(2) * 2), lambda fn: fn(torch.zeros(2, 2)),
                     lambda fn: fn(torch.eye(2))])


@probe
def multinomial_of_negative_weights() -> Probe:
    def f(p):
        torch.manual_seed(0)
        return torch.multinomial(p, 1)

    return Probe(f, [lambda fn: fn(torch.tensor([0.0, 1.0])),
                     lambda fn: fn(torch.tensor([-1.0, 1.0]))])


@probe
def python_division_by_a_zero_item() -> Probe:
    def f(x):
        n = int(x.sum())
        return x * (10 // n)

    return Probe(f, [lambda fn: fn(torch.ones(3)), lambda fn: fn(torch.zeros(3)),
                     lambda fn: fn(torch.ones(2))])


@probe
def conv_with_the_wrong_channels() -> Probe:
    w = T(4, 3, 3, 3)

    def f(x):
        return F.conv2d(x, w)

    return Probe(f, [lambda fn: fn(T(1, 3, 5, 5)), lambda fn: fn(T(1, 2, 5, 5)),
                     lambda fn: fn(T(2, 3, 5, 5))])


@probe
def reshape_to_an_impossible_size() -> Probe:
    def f(x, n):
        return x.reshape(n, -1)

    return Probe(f, [lambda fn: fn(T(6), 2), lambda fn: fn(T(6), 4), lambda fn: fn(T(6), 3)])


@probe
def int_tensor_in_place_true_division() -> Probe:
    def f(x):
        y = x.clone()
        y /= 2
        return y

    return Probe(f, [lambda fn: fn(T(3)), lambda fn: fn(torch.arange(3)),
                     lambda fn: fn(T(3, seed=1))])


def _known(make: Callable[[], Probe], backend: str) -> str | None:
    # NOTE: the value is the output of a graph run as one autograd node: its repr names that
    # node (CompiledFunctionBackward, as under torch.compile), not eager's MulBackward0
    if backend != "eager" and make is print_tensor_with_grad_fn:
        return "a compiled graph's output has the graph's grad_fn"
    return None


test_probe = probe_test(PROBES, _known)


if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:]))
