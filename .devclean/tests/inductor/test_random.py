"""Random ops in graphs compiled by inductor (through aotgrad + inductor): dropout,
bernoulli, rand/randn. Values cannot equal eager's (another generator), so each test checks
what eager guarantees: the distribution (moments, within several standard errors), the
structure (dropout keeps `x / (1 - p)` or 0; the backward uses the forward's mask; in-place
ops mutate their input), that `torch.manual_seed(s)` makes a compiled call repeatable and
that successive calls differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from inductor.backend import make_inductor


def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    gm = fn if isinstance(fn, torch.nn.Module) else torch.fx.symbolic_trace(fn)
    if isinstance(gm, torch.nn.Module) and not isinstance(gm, torch.fx.GraphModule):
        gm = torch.fx.symbolic_trace(gm)
    backend = make_inductor()
    state: dict[str, Callable[..., Any]] = {}

    def call(*args: Any) -> Any:
        if "fn" not in state:
            state["fn"] = backend(gm, list(args))
        out = state["fn"](*args)
        return out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out

    return call


def _close_to(value: float, expected: float, std_error: float) -> None:
    assert abs(value - expected) <= 6 * std_error, (value, expected, std_error)


@pytest.mark.parametrize("p", [0.5, 0.1, 0.9])
def test_functional_dropout_training(p: float) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, p, training=True) + 0.0

    compiled = _compile(f)
    x = torch.randn(200, 300) + 3.0  # NOTE: no zeros in x: a zero out is a dropped element
    n = x.numel()
    outs = []
    for _ in range(3):
        y = compiled(x)
        eager = f(x)
        kept = y != 0
        _close_to(kept.float().mean().item(), 1 - p, math.sqrt(p * (1 - p) / n))
        _close_to((eager != 0).float().mean().item(), 1 - p, math.sqrt(p * (1 - p) / n))
        torch.testing.assert_close(y[kept], x[kept] / (1 - p))
        outs.append(kept)
    assert not torch.equal(outs[0], outs[1]) and not torch.equal(outs[1], outs[2])


def test_dropout_backward_uses_the_forward_mask() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x * 1.5, 0.4, training=True)

    compiled = _compile(f)
    for _ in range(3):
        x = (torch.rand(64, 128) + 0.5).requires_grad_()
        y = compiled(x)
        y.backward(torch.ones_like(y))
        assert x.grad is not None
        torch.testing.assert_close(x.grad, (y != 0).float() * 1.5 / 0.6)
        torch.testing.assert_close(y[y != 0], (x * 1.5 / 0.6).detach()[y != 0])


def test_dropout_module_in_training_with_backward_uses_the_same_mask() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Dropout(0.5),
                                torch.nn.Linear(128, 8))
    model.train()
    compiled = _compile(model)
    x = torch.randn(1, 64)  # NOTE: one row: the mask is one per hidden unit
    masks = []
    for _ in range(3):
        model.zero_grad()
        out = compiled(x)
        out.sum().backward()
        w1_grad = model[0].weight.grad
        assert w1_grad is not None
        keep = (w1_grad.abs().sum(1) != 0).float()  # units the backward let through
        masks.append(keep)
        _close_to(keep.mean().item(), 0.5, math.sqrt(0.25 / 128))
        # the forward kept the same units: its output is rebuilt from them
        with torch.no_grad():
            hidden = model[0](x) * keep * 2.0
            torch.testing.assert_close(out, model[2](hidden), atol=1e-4, rtol=1e-4)
    assert not torch.equal(masks[0], masks[1])


def test_factory_without_tensor_inputs_differs_per_call() -> None:
    # NOTE: built node by node: fx.symbolic_trace would call torch.randn(5, 7) while tracing
    # and keep its result as a constant (capture puts the call in the graph, as here).
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    noise = graph.call_function(torch.randn, (5, 7))
    graph.output(graph.call_function(torch.add, (noise, x)))
    compiled = _compile(torch.fx.GraphModule(torch.nn.Module(), graph))
    x_value = torch.zeros(7)
    first, second = compiled(x_value), compiled(x_value)
    assert first.shape == (5, 7)
    assert not torch.equal(first, second)


def test_dropout_eval_is_identity() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5))
    model.eval()
    compiled = _compile(model)
    x = torch.randn(4, 16)
    for _ in range(2):
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x))


def test_manual_seed_makes_compiled_calls_repeatable() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (F.dropout(x, 0.3, training=True), torch.rand_like(x) * 2,
                torch.randn_like(x[:5]) + x.sum(), torch.bernoulli(torch.full_like(x, 0.25)))

    compiled = _compile(f)
    x = torch.randn(40, 30)
    torch.manual_seed(123)
    first = compiled(x)
    second = compiled(x)
    torch.manual_seed(123)
    again = compiled(x)
    torch.manual_seed(7)
    other = compiled(x)
    for a, b, c, d in zip(first, again, second, other):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert not torch.equal(a, c) and not torch.equal(a, d)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rand_and_randn_distributions(dtype: torch.dtype) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (torch.rand(400, 500, dtype=dtype) + x, torch.randn_like(x) * 1.0,
                torch.rand_like(x))

    compiled = _compile(f)
    x = torch.zeros(400, 500, dtype=dtype)
    n = x.numel()
    for _ in range(2):
        u, z, u2 = compiled(x)
        assert u.dtype == dtype and z.dtype == dtype and u.shape == (400, 500)
        for v in (u, u2):
            assert 0.0 <= v.min().item() and v.max().item() < 1.0
            _close_to(v.mean().item(), 0.5, math.sqrt(1 / 12 / n))
            _close_to(v.var().item(), 1 / 12, math.sqrt(1 / 180 / n))
            # NOTE: uniform: each tenth of [0, 1) holds a tenth of the values
            hist = torch.histc(v.double(), bins=10, min=0.0, max=1.0) / n
            assert (hist - 0.1).abs().max().item() < 6 * math.sqrt(0.09 / n)
        _close_to(z.mean().item(), 0.0, math.sqrt(1 / n))
        _close_to(z.std().item(), 1.0, math.sqrt(0.5 / n))
        _close_to((z.abs() < 1).double().mean().item(), 0.6826894921,
                  math.sqrt(0.22 / n))
        assert not torch.equal(u, u2)


def test_bernoulli_tensor_probabilities_and_in_place() -> None:
    def f(p: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = torch.bernoulli(p)
        x.bernoulli_(0.3)
        return b, x * 1

    compiled = _compile(f)
    p = torch.linspace(0.0, 1.0, 11).repeat(20000, 1)
    for _ in range(2):
        x = torch.randn(300, 200)
        b, y = compiled(p, x)
        assert set(b.unique().tolist()) <= {0.0, 1.0}
        col = b.mean(0)
        for k in range(11):
            q = k / 10
            _close_to(col[k].item(), q, math.sqrt(max(q * (1 - q), 1e-12) / 20000))
        assert set(y.unique().tolist()) <= {0.0, 1.0}
        _close_to(y.mean().item(), 0.3, math.sqrt(0.21 / y.numel()))
        torch.testing.assert_close(x, y)  # NOTE: the input was filled in place, as eager


def test_embedding_dropout_layer_norm_fused_rows() -> None:
    """A transformer's embedding in training: gather rows, dropout, layer norm, fused into
    one kernel whose later passes over a row reload the dropout mask from a row array and
    gather again through the same indices (they did not compile: the indices were dropped
    as dead). The mask is read back from the output: dropped elements are the row's
    minimum, since every embedding value is positive."""
    wte = torch.nn.Parameter(1.0 + torch.arange(256.0).div(256).repeat(50, 1))  # rows 1..2
    wpe = torch.nn.Parameter(torch.zeros(64, 256))
    ln_w = torch.nn.Parameter(torch.ones(256))
    ln_b = torch.nn.Parameter(torch.zeros(256))

    def f(ids: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor, w: torch.Tensor,
          b: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        h = F.dropout(F.embedding(ids, wte) + F.embedding(pos, wpe), 0.1, training=True)
        return F.layer_norm(h, (256,), w, b)

    compiled = _compile(f)
    ids = torch.randint(0, 50, (2, 64))
    args = (ids, wte, wpe, ln_w, ln_b)
    y = compiled(*args)
    kept = y > y.amin(-1, keepdim=True) + 1e-3
    _close_to(kept.float().mean().item(), 0.9, math.sqrt(0.09 / kept.numel()))
    with torch.no_grad():
        expected = F.layer_norm(wte[ids] * kept / 0.9, (256,), ln_w, ln_b)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    y.mul(torch.randn_like(y)).sum().backward()
    assert wte.grad is not None and torch.isfinite(wte.grad).all()
