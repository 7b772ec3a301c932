"""The shared compiled-graph cache (`aotgrad.cache`): a captured graph compiled again reuses
the first compile, gives eager's results, and any change of a key component misses."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from typing import Any

import aotgrad
import pytest
import torch
from aotgrad import cache
from torch import fx


class CountingCompiler:
    """An ATen-graph compiler that runs graphs as they are and counts its compiles."""

    def __init__(self, option: int = 0) -> None:
        self.calls = 0
        self.option = option

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.calls += 1
        return gm.forward

    def cache_key(self) -> tuple[int]:
        return (self.option,)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _graph(fn: Callable[..., Any], n: int) -> fx.GraphModule:
    """A torch-level GraphModule of `fn` over `n` tensor placeholders (what capture gives)."""
    graph = fx.Graph()
    xs = [graph.placeholder(f"x{i}") for i in range(n)]
    graph.output((fn(graph, *xs),))
    return fx.GraphModule(torch.nn.Module(), graph, "CapturedGraph")


def _mlp_graph(graph: fx.Graph, x: fx.Node, w: fx.Node, b: fx.Node) -> fx.Node:
    h = graph.call_function(torch._C._nn.linear, (x, w, b))
    h = graph.call_function(torch.nn.functional.gelu, (h,), {"approximate": "none"})
    return graph.call_function(operator.mul, (h, 2.0))


def _eager_mlp(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(torch._C._nn.linear(x, w, b)) * 2.0


def _inputs(requires_grad: bool = True) -> list[torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    w = torch.randn(32, 16, requires_grad=requires_grad)
    b = torch.randn(32, requires_grad=requires_grad)
    return [x, w, b]


def _run(backend: Any, gm: fx.GraphModule, args: list[torch.Tensor]) -> Any:
    return backend(gm, list(args))(*args)


def test_recompile_of_same_graph_hits_and_matches_eager() -> None:
    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler, compiler, partition_fn="min_cut")
    args = _inputs()
    (first,) = _run(backend, _graph(_mlp_graph, 3), args)
    first.sum().backward()
    assert compiler.calls == 2 and cache.stats().misses == 1
    grads_first = [args[1].grad.clone(), args[2].grad.clone()]  # type: ignore[union-attr]
    for a in args[1:]:
        a.grad = None
    # NOTE: a new GraphModule object for the same program, as after capture.reset().
    (second,) = _run(backend, _graph(_mlp_graph, 3), args)
    second.sum().backward()
    assert cache.stats().hits == 1
    assert compiler.calls == 2  # nothing traced or compiled again (backward shared too)
    x, w, b = (a.detach().requires_grad_(a.requires_grad) for a in args)
    expected = _eager_mlp(x, w, b)
    expected.sum().backward()
    torch.testing.assert_close(second, expected)
    torch.testing.assert_close(args[1].grad, w.grad)
    torch.testing.assert_close(args[2].grad, b.grad)
    torch.testing.assert_close(grads_first[0], w.grad)


def test_inference_recompile_hits() -> None:
    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler)
    args = _inputs(requires_grad=False)
    _run(backend, _graph(_mlp_graph, 3), args)
    (out,) = _run(backend, _graph(_mlp_graph, 3), args)
    assert compiler.calls == 1 and cache.stats().hits == 1
    torch.testing.assert_close(out, _eager_mlp(*args))


def test_saved_bytes_are_counted_per_compiled_callable() -> None:
    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler, compiler)
    args = _inputs()
    first = backend(_graph(_mlp_graph, 3), list(args))
    second = backend(_graph(_mlp_graph, 3), list(args))
    first(*args)
    second(*args)
    second(*args)
    assert cache.stats().hits == 1
    assert first.saved_bytes.calls == 1 and second.saved_bytes.calls == 2  # type: ignore[attr-defined]


def _variants() -> dict[str, Callable[[Any], Any]]:
    """Each changes one component of the key; the call returns the output (or raises)."""

    def shape(backend: Any) -> Any:
        _, w, b = _inputs()
        return _run(backend, _graph(_mlp_graph, 3), [torch.randn(4, 16), w, b])

    def dtype(backend: Any) -> Any:
        x, w, b = _inputs()
        return _run(backend, _graph(_mlp_graph, 3), [x.double(), w.double(), b.double()])

    def stride(backend: Any) -> Any:
        _, w, b = _inputs()
        return _run(backend, _graph(_mlp_graph, 3), [torch.randn(16, 8).t(), w, b])

    def requires_grad(backend: Any) -> Any:
        return _run(backend, _graph(_mlp_graph, 3), _inputs(requires_grad=False))

    def grad_mode(backend: Any) -> Any:
        with torch.no_grad():
            return _run(backend, _graph(_mlp_graph, 3), _inputs())

    def constant(backend: Any) -> Any:
        def fn(graph: fx.Graph, x: fx.Node, w: fx.Node, b: fx.Node) -> fx.Node:
            h = graph.call_function(torch._C._nn.linear, (x, w, b))
            h = graph.call_function(torch.nn.functional.gelu, (h,), {"approximate": "none"})
            return graph.call_function(operator.mul, (h, 3.0))

        return _run(backend, _graph(fn, 3), _inputs())

    def keyword(backend: Any) -> Any:
        def fn(graph: fx.Graph, x: fx.Node, w: fx.Node, b: fx.Node) -> fx.Node:
            h = graph.call_function(torch._C._nn.linear, (x, w, b))
            h = graph.call_function(torch.nn.functional.gelu, (h,), {"approximate": "tanh"})
            return graph.call_function(operator.mul, (h, 2.0))

        return _run(backend, _graph(fn, 3), _inputs())

    def target(backend: Any) -> Any:
        def fn(graph: fx.Graph, x: fx.Node, w: fx.Node, b: fx.Node) -> fx.Node:
            h = graph.call_function(torch._C._nn.linear, (x, w, b))
            h = graph.call_function(torch.nn.functional.silu, (h,))
            return graph.call_function(operator.mul, (h, 2.0))

        return _run(backend, _graph(fn, 3), _inputs())

    def default_dtype(backend: Any) -> Any:
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return _run(backend, _graph(_mlp_graph, 3), _inputs())
        finally:
            torch.set_default_dtype(previous)

    def aotgrad_option(backend: Any) -> Any:
        with aotgrad.config.patch(decompositions="none"):
            return _run(backend, _graph(_mlp_graph, 3), _inputs())

    def train_flag(backend: Any) -> Any:
        return _run(backend, _graph(_mlp_graph, 3).eval(), _inputs())

    def storage_offset(backend: Any) -> Any:
        _, w, b = _inputs()
        return _run(backend, _graph(_mlp_graph, 3), [torch.randn(8 * 16 + 1)[1:].view(8, 16),
                                                     w, b])

    return {f.__name__: f for f in (shape, dtype, stride, requires_grad, grad_mode, constant,
                                   keyword, target, default_dtype, aotgrad_option,
                                   train_flag, storage_offset)}


@pytest.mark.parametrize("variant", sorted(_variants()))
def test_changing_a_key_component_misses(variant: str) -> None:
    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler, compiler)
    _run(backend, _graph(_mlp_graph, 3), _inputs())
    assert cache.stats().misses == 1
    out = _variants()[variant](backend)
    assert cache.stats().hits == 0 and cache.stats().misses == 2
    assert isinstance(out[0], torch.Tensor)


def test_compiler_options_partitioner_and_decompositions_are_keys() -> None:
    args = _inputs()
    compiler = CountingCompiler()
    aotgrad_backend = aotgrad.make_backend(compiler, compiler, partition_fn="min_cut")
    _run(aotgrad_backend, _graph(_mlp_graph, 3), args)
    other_option = CountingCompiler(option=1)
    _run(aotgrad.make_backend(other_option, other_option, partition_fn="min_cut"),
         _graph(_mlp_graph, 3), args)
    _run(aotgrad.make_backend(compiler, compiler, partition_fn="default"),
         _graph(_mlp_graph, 3), args)
    _run(aotgrad.make_backend(compiler, compiler, partition_fn="min_cut",
                              decompositions="none"), _graph(_mlp_graph, 3), args)
    assert cache.stats().hits == 0 and cache.stats().misses == 4
    _run(aotgrad.make_backend(compiler, compiler, partition_fn="min_cut"),
         _graph(_mlp_graph, 3), args)
    assert cache.stats().hits == 1


def test_tensor_attribute_constant_is_keyed_by_value() -> None:
    def make(value: float) -> fx.GraphModule:
        graph = fx.Graph()
        x = graph.placeholder("x")
        scale = graph.get_attr("const")
        graph.output((graph.call_function(operator.mul, (x, scale)),))
        gm = fx.GraphModule({"const": torch.zeros(32)}, graph, "CapturedGraph")
        # NOTE: a plain tensor attribute (not a buffer, which would be an input): a constant
        # of the traced graph.
        del gm._buffers["const"]
        gm.const = torch.full((32,), value)
        assert "const" not in dict(gm.named_buffers())
        return gm

    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler)
    x = torch.randn(4, 32)
    (two,) = _run(backend, make(2.0), [x])
    (three,) = _run(backend, make(3.0), [x])
    (again,) = _run(backend, make(3.0), [x])
    assert cache.stats().misses == 2 and cache.stats().hits == 1
    torch.testing.assert_close(two, x * 2.0)
    torch.testing.assert_close(three, x * 3.0)
    torch.testing.assert_close(again, x * 3.0)


def test_parameters_are_inputs_not_constants() -> None:
    """A GraphModule's own parameters are lifted to inputs: new values, same compile."""

    def make(weight: torch.Tensor) -> fx.GraphModule:
        root = torch.nn.Module()
        root.weight = torch.nn.Parameter(weight)
        graph = fx.Graph()
        x = graph.placeholder("x")
        w = graph.get_attr("weight")
        graph.output((graph.call_function(torch.matmul, (x, w)),))
        return fx.GraphModule(root, graph, "CapturedGraph")

    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler, compiler)
    x = torch.randn(4, 8)
    w1, w2 = torch.randn(8, 8), torch.randn(8, 8)
    gm1, gm2 = make(w1), make(w2)
    (first,) = backend(gm1, [x])(x)
    (second,) = backend(gm2, [x])(x)
    assert cache.stats().hits == 1
    torch.testing.assert_close(first, x @ w1)
    torch.testing.assert_close(second, x @ w2)
    second.sum().backward()
    assert gm2.weight.grad is not None and gm1.weight.grad is None
    torch.testing.assert_close(gm2.weight.grad, x.t() @ torch.ones(4, 8))


def test_user_function_targets_and_stateful_compilers_are_not_cached() -> None:
    scale = [2.0]

    def user_fn(x: torch.Tensor) -> torch.Tensor:
        return x * scale[0]  # NOTE: reads state that may change between compiles

    def fn(graph: fx.Graph, x: fx.Node) -> fx.Node:
        return graph.call_function(user_fn, (x,))

    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler)
    x = torch.randn(4)
    (first,) = _run(backend, _graph(fn, 1), [x])
    scale[0] = 3.0
    (second,) = _run(backend, _graph(fn, 1), [x])
    torch.testing.assert_close(first, x * 2.0)
    torch.testing.assert_close(second, x * 3.0)
    assert cache.stats().hits == 0 and cache.stats().uncacheable == 2

    calls: list[int] = []

    def no_key(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        calls.append(1)
        return gm.forward

    keyless = aotgrad.make_backend(no_key)
    _run(keyless, _graph(_mlp_graph, 3), _inputs(False))
    _run(keyless, _graph(_mlp_graph, 3), _inputs(False))
    assert len(calls) == 2 and cache.stats().hits == 0


def test_wrapped_torch_function_with_user_state_is_not_cached() -> None:
    scale = [2.0]

    @functools.wraps(torch.relu)
    def relu_like(x: torch.Tensor) -> torch.Tensor:  # NOTE: __module__ 'torch', user state
        return torch.relu(x) * scale[0]

    def fn(graph: fx.Graph, x: fx.Node) -> fx.Node:
        return graph.call_function(relu_like, (x,))

    backend = aotgrad.make_backend(CountingCompiler())
    x = torch.randn(4)
    (first,) = _run(backend, _graph(fn, 1), [x])
    scale[0] = 3.0
    (second,) = _run(backend, _graph(fn, 1), [x])
    torch.testing.assert_close(first, x.relu() * 2.0)
    torch.testing.assert_close(second, x.relu() * 3.0)
    assert cache.stats().hits == 0 and cache.stats().uncacheable == 2


def test_cache_can_be_turned_off() -> None:
    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler)
    with aotgrad.config.patch(graph_cache=False):
        _run(backend, _graph(_mlp_graph, 3), _inputs(False))
        _run(backend, _graph(_mlp_graph, 3), _inputs(False))
    assert compiler.calls == 2 and cache.stats().hits == 0


def test_aliased_inputs_are_part_of_the_key() -> None:
    def fn(graph: fx.Graph, x: fx.Node, y: fx.Node) -> fx.Node:
        return graph.call_function(operator.add, (x, y))

    compiler = CountingCompiler()
    backend = aotgrad.make_backend(compiler)
    base = torch.randn(8)
    _run(backend, _graph(fn, 2), [base, torch.randn(8)])
    (out,) = _run(backend, _graph(fn, 2), [base, base])
    assert cache.stats().hits == 0
    torch.testing.assert_close(out, base * 2)


def test_aot_eager_graphs_are_shared() -> None:
    args = _inputs()
    (first,) = _run(aotgrad.aot_eager, _graph(_mlp_graph, 3), args)
    (second,) = _run(aotgrad.aot_eager, _graph(_mlp_graph, 3), args)
    assert cache.stats().hits == 1
    torch.testing.assert_close(first, second)


def test_plain_functions_and_modules_are_not_cached() -> None:
    compiler = CountingCompiler()
    f1 = aotgrad.aot_function(_eager_mlp, compiler)
    f2 = aotgrad.aot_function(_eager_mlp, compiler)
    args = _inputs(False)
    f1(*args)
    f2(*args)
    assert compiler.calls == 2 and cache.stats().hits == 0
