"""The fine-grained tracing API (`graph_break`, `allow_in_graph`, `disallow_in_graph`,
`assume_constant_result`, `substitute_in_graph`, `disable(recursive=...)`): results equal
eager's, graph counts as documented and never more than torch.compile's on the same
program, counted in the same run."""

from __future__ import annotations

import contextlib
import io

import compiler
import numpy as np
import pytest
import torch


class Counting:
    """An eager backend that records the graphs it receives."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self, i: int) -> list[object]:
        return [n.target for n in self.graphs[i].graph.nodes
                if n.op in ("call_function", "call_method")]

    def names(self, i: int) -> list[str]:
        return [t if isinstance(t, str) else getattr(t, "__name__", str(t))
                for t in self.targets(i)]


def torch_graphs(fn, *args) -> int:
    torch._dynamo.reset()
    backend = Counting()
    with contextlib.redirect_stdout(io.StringIO()):
        torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return len(backend.graphs)


def ours(fn, *args, calls: int = 2, fullgraph: bool = False):
    compiler.reset()
    backend = Counting()
    compiled = compiler.compile(fn, backend=backend, fullgraph=fullgraph)
    for _ in range(calls):
        torch.testing.assert_close(compiled(*args), fn(*args))
    return backend


def breaks_on_request(x):
    y = x.sin() + 1
    compiler.graph_break()
    return y.cos() * 2


def test_graph_break_splits_into_two_graphs_like_torch_compile():
    x = torch.randn(4)
    backend = ours(breaks_on_request, x)
    assert len(backend.graphs) == 2
    assert "sin" in backend.names(0) and "cos" not in backend.names(0)
    assert "cos" in backend.names(1)

    def theirs(x):
        y = x.sin() + 1
        torch._dynamo.graph_break()
        return y.cos() * 2

    assert len(backend.graphs) <= torch_graphs(theirs, x) == 2


def test_graph_break_under_fullgraph_names_the_line():
    compiled = compiler.compile(breaks_on_request, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="graph_break") as info:
        compiled(torch.randn(2))
    assert "compiler.graph_break()" in str(info.value)


def _scaled_relu(x):
    return x.relu() * 2 + x.sum()


def allowed_caller(x):
    return _scaled_relu(x - 1) / 3


def test_allow_in_graph_is_one_opaque_node_with_the_right_metadata():
    compiler.allow_in_graph([_scaled_relu])
    x = torch.randn(3, 4)
    backend = ours(allowed_caller, x)
    assert len(backend.graphs) == 1
    assert _scaled_relu in backend.targets(0)
    node = next(n for n in backend.graphs[0].graph.nodes if n.target is _scaled_relu)
    assert node.meta["example_value"].shape == (3, 4)
    # gradients flow through the opaque call as through eager
    w = torch.randn(3, 4, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    compiler.compile(allowed_caller, backend="aot_eager")(w2).sum().backward()
    allowed_caller(w).sum().backward()
    torch.testing.assert_close(w2.grad, w.grad)


def disallowed_op(x):
    return torch.logaddexp2(x.sin(), x) * 2


def test_disallow_in_graph_breaks_around_each_call():
    compiler.disallow_in_graph(torch.logaddexp2)
    try:
        backend = ours(disallowed_op, torch.randn(5))
        assert len(backend.graphs) == 2
        assert all("logaddexp2" not in backend.names(i) for i in range(2))
    finally:
        compiler.allow_in_graph(torch.logaddexp2)
    backend = ours(disallowed_op, torch.randn(5))
    assert len(backend.graphs) == 1


def test_disallow_in_graph_on_user_code_names_disable():
    def helper(x):
        return x + 1

    with pytest.raises(ValueError, match=r"compiler\.disable"):
        compiler.disallow_in_graph(helper)
    with pytest.raises(TypeError, match="'fn'"):
        compiler.disallow_in_graph(3)


CALLS: list[int] = []


@compiler.assume_constant_result
def _world_size():
    CALLS.append(1)
    return 4


def constant_caller(x):
    return x / _world_size() + _world_size()


def test_assume_constant_result_is_called_at_capture_only():
    CALLS.clear()
    compiled = compiler.compile(constant_caller, backend="eager")
    compiler.reset()
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), x / 4 + 4)
    assert len(CALLS) == 2  # two calls in the traced code, one capture


def test_assume_constant_result_refuses_a_tensor_result():
    @compiler.assume_constant_result
    def table():
        return torch.ones(2)

    def f(x):
        return x + table()

    with pytest.raises(Exception, match="returned a tensor"):
        compiler.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
    torch.testing.assert_close(compiler.compile(f, backend="eager")(torch.ones(2)),
                               torch.full((2,), 2.0))


def _clip_unit(x):
    return torch.from_numpy(np.clip(x.numpy(), 0.0, 1.0))


@compiler.substitute_in_graph(_clip_unit)
def _clip_unit_traced(x):
    return x.clamp(0.0, 1.0)


def substituted(x):
    return _clip_unit(x * 2) + 1


def test_substitute_in_graph_traces_the_polyfill_in_one_graph():
    backend = ours(substituted, torch.randn(6), fullgraph=True)
    assert len(backend.graphs) == 1


def test_substitute_in_graph_checks_the_parameters():
    def original(x, y=1):
        return x

    with pytest.raises(TypeError, match="same parameters"):
        compiler.substitute_in_graph(original)(lambda x: x)


@compiler.disable
def _opaque(y):
    return y * 3 + 1


def calls_disabled(x):
    y = x.exp()
    z = _opaque(y)
    return z.log()


def test_disable_is_a_break_around_the_call_like_torch_compile():
    x = torch.rand(4)
    backend = ours(calls_disabled, x)
    assert len(backend.graphs) == 2

    @torch.compiler.disable
    def opaque(y):
        return y * 3 + 1

    def theirs(x):
        y = x.exp()
        z = opaque(y)
        return z.log()

    assert len(backend.graphs) <= torch_graphs(theirs, x) == 2


def _shallow_helper(x):
    return x.sin() * 2 + 1


class _Scale(torch.nn.Module):
    def forward(self, x):
        return x.tanh() * 0.5


_shallow_linear = torch.nn.Linear(4, 4)
_shallow_scale = _Scale()
_shallow_log: list[str] = []


def _shallow_body(x):
    y = _shallow_helper(x)  # a plain function: compiled when called from compiled code
    z = _shallow_scale(_shallow_linear(y))  # a user module: its compiled forward; torch's
    _shallow_log.append("ran")  # nn.Linear and the skipped frame's own code run eagerly
    return torch.relu(z) + 0.5


@pytest.mark.parametrize("recursive", [False, True])
def test_disable_recursive_false_called_from_compiled_code_compiles_its_callees(recursive):
    shallow = compiler.disable(_shallow_body, recursive=recursive)
    dynamo_shallow = torch._dynamo.disable(_shallow_body, recursive=recursive)

    def ours_fn(x):
        return shallow(x.cos()) * 3

    def theirs_fn(x):
        return dynamo_shallow(x.cos()) * 3

    x = torch.randn(2, 4)
    _shallow_log.clear()
    backend = ours(ours_fn, x)
    assert _shallow_log == ["ran"] * 4  # two compiled calls, two eager ones
    theirs = torch_graphs(theirs_fn, x)
    ops = sorted(sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
                 for gm in backend.graphs)
    if recursive:
        # the frame and everything it calls run eagerly: the graphs before and after
        assert ops == [1, 1]
    else:
        # and the helper's three ops and the user module's two in graphs of their own
        assert ops == [1, 1, 2, 3]
    assert len(backend.graphs) <= theirs
    # called from eager code, the skipped frame simply runs (nothing compiled there)
    compiler.reset()
    count = Counting()
    compiler.compile(lambda t: t + 1, backend=count)
    torch.testing.assert_close(shallow(x), _shallow_body(x))
    assert count.graphs == []


def test_disable_recursive_false_still_compiles_compiled_callees():
    backend = Counting()
    inner = compiler.compile(lambda x: x * 2 + 1, backend=backend)

    @compiler.disable(recursive=False)
    def shallow(x):
        return inner(x) - 1

    @compiler.disable(recursive=True)
    def deep(x):
        return inner(x) - 1

    compiler.reset()
    x = torch.randn(3)
    torch.testing.assert_close(deep(x), x * 2)
    assert backend.graphs == []
    torch.testing.assert_close(shallow(x), x * 2)
    assert len(backend.graphs) == 1
    with pytest.raises(TypeError, match="'recursive'"):
        compiler.disable(shallow, recursive=1)
