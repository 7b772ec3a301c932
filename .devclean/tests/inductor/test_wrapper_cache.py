"""The inductor backend and aotgrad's shared compiled-graph cache: a captured graph compiled
again (as after `compiler.reset()`) reuses the compiled kernels and wrappers, gives eager's
results, and other inductor options miss."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import pytest
import torch
from aotgrad import cache
from inductor import config
from inductor.backend import InductorCompiler, make_inductor
from torch import fx


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _captured() -> fx.GraphModule:
    """What capture hands a backend for `layer_norm(gelu(linear(x, w, b))) * 2`."""
    graph = fx.Graph()
    x, w, b, g, beta = (graph.placeholder(n) for n in ("x", "w", "b", "g", "beta"))
    h = graph.call_function(torch._C._nn.linear, (x, w, b))
    h = graph.call_function(torch.nn.functional.gelu, (h,), {"approximate": "none"})
    h = graph.call_function(torch.nn.functional.layer_norm, (h, (32,), g, beta, 1e-5))
    graph.output((graph.call_function(operator.mul, (h, 2.0)),))
    return fx.GraphModule(torch.nn.Module(), graph, "CapturedGraph")


def _args() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(8, 16), torch.randn(32, 16, requires_grad=True),
            torch.randn(32, requires_grad=True), torch.randn(32, requires_grad=True),
            torch.randn(32, requires_grad=True)]


def _eager(args: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x, *params = (a.detach().requires_grad_(a.requires_grad) for a in args)
    w, b, g, beta = params
    h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))
    out = torch.nn.functional.layer_norm(h, (32,), g, beta, 1e-5) * 2.0
    out.sum().backward()
    return out, [p.grad for p in params]  # type: ignore[misc]


def _train_step(backend: object, args: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    for a in args[1:]:
        a.grad = None
    compiled = backend(_captured(), list(args))  # type: ignore[operator]
    (out,) = compiled(*args)
    out.sum().backward()
    return out, [a.grad for a in args[1:]]  # type: ignore[misc]


def test_recompile_hits_and_matches_eager() -> None:
    backend = make_inductor()
    args = _args()
    _train_step(backend, args)
    assert cache.stats().misses == 1
    out, grads = _train_step(backend, args)
    assert cache.stats().hits == 1
    expected, expected_grads = _eager(args)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_other_options_miss() -> None:
    args = _args()
    _train_step(make_inductor(), args)
    _train_step(make_inductor(options={"fusion": False}), args)
    assert cache.stats().hits == 0 and cache.stats().misses == 2
    _train_step(make_inductor(options={"fusion": False}), args)
    assert cache.stats().hits == 1
    with config.patch(simd=False):
        out, grads = _train_step(make_inductor(), args)
    assert cache.stats().misses == 3
    expected, expected_grads = _eager(args)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_compiler_equality_follows_option_values() -> None:
    assert InductorCompiler({"fusion": False}) == InductorCompiler({"fusion": False})
    assert InductorCompiler({"fusion": False}) != InductorCompiler({})
    with config.patch(threads=1):
        one = InductorCompiler({}).cache_key()
    assert one != InductorCompiler({"threads": 2}).cache_key()


def test_options_patched_around_the_backend_call_reach_codegen() -> None:
    """Compiles happen on the first call, after the backend returned: options patched while
    the backend ran (as `compiler.compile(options=...)` does) still apply to them."""
    from inductor import pipeline
    from inductor.backend import inductor

    seen: list[bool] = []
    original = pipeline.plan

    def recording_plan(gm: fx.GraphModule, example_inputs: object) -> pipeline.Planned:
        seen.append(config.options.fusion)
        return original(gm, example_inputs)  # type: ignore[arg-type]

    pipeline.plan = recording_plan  # type: ignore[assignment]
    try:
        pipeline.clear_plan_cache()
        args = [a.detach() for a in _args()]
        with config.patch(fusion=False):
            compiled = inductor(_captured(), args)
        (out,) = compiled(*args)
    finally:
        pipeline.plan = original
        pipeline.clear_plan_cache()
    assert seen == [False]
    torch.testing.assert_close(out, _eager(_args())[0].detach(), atol=1e-4, rtol=1e-4)
