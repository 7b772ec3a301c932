"""aotgrad with symbolic sizes (aot_eager backend): a captured graph whose sizes capture made
symbolic is traced, functionalized and partitioned once; symbolic sizes saved by the forward
reach the backward; the runner's cache is keyed by the symbolic signature. Results and
gradients equal eager's; compile counts against torch.compile in the same run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import aotgrad.api
import compiler
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "capture"))
from test_dynamic_shapes import Attention, Counting, TorchCounting, mlp


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts aotgrad's traces (each one a trace, functionalization and, when training,
    a partition)."""
    counts = {"n": 0}
    original = aotgrad.api.AotCompiled._compile_runner

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(aotgrad.api.AotCompiled, "_compile_runner", counted)
    return counts


def _train_step(fn: Any, model: torch.nn.Module, x: torch.Tensor) -> tuple[Any, ...]:
    model.zero_grad()
    x = x.detach().requires_grad_(True)
    out = fn(x)
    out.square().sum().backward()
    return (out.detach(), x.grad, *[p.grad.clone() for p in model.parameters()])


CASES = [
    ("mlp", mlp, lambda n: torch.randn(n, 12), [3, 5, 8, 10, 13, 16, 21, 32]),
    ("attention", Attention, lambda n: torch.randn(2, n, 16), [5, 7, 9, 12, 16, 20, 31, 64]),
]


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize(("name", "make", "inputs", "sizes"), CASES, ids=[c[0] for c in CASES])
def test_symbolic_graph_traced_once(name: str, make: Any, inputs: Any, sizes: list[int],
                                    training: bool, traces: dict[str, int]) -> None:
    compiler.reset()
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = make()
    ours, theirs = Counting("aot_eager"), TorchCounting()
    mine = compiler.compile(model, backend=ours)
    torch_model = torch.compile(model, backend=theirs)
    for n in sizes:
        x = inputs(n)
        if training:
            expected = _train_step(model, model, x)
            for got in (_train_step(mine, model, x), _train_step(torch_model, model, x)):
                for a, b in zip(got, expected):
                    torch.testing.assert_close(a, b)
        else:
            with torch.no_grad():
                expected = model(x)
                torch.testing.assert_close(mine(x), expected)
                torch.testing.assert_close(torch_model(x), expected)
    print(f"COMPILES {name} aot_eager training={training}: ours {ours.count} "
          f"(aotgrad traces {traces['n']}), torch.compile {theirs.count}")
    assert ours.count == 2 and ours.count <= theirs.count
    # one static trace, one symbolic trace serving the 7 other sizes
    assert traces["n"] == 2


def test_runner_cache_is_keyed_by_the_symbolic_signature(traces: dict[str, int]) -> None:
    compiler.reset()
    model = mlp()
    made: list[Any] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        out = compiler.lookup_backend("aot_eager")(gm, example_inputs)
        made.append(out)
        return out

    fn = compiler.compile(model, backend=keep)
    with torch.no_grad():
        for n in (4, 9, 17):
            x = torch.randn(n, 12)
            compiler.mark_dynamic(x, 0)
            torch.testing.assert_close(fn(x), model(x))
    assert len(made) == 1 and traces["n"] == 1
    keys = list(made[0].compiled.cache)
    assert len(keys) == 1
    tensor_part = next(p for p in keys[0] if isinstance(p, tuple) and p[:1] == ("symbolic",))
    assert tensor_part[3] == (None, 12)  # the batch size left out, the features kept


def test_relation_the_aten_trace_relies_on_is_guarded() -> None:
    """A size the ATen graph needs as a number (here `repeat_interleave` output size is
    fine, `narrow` by a size expression) still gives eager's results for every size."""
    compiler.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[0] // 2
        return x.narrow(0, 0, half) * 2 + x.narrow(0, half, half)

    fn = compiler.compile(f, backend="aot_eager")
    for n in (4, 6, 8, 10, 12):
        x = torch.randn(n, 3)
        torch.testing.assert_close(fn(x), f(x))


def test_int_argument_with_aot_eager() -> None:
    compiler.reset()

    def f(x: torch.Tensor, k: int) -> torch.Tensor:
        return (x * k).sum() + k

    fn = compiler.compile(f, backend="aot_eager")
    x = torch.randn(5, requires_grad=True)
    for k in (2, 3, 4, 5):
        out = fn(x, k)
        (grad,) = torch.autograd.grad(out, x)
        torch.testing.assert_close(out, f(x, k))
        torch.testing.assert_close(grad, torch.full((5,), float(k)))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_output_without_gradient_in_a_dynamic_graph(backend: str) -> None:
    """Only the loss gets a gradient; the other differentiable output (the logits, of the
    call's size) stands in as zeros of the size it has in this call, not the symbolic size
    it was traced with (transformers' classification models with `labels`: the third call,
    after the sizes turned dynamic, raised in the backward)."""
    compiler.reset()
    lin = torch.nn.Linear(8, 3)

    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = lin(x).relu()
        return torch.nn.functional.cross_entropy(logits, y), logits

    fn = compiler.compile(f, backend=backend)
    for n in (4, 4, 6, 7):
        x, y = torch.randn(n, 8), torch.randint(0, 3, (n,))
        lin.zero_grad()
        loss, logits = fn(x, y)
        loss.backward()
        got = [p.grad.clone() for p in lin.parameters()]  # type: ignore[union-attr]
        lin.zero_grad()
        want_loss, want_logits = f(x, y)
        want_loss.backward()
        torch.testing.assert_close((loss, logits), (want_loss, want_logits))
        torch.testing.assert_close(got, [p.grad for p in lin.parameters()])
    compiler.reset()
