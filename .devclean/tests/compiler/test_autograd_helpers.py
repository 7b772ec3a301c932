"""Autograd helpers inside compiled code: `torch.autograd.Function` subclasses (forward in
the graph, the user's backward for gradients), `torch.utils.checkpoint` (values and
gradients of eager) and `Tensor.register_hook` on a tensor made in the compiled region.
Outputs and gradients equal eager's on each backend; graph counts are at most
torch.compile's, counted in the same run."""

from __future__ import annotations

import contextlib
import io

import compiler
import pytest
import torch
import torch.utils.checkpoint

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


class Counting:
    def __init__(self, inner: str = "eager") -> None:
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

    with contextlib.redirect_stdout(io.StringIO()):
        torch.compile(fn, backend=count)(*args).sum().backward()
    torch._dynamo.reset()
    return len(graphs)


def check(fn, backend, *shapes, seed=0):
    """Forward and backward, eagerly and compiled: same outputs and input gradients."""
    compiler.reset()
    counting = Counting(backend)
    compiled = compiler.compile(fn, backend=counting)
    for call in range(2):
        gen = torch.Generator().manual_seed(seed + call)
        base = [torch.randn(*s, generator=gen) for s in shapes]
        e_in = [b.clone().requires_grad_() for b in base]
        c_in = [b.clone().requires_grad_() for b in base]
        expected, actual = fn(*e_in), compiled(*c_in)
        torch.testing.assert_close(actual, expected)
        expected.sum().backward()
        actual.sum().backward()
        for e, c in zip(e_in, c_in):
            torch.testing.assert_close(c.grad, e.grad)
    return counting


class ScaledSin(torch.autograd.Function):
    """sin with a deliberately wrong backward (10x), so the user's backward is visible."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x.sin() * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * ctx.scale * 10, None


def uses_function(x, w):
    return ScaledSin.apply(x @ w, 2.0).relu() + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_function_forward_in_the_graph_and_the_users_backward(backend):
    counting = check(uses_function, backend, (3, 4), (4, 5))
    assert len(counting.graphs) == 1
    names = [str(n.target) for n in counting.graphs[0].graph.nodes]
    assert any("ScaledSin_apply" in name for name in names), names


def test_autograd_function_graph_count_vs_torch_compile():
    counting = check(uses_function, "eager", (3, 4), (4, 5))
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    assert len(counting.graphs) <= torch_graphs(uses_function, x, w)


def _block(x, w):
    return (x @ w).tanh() * x.sigmoid()


def uses_checkpoint(x, w):
    y = torch.utils.checkpoint.checkpoint(_block, x, w, use_reentrant=False)
    return y.exp() - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_values_and_gradients(backend):
    counting = check(uses_checkpoint, backend, (4, 4), (4, 4))
    assert len(counting.graphs) == 1
    tagged = [n for n in counting.graphs[0].graph.nodes if "checkpoint" in n.meta]
    assert {str(n.target) for n in tagged} >= {"<built-in function matmul>", "tanh"}


def hooked(x, w):
    y = x @ w
    y.register_hook(lambda g: g * 3)
    return (y * y).relu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_register_hook_on_a_tensor_made_in_the_compiled_region(backend):
    # NOTE: the hook is registered for real between two graphs (torch.compile keeps one
    # graph and registers it on the graph's output: 1).
    counting = check(hooked, backend, (2, 3), (3, 3))
    assert len(counting.graphs) == 2


def hooked_after_use(x, w):
    y = x @ w
    z = y * 2
    y.register_hook(lambda g: g * 3)
    return (y * y).relu() + z


@pytest.mark.parametrize("backend", BACKENDS)
def test_register_hook_after_the_tensor_was_used_sees_its_whole_gradient(backend):
    # the graph before the hook used y: no break there (the frame runs eagerly), since a
    # compiled backward would pass z's part of y's gradient past the hook
    check(hooked_after_use, backend, (2, 3), (3, 3))
