"""aot_function / aot_module / make_backend / aot_eager: the runtime wrapper against eager,
compile caching, the compilers' view of the graphs, saved-bytes counting, registration."""

from __future__ import annotations

import importlib.metadata
import operator
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import aotgrad
import pytest
import torch
from _aotgrad_checks import assert_no_mutable_ops
from aotgrad.backend import run_graph_as_is
from torch import fx


class RecordingCompiler:
    """An ATen-graph compiler that checks what it receives and runs the graph as is."""

    def __init__(self) -> None:
        self.graphs: list[fx.GraphModule] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._subclasses.fake_tensor import FakeTensor

        assert_no_mutable_ops(gm)
        for node in gm.graph.nodes:
            assert "example_value" in node.meta, node.format_node()
            if node.op == "call_function":
                assert isinstance(node.target, torch._ops.OpOverload) or (
                    node.target is operator.getitem), node.format_node()
        assert all(isinstance(x, FakeTensor) for x in example_inputs)
        self.graphs.append(gm)
        return gm.forward


def _grads(tensors: list[torch.Tensor]) -> list[torch.Tensor | None]:
    return [t.grad for t in tensors]


def test_training_matches_eager_and_compiles_once() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> Any:
        h = torch.tanh(x @ w)
        return h.sum(), h.detach().max()

    fw, bw = RecordingCompiler(), RecordingCompiler()
    compiled = aotgrad.aot_function(fn, fw, bw, partition_fn="default")
    for _ in range(3):
        x = torch.randn(4, 3)
        w1 = torch.randn(3, 2, requires_grad=True)
        w2 = w1.detach().clone().requires_grad_(True)
        got = compiled(x, w1)
        want = fn(x, w2)
        torch.testing.assert_close(got, want)
        assert not got[1].requires_grad
        got[0].backward()
        want[0].backward()
        torch.testing.assert_close(w1.grad, w2.grad)
    assert len(fw.graphs) == 1 and len(bw.graphs) == 1
    assert compiled.saved_bytes.calls == 3 and compiled.saved_bytes.last > 0


def test_inference_path_runs_the_forward_alone() -> None:
    fw, bw = RecordingCompiler(), RecordingCompiler()
    compiled = aotgrad.aot_function(lambda x: (x.sin() * 2,), fw, bw)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        (out,) = compiled(x)
    torch.testing.assert_close(out, x.detach().sin() * 2)
    assert not out.requires_grad
    compiled(torch.randn(3))
    assert len(fw.graphs) == 1 and bw.graphs == []  # one signature: inference
    compiled(x)
    assert len(fw.graphs) == 2 and len(bw.graphs) == 0  # training: backward compiled lazily
    assert compiled.saved_bytes.calls == 1


def test_input_mutation_is_copied_back_and_views_alias_inputs() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        x.mul_(2)
        return x.view(-1), y * x

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    x = torch.randn(2, 3)
    x_ref = x.clone()
    y = torch.randn(2, 3, requires_grad=True)
    y_ref = y.detach().clone().requires_grad_(True)
    flat, prod = compiled(x, y)
    _, prod_ref = fn(x_ref, y_ref)
    torch.testing.assert_close(x, x_ref)
    assert flat.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(prod, prod_ref)
    prod.sum().backward()
    prod_ref.sum().backward()
    torch.testing.assert_close(y.grad, y_ref.grad)


def test_views_of_inputs_get_gradients_through_autograd() -> None:
    def fn(x: torch.Tensor) -> Any:
        return x.t(), x * 3

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    x = torch.randn(2, 3, requires_grad=True)
    a, b = compiled(x)
    (a.sum() * 2 + b.sum()).backward()
    torch.testing.assert_close(x.grad, torch.full((2, 3), 5.0))


def test_no_grad_region_and_custom_function_keep_meaning() -> None:
    class Straight(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return torch.round(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return grad * 7

    def fn(x: torch.Tensor) -> Any:
        with torch.no_grad():
            scale = x * 2
        return (Straight.apply(x) * scale).sum(),

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    x1 = torch.randn(4, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    compiled(x1)[0].backward()
    fn(x2)[0].backward()
    torch.testing.assert_close(x1.grad, x2.grad)


def test_none_and_unused_gradients() -> None:
    def fn(x: torch.Tensor, unused: torch.Tensor, k: torch.Tensor) -> Any:
        return (x * k).sum(), k.argmax()

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    x = torch.randn(3, requires_grad=True)
    unused = torch.randn(3, requires_grad=True)
    k = torch.randn(3)
    loss, index = compiled(x, unused, k)
    assert index.dtype == torch.int64 and not index.requires_grad
    loss.backward()
    torch.testing.assert_close(x.grad, k)
    assert unused.grad is None


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_partitioners_give_eager_gradients(partitioner: str) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
        return (torch.nn.functional.gelu(x @ w + b) * x.sum(1, keepdim=True)).mean(),

    compiled = aotgrad.aot_function(fn, run_graph_as_is, partition_fn=partitioner)
    args = [torch.randn(5, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True),
            torch.randn(4, requires_grad=True)]
    refs = [a.detach().clone().requires_grad_(True) for a in args]
    compiled(*args)[0].backward()
    fn(*refs)[0].backward()
    for a, r in zip(args, refs):
        torch.testing.assert_close(a.grad, r.grad)


def test_pytree_arguments_and_outputs() -> None:
    def fn(inputs: dict[str, torch.Tensor], scale: float) -> Any:
        return {"sum": inputs["a"] + inputs["b"] * scale, "n": 3}

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    a, b = torch.randn(2), torch.randn(2)
    got = compiled({"a": a, "b": b}, 2.0)
    assert got["n"] == 3
    torch.testing.assert_close(got["sum"], a + b * 2.0)


def test_make_backend_lifts_parameters_and_updates_buffers() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    reference.load_state_dict(model.state_dict())
    gm = fx.symbolic_trace(model)
    fw, bw = RecordingCompiler(), RecordingCompiler()
    compiled = aotgrad.make_backend(fw, bw)(gm, [torch.randn(5, 3)])
    x = torch.randn(5, 3)
    out = compiled(x)
    want = reference(x)
    torch.testing.assert_close(out, want)
    out.pow(2).sum().backward()
    want.pow(2).sum().backward()
    for (name, p), q in zip(gm.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for (name, b), c in zip(gm.named_buffers(), reference.buffers()):
        torch.testing.assert_close(b, c, msg=name)
    assert len(fw.graphs) == 1


def test_aot_eager_entry_point_is_registered() -> None:
    entries = importlib.metadata.entry_points(group="capture.backends")
    (entry,) = [e for e in entries if e.name == "aot_eager"]
    assert entry.value == "aotgrad.backend:aot_eager"
    assert entry.load() is aotgrad.aot_eager


def test_aotgrad_does_not_import_capture() -> None:
    code = "import sys, aotgrad; print('capture' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_config_patch_and_options() -> None:
    assert aotgrad.config.options.partitioner in ("default", "min_cut", "memory_budget")
    with aotgrad.config.patch(partitioner="default", activation_memory_budget=0.5) as cfg:
        assert aotgrad.config.options is cfg
        assert cfg.partition_config().activation_memory_budget == 0.5
    assert "partitioner" in aotgrad.config.list_options()
    with pytest.raises(ValueError):
        aotgrad.config.AotgradConfig(partitioner="nope")


def test_closure_tensors_are_inputs_with_gradients() -> None:
    weight = torch.randn(3, requires_grad=True)
    options = {"weight": weight}

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * options["weight"]).sum()

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    x = torch.randn(3)
    compiled(x).backward()
    torch.testing.assert_close(weight.grad, x)
    options["weight"] = torch.ones(3)  # read anew on every call
    torch.testing.assert_close(compiled(x), x.sum())


def test_aliased_inputs_of_a_mutating_graph_run_like_eager() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return y * 2

    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    base = torch.zeros(3)
    torch.testing.assert_close(compiled(base, torch.zeros(3)), torch.zeros(3))
    torch.testing.assert_close(compiled(base, base), torch.full((3,), 4.0))  # y sees x's write
    torch.testing.assert_close(base, torch.full((3,), 2.0))
