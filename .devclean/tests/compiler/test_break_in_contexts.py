"""Graph breaks inside `torch.autocast` blocks and user context managers: the context is
entered again around the instruction run for real and in the resume function, so values,
dtypes, side effects and the autocast state after the call are eager's; graphs are counted
against torch.compile in the same run. A generator-based context manager
(`contextlib.contextmanager`) cannot be entered again in the middle: the frame runs eagerly,
with the reason logged."""

from __future__ import annotations

import contextlib
import io
import logging

import compiler
import pytest
import torch

BACKENDS = ["eager", "aot_eager"]
MODE = ["ours"]
log: list[object] = []


def brk() -> None:
    """A graph break for us, and for torch.compile when it runs the program."""
    if MODE[0] == "torch":
        torch._dynamo.graph_break()
    else:
        compiler.graph_break()


class Counting:
    def __init__(self, inner: str) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.inner = compiler.lookup_backend(inner)

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def torch_graphs(fn, *args) -> int:
    torch._dynamo.reset()
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    MODE[0] = "torch"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.compile(fn, backend=count)(*args)
    finally:
        MODE[0] = "ours"
        torch._dynamo.reset()
    return len(graphs)


def same(got, want) -> None:
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


def run_both(fn, backend, *args):
    """(compiled result, eager result, graph count); the log and the autocast state after
    the call must be eager's, on the first call and on a cached one."""
    compiler.reset()
    counting = Counting(backend)
    compiled = compiler.compile(fn, backend=counting)
    log.clear()
    want = fn(*args)
    want_log = list(log)
    for _ in range(2):
        log.clear()
        got = compiled(*args)
        assert log == want_log
        assert not torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    return got, want, len(counting.graphs)


def in_autocast(x, w):
    a = x.sin()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ w
        brk()
        log.append((torch.is_autocast_enabled("cpu"), y.dtype))
        z = y @ w
    return z.float().cos() + a, z


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_autocast(backend):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    (got, gz), (want, wz), graphs = run_both(in_autocast, backend, x, w)
    same(got, want)
    same(gz, wz)
    assert wz.dtype == torch.bfloat16
    assert graphs == 2 == torch_graphs(in_autocast, x, w)


def autocast_inside_no_grad(x, w):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        brk()
        z = (y @ w).relu()
    return z * x


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_autocast_inside_no_grad(backend):
    x = torch.randn(4, 4, requires_grad=True)
    w = torch.randn(4, 4)
    got, want, graphs = run_both(autocast_inside_no_grad, backend, x, w)
    same(got, want)
    assert got.requires_grad and want.requires_grad
    assert graphs <= torch_graphs(autocast_inside_no_grad, x, w)


def autocast_off_inside_autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        with torch.autocast("cpu", enabled=False):
            brk()
            z = y.float() @ w
        u = z @ w
    return u, z


def test_break_in_nested_autocast_blocks():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    (gu, gz), (wu, wz), graphs = run_both(autocast_off_inside_autocast, "aot_eager", x, w)
    same(gu, wu)
    same(gz, wz)
    assert (wz.dtype, wu.dtype) == (torch.float32, torch.bfloat16)
    assert graphs <= torch_graphs(autocast_off_inside_autocast, x, w)


def failing(t):
    log.append(("failing", torch.is_autocast_enabled("cpu")))
    raise ValueError("no")


def autocast_then_error(x, w):
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            failing(y)
    except ValueError:
        log.append(("caught", torch.is_autocast_enabled("cpu")))
        y = x @ w
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_of_the_call_leaves_the_autocast_block(backend):
    compiler.disable(failing)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    got, want, _ = run_both(autocast_then_error, backend, x, w)
    same(got, want)
    assert want.dtype == torch.float32


class Tracked:
    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self):
        log.append(("enter", self.name))
        return self

    def __exit__(self, *exc):
        log.append(("exit", self.name, exc[0]))
        return False


def in_user_context(x, w):
    a = x.sin()
    with Tracked("t") as t:
        y = a @ w
        brk()
        log.append(t.name)
        z = y @ w
    return z.cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_user_context_manager(backend):
    # NOTE: torch.compile runs this frame eagerly (0 graphs); capture keeps two.
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    got, want, graphs = run_both(in_user_context, backend, x, w)
    same(got, want)
    assert graphs == 2
    assert torch_graphs(in_user_context, x, w) == 0


@contextlib.contextmanager
def generated(tag):
    log.append(("enter", tag))
    try:
        yield tag
    finally:
        log.append(("exit", tag))


def in_generator_context(x, w):
    a = x.sin()
    with generated(3) as t:
        y = a @ w * t
        brk()
        z = y @ w
    return z.cos()


def test_break_inside_a_generator_context_manager_runs_the_frame_eagerly(caplog):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with caplog.at_level(logging.WARNING):
        got, want, graphs = run_both(in_generator_context, "eager", x, w)
    same(got, want)
    assert graphs == 0 == torch_graphs(in_generator_context, x, w)
    text = caplog.text
    assert "running it eagerly" in text
    assert "no graph break there" in text
