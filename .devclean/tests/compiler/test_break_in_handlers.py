"""Graph breaks inside `except` handlers: the handled exception is made again for real (one
per call, as eager raises one), the instruction run at the break sees it as
`sys.exc_info()`, and the resume function enters the handler again, so values, side effects,
re-raises, chained exceptions and the exception state after the frame are eager's; graphs
are counted against torch.compile in the same run (it runs these frames eagerly: 0 graphs).
A `finally` body entered by an exception still runs the frame eagerly (its resume function
cannot be assembled), with eager's results."""

from __future__ import annotations

import contextlib
import io
import sys

import compiler
import pytest
import torch

BACKENDS = ["eager", "aot_eager"]
log: list[object] = []


@compiler.disable
def peek(tag: str) -> None:
    """Runs eagerly (a graph break): records the exception being handled."""
    log.append((tag, repr(sys.exc_info()[1])))


@torch._dynamo.disable
def dynamo_peek(tag: str) -> None:
    log.append((tag, repr(sys.exc_info()[1])))


@compiler.disable
def fail(t: torch.Tensor) -> None:
    raise KeyError("inner")


class Counting:
    def __init__(self, inner: str) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.inner = compiler.lookup_backend(inner)

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def outcome(fn, x):
    """(result or None, (exception type, args, type of its __context__) or None, log)."""
    log.clear()
    try:
        result, error = fn(x), None
    except Exception as e:  # noqa: BLE001  # compared with eager's
        result, error = None, (type(e), e.args, type(e.__context__))
    assert sys.exc_info() == (None, None, None)
    return result, error, list(log)


def compare(fn, backend, x) -> int:
    """Eager and two compiled calls give the same outcome; returns the graph count."""
    compiler.reset()
    counting = Counting(backend)
    compiled = compiler.compile(fn, backend=counting)
    want = outcome(fn, x)
    for _ in range(2):
        got = outcome(compiled, x)
        assert got[1:] == want[1:]
        if want[0] is None:
            assert got[0] is None
        else:
            torch.testing.assert_close(got[0], want[0])
    return len(counting.graphs)


def torch_graphs(fn, x) -> int:
    torch._dynamo.reset()
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(Exception):
        torch.compile(fn, backend=count)(x)
    torch._dynamo.reset()
    return len(graphs)


def in_except(x, peek=peek):
    a = x.sin()
    try:
        raise ValueError("v", 3)
    except ValueError as e:
        y = a * 2
        peek("in")
        z = y + e.args[1]
    peek("after")
    return z.cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_an_except_block(backend):
    x = torch.randn(3)
    assert compare(in_except, backend, x) == 3  # around each of the two breaks
    assert torch_graphs(lambda t: in_except(t, dynamo_peek), x) == 0


def reraised(x):
    y = x.exp()
    try:
        raise ValueError("again")
    except ValueError:
        peek("in")
        y = y + 1
        raise


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bare_raise_after_the_break_reraises_the_handled_exception(backend):
    compare(reraised, backend, torch.randn(3))


def chained(x):
    try:
        raise ValueError("handled")
    except ValueError:
        y = x + 1
        fail(y)


def test_an_exception_of_the_call_chains_to_the_handled_one():
    compare(chained, "eager", torch.randn(3))


def nested(x):
    try:
        raise ValueError("outer")
    except ValueError:
        try:
            raise TypeError("inner")
        except TypeError:
            peek("inner")
            y = x * 2
        peek("outer")
        y = y + 1
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_breaks_in_nested_handlers(backend):
    assert compare(nested, backend, torch.randn(3)) == 2


def fresh_each_call(x, seen=[]):  # noqa: B006  # a list kept across calls on purpose
    try:
        raise ValueError("v")
    except ValueError as e:
        peek("in")
        seen.append(e)
        y = x + len(seen)
    return y


def test_the_handled_exception_is_a_new_object_on_each_call():
    fresh_each_call.__defaults__[0].clear()
    compiler.reset()
    compiled = compiler.compile(fresh_each_call, backend="eager")
    x = torch.randn(3)
    compiled(x)
    compiled(x)
    first, second = fresh_each_call.__defaults__[0]
    assert first is not second and first.args == second.args == ("v",)


def in_finally_after_an_exception(x):
    a = x.sin()
    try:
        raise ValueError("v")
    finally:
        y = a * 2
        peek("fin")
        log.append(bool(y.sum() > -100))


def test_a_finally_entered_by_an_exception_runs_the_frame_eagerly():
    assert compare(in_finally_after_an_exception, "eager", torch.randn(3)) == 0
