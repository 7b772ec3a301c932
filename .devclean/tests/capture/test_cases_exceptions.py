# ruff: noqa: TRY203  # the corpus spells these constructs on purpose: it tests them

"""Differential cases: exceptions raised and caught inside traced code (try/except/else/
finally, re-raise, `except E as e`, StopIteration, the old sequence protocol that ends
with IndexError, KeyError fallbacks) are traced into one graph with eager's results; an
exception no traced frame catches makes the frame run eagerly, raising the real exception."""

from __future__ import annotations

import collections.abc

import pytest
import torch
from _differential import CountingBackend, case, check, optimize, t


class CountedError(Exception):
    pass


class Seq(collections.abc.Sequence):  # iterated through __getitem__ until IndexError
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError("list index out of range")
        return float(i + 1)


class OldProtocol:  # no __iter__ at all: the sequence protocol of `for`
    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]


def key_error_fallback(x, d):
    try:
        v = d["k"]
    except KeyError:
        v = 2.0
    return x * v


def raise_and_catch_with_message(x):
    try:
        raise ValueError("boom")
    except ValueError as e:
        n = len(str(e))
    return x * n


def try_else_finally(x, flag):
    log = []
    try:
        if flag:
            raise KeyError("k")
        log.append("body")
    except KeyError:
        log.append("except")
    else:
        log.append("else")
    finally:
        log.append("finally")
    return x + len(log), log


def nested_reraise(x):
    try:
        try:
            raise CountedError("inner")
        except KeyError:
            return x
    except CountedError as e:
        return x + len(e.args)


def bare_reraise(x):
    try:
        try:
            raise ValueError("a")
        except ValueError:
            raise
    except ValueError:
        return x - 1


def raise_from(x):
    try:
        try:
            raise KeyError("k")
        except KeyError as e:
            raise ValueError("wrapped") from e
    except ValueError as e:
        return x * (2 if isinstance(e.__cause__, KeyError) else 3)


def tuple_of_types(x):
    try:
        int("not a number")
    except (TypeError, ValueError):
        return x + 10
    return x


def stop_iteration_loop(x):
    it = iter([1.0, 2.0, 3.0])
    while True:
        try:
            x = x + next(it)
        except StopIteration:
            break
    return x


def sequence_mixin_iteration(x):
    for v in Seq(3):
        x = x * v
    return x


def old_sequence_protocol(x):
    total = x
    for v in OldProtocol([1.0, 2.0]):
        total = total + v
    return total


def zero_division_caught(x, a, b):
    try:
        r = a / b
    except ZeroDivisionError:
        r = -1.0
    return x * r


def index_error_caught(x, items):
    try:
        v = items[5]
    except IndexError:
        v = 7
    return x + v


def except_inside_no_grad(x):
    with torch.no_grad():
        try:
            raise KeyError(1)
        except KeyError:
            y = x * 2
    return y


def mutation_before_raise_is_kept(x, log):
    try:
        log.append(1)
        raise CountedError()
    except CountedError:
        log.append(2)
    return x * len(log)


import contextlib


@contextlib.contextmanager
def _tagged(tags):
    tags.append("+")
    try:
        yield len(tags)
    finally:
        tags.append("-")


def context_manager_effects_interleave(x, tags):
    with _tagged(tags) as n:
        tags.append("body")
        y = x + n
    return y


def _producer(log):
    log.append("p1")
    yield 1.0
    log.append("p2")
    yield 2.0
    log.append("p-end")


def generator_effects_interleave(x, log):
    for v in _producer(log):
        log.append("c")
        x = x + v
    return x


def generator_partly_consumed(x, log):
    gen = _producer(log)
    first = next(gen)
    return x * first


def generator_sees_consumer_mutation(x, items):
    def reader():
        for i in range(3):
            yield len(items)

    total = 0
    for n in reader():
        items.append(n)
        total += n
    return x + total


def _guarded_producer(log):
    try:
        yield 1.0
        yield 2.0
    finally:
        log.append("closed")


def generator_abandoned_inside_try(x, log):
    for v in _guarded_producer(log):
        x = x + v
        break
    return x


def _indexed(seq):  # the shape of collections.abc.Sequence.__iter__
    i = 0
    try:
        while True:
            yield seq[i]
            i += 1
    except IndexError:
        return


def generator_abandoned_inside_except_clause(x):
    # closing it raises GeneratorExit, which `except IndexError` does not catch: no code runs
    for v in _indexed([1.0, 2.0, 3.0]):
        x = x + v
        break
    return x


CASES = [
    case(generator_abandoned_inside_except_clause, t(3)),
    case(context_manager_effects_interleave, t(3), []),
    case(generator_effects_interleave, t(3), []),
    case(generator_partly_consumed, t(3), []),
    case(generator_sees_consumer_mutation, t(3), [0]),
    case(key_error_fallback, t(3), {}),
    case(key_error_fallback, t(3), {"k": 3.0}, id="key_error_fallback_present"),
    case(raise_and_catch_with_message, t(3)),
    case(try_else_finally, t(3), True),
    case(try_else_finally, t(3), False, id="try_else_finally_no_raise"),
    case(nested_reraise, t(3)),
    case(bare_reraise, t(3)),
    case(raise_from, t(3)),
    case(tuple_of_types, t(3)),
    case(stop_iteration_loop, t(3)),
    case(sequence_mixin_iteration, t(3)),
    case(old_sequence_protocol, t(3)),
    case(zero_division_caught, t(3), 1.0, 0.0),
    case(zero_division_caught, t(3), 1.0, 2.0, id="zero_division_not_raised"),
    case(index_error_caught, t(3), [1, 2]),
    case(except_inside_no_grad, t(3, requires_grad=True)),
    case(mutation_before_raise_is_kept, t(3), [0]),
]


@pytest.mark.parametrize(("fn", "args", "opts"), CASES)
def test_exceptions(fn, args, opts):
    check(fn, *args, **opts)


def uncaught(x, n):
    if n > 2:
        raise CountedError(f"n={n}")
    return x + n


def test_uncaught_exception_runs_eagerly_and_raises_the_real_exception():
    backend = CountingBackend()
    compiled = optimize(uncaught, backend, fullgraph=False)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, 1), x + 1)
    with pytest.raises(CountedError, match="n=3"):
        compiled(x, 3)
    torch.testing.assert_close(compiled(x, 1), x + 1)


def test_uncaught_exception_under_fullgraph_is_the_real_one_from_the_raise():
    # NOTE: the program's own exception is what eager raises, even under fullgraph (issue 11,
    # group 8): the frame runs eagerly and the user sees it raised from their `raise` line.
    compiled = optimize(uncaught, CountingBackend(), fullgraph=True)
    for _ in range(2):
        with pytest.raises(CountedError, match="n=3") as info:
            compiled(torch.ones(2), 3)
        assert "raise CountedError" in str(info.traceback[-1].statement)
        torch.testing.assert_close(compiled(torch.ones(2), 1), torch.ones(2) + 1)


def test_generator_abandoned_inside_try_runs_eagerly():
    # CPython runs the generator's `finally` when the abandoned generator is collected;
    # capture does not model that, so the frame must run eagerly (never a lost side effect).
    check(generator_abandoned_inside_try, t(3), [], graphs=0, fullgraph=False)
