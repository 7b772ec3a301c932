"""Cases: the backend contract `backend(gm, example_inputs) -> callable`, the registry, and a
backend that raises."""

from __future__ import annotations

import warnings

import capture
import pytest
import torch
from _differential import CountingBackend, assert_same, config_patch, t


def fn(x, y):
    return (x @ y).relu() + 1, x.sum()


def test_custom_backend_receives_graph_module_and_real_inputs():
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(fn, backend=backend, fullgraph=True)
    x, y = t(2, 3), t(3, 4, seed=1)
    assert_same(compiled(x, y), fn(x, y))
    gm, inputs = backend.graphs[0], backend.example_inputs[0]
    assert isinstance(gm, torch.fx.GraphModule)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(inputs) == 2
    assert all(type(v) is torch.Tensor for v in inputs), [type(v) for v in inputs]
    assert [tuple(v.shape) for v in inputs] == [(2, 3), (3, 4)]
    out = gm(*inputs)
    assert isinstance(out, tuple)


def test_callable_returned_by_backend_is_what_runs():
    seen = []

    def backend(gm, example_inputs):
        def run(*args):
            seen.append(len(args))
            return gm(*args)

        return run

    capture.reset()
    compiled = capture.optimize(fn, backend=backend, fullgraph=True)
    for _ in range(3):
        compiled(t(2, 3), t(3, 4))
    assert seen == [2, 2, 2]


def test_backend_can_replace_the_computation():
    def negate_everything(gm, example_inputs):
        def run(*args):
            return tuple(-v if isinstance(v, torch.Tensor) else v for v in gm(*args))

        return run

    capture.reset()
    compiled = capture.optimize(lambda x: x + 1, backend=negate_everything, fullgraph=True)
    assert_same(compiled(torch.ones(2)), -torch.full((2,), 2.0))


def _exploding_backend(gm, example_inputs):
    raise RuntimeError("kaboom in backend")


def test_raising_backend_error_names_the_backend():
    capture.reset()
    compiled = capture.optimize(fn, backend=_exploding_backend, fullgraph=True)
    with pytest.raises(capture.BackendCompilerFailed) as info:
        compiled(t(2, 3), t(3, 4))
    message = str(info.value)
    assert "_exploding_backend" in message
    assert "kaboom" in message


def test_raising_backend_with_suppress_errors_falls_back_to_eager():
    capture.reset()
    compiled = capture.optimize(fn, backend=_exploding_backend, fullgraph=False)
    with config_patch(suppress_errors=True), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        x, y = t(2, 3), t(3, 4)
        assert_same(compiled(x, y), fn(x, y))


def test_eager_backend_by_name():
    capture.reset()
    compiled = capture.optimize(fn, backend="eager", fullgraph=True)
    x, y = t(2, 3), t(3, 4)
    assert_same(compiled(x, y), fn(x, y))


def test_registry_list_lookup_register():
    assert "eager" in capture.list_backends()
    assert callable(capture.lookup_backend("eager"))
    backend = CountingBackend()
    capture.register_backend("corpus_counting_backend", backend)
    assert "corpus_counting_backend" in capture.list_backends()
    capture.reset()
    compiled = capture.optimize(fn, backend="corpus_counting_backend", fullgraph=True)
    compiled(t(2, 3), t(3, 4))
    assert backend.frame_count == 1


def test_unknown_backend_name_is_an_error():
    capture.reset()
    with pytest.raises(Exception) as info:
        compiled = capture.optimize(fn, backend="eagre", fullgraph=True)
        compiled(t(2, 3), t(3, 4))
    assert "eager" in str(info.value)


@pytest.mark.parametrize("target", [torch.sign, torch.add, torch.ops.aten.cos.default,
                                    torch.ops.aten.cos],
                         ids=["sign", "add", "aten.cos.default", "aten.cos"])
def test_functions_written_in_c_compile_as_their_call(target):
    """`torch.sign`, an ATen op: no bytecode of their own; as torch.compile does, the call
    is captured (one graph, fullgraph), not refused or run eagerly."""
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(target, backend=backend, fullgraph=True)
    x = t(3, 4)
    args = (x, x) if target is torch.add else (x,)
    assert_same(compiled(*args), target(*args))
    assert len(backend.graphs) == 1
