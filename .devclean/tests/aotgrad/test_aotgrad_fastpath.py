"""The runtime wrapper's hot path (flat arguments, per-signature precomputation): calls that
change grad mode, requires_grad, metadata or aliasing between calls get the right compiled
graphs and eager's results; saved-bytes accounting matches the saved tensors."""

from __future__ import annotations

from typing import Any

import aotgrad
import torch
from aotgrad.backend import run_graph_as_is
from torch import fx


def _count(graphs: list[fx.GraphModule]) -> Any:
    def compiler(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return run_graph_as_is(gm, example_inputs)

    return compiler


def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w).relu()


def test_grad_mode_and_requires_grad_switches_between_calls() -> None:
    graphs: list[fx.GraphModule] = []
    compiled = aotgrad.aot_function(fn, _count(graphs))
    x = torch.randn(3, 4)
    w = torch.randn(4, 5, requires_grad=True)
    for step in range(3):
        with torch.no_grad():
            out = compiled(x, w)
        assert not out.requires_grad
        torch.testing.assert_close(out, fn(x, w).detach())
        out = compiled(x, w)
        assert out.requires_grad
        (grad,) = torch.autograd.grad(out.sum(), [w])
        (want,) = torch.autograd.grad(fn(x, w).sum(), [w])
        torch.testing.assert_close(grad, want)
        out = compiled(x, w.detach())  # grad mode on, nothing requires grad: inference
        assert not out.requires_grad
    # NOTE: one inference graph and one training forward and backward, whatever the path.
    assert len(compiled.cache) == 2
    assert len(graphs) == 3


def test_metadata_changes_recompile() -> None:
    compiled = aotgrad.aot_function(fn, run_graph_as_is)
    w = torch.randn(4, 5)
    for x in [torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(2, 4),
              torch.randn(10, 4)[5:8], torch.randn(3, 4, dtype=torch.float64)]:
        wx = w.to(x.dtype)
        torch.testing.assert_close(compiled(x, wx), fn(x, wx))
    param = torch.nn.Parameter(torch.randn(4, 5))
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x, param), fn(x, param))
    param.data = torch.randn(4, 7)  # same object, new metadata
    torch.testing.assert_close(compiled(x, param), fn(x, param))


def test_numbers_are_part_of_the_signature() -> None:
    compiled = aotgrad.aot_function(lambda x, s: x * s, run_graph_as_is)
    x = torch.randn(3)
    for s in [2, 3, 2.5, True, 2]:
        torch.testing.assert_close(compiled(x, s), x * s)


def test_mutation_and_aliased_outputs_on_repeated_calls() -> None:
    def mutate(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x.add_(y)
        return x.view(-1), y * 2

    compiled = aotgrad.aot_function(mutate, run_graph_as_is)
    for _ in range(3):
        x, y = torch.randn(2, 3), torch.randn(2, 3)
        x2, y2 = x.clone(), y.clone()
        view, doubled = compiled(x, y)
        want_view, want_doubled = mutate(x2, y2)
        torch.testing.assert_close(x, x2)
        torch.testing.assert_close(view, want_view)
        torch.testing.assert_close(doubled, want_doubled)
        view.zero_()  # the output is a view of the input again
        assert x.abs().sum() == 0
    base = torch.randn(2, 3)
    base2 = base.clone()
    compiled(base, base)  # aliased inputs: runs like eager
    mutate(base2, base2)
    torch.testing.assert_close(base, base2)


def test_saved_bytes_match_saved_tensors() -> None:
    saved: list[int] = []

    def keep_bw(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        forward = run_graph_as_is(gm, example_inputs)

        def run(*args: Any) -> Any:
            tangents = sum(1 for n in gm.graph.nodes
                           if n.op == "placeholder" and n.name.startswith("tangents"))
            saved.append(sum(a.numel() * a.element_size()
                             for a in args[:len(args) - tangents]))
            return forward(*args)

        return run

    compiled = aotgrad.aot_function(fn, run_graph_as_is, keep_bw, partition_fn="default")
    x = torch.randn(3, 4)
    w = torch.randn(4, 5, requires_grad=True)
    for _ in range(2):
        compiled(x, w).sum().backward()
    assert saved and compiled.saved_bytes.last == saved[-1]
    assert compiled.saved_bytes.calls == 2
    assert compiled.saved_bytes.total == sum(saved)
