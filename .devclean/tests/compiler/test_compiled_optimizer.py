"""Differential tests: a compiled `optimizer.step` (the "compiled optimizer") against eager.

SGD (momentum, weight decay), Adam and AdamW on the for-loop (`foreach=False`) and foreach
paths, through `compiler.compile` on each backend: parameters and optimizer state
(`step`, `exp_avg`, `exp_avg_sq`, `momentum_buffer`) after several steps equal an eager run
from the same seed, with the learning rate changed between steps, a parameter whose grad is
None skipped, and `zero_grad(set_to_none=True)` between steps. Graph counts are compared
with torch.compile's (the yardstick; tests may call it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import compiler
import pytest
import torch
from torch import nn

OPTIMIZERS = [
    pytest.param("SGD", {"momentum": 0.9}, id="sgd_momentum"),
    pytest.param("SGD", {"momentum": 0.9, "weight_decay": 0.1}, id="sgd_momentum_wd"),
    pytest.param("Adam", {"foreach": False}, id="adam_loop"),
    pytest.param("Adam", {"foreach": True}, id="adam_foreach"),
    pytest.param("AdamW", {"foreach": False}, id="adamw_loop"),
    pytest.param("AdamW", {"foreach": True}, id="adamw_foreach"),
    pytest.param("SGD", {"momentum": 0.9, "foreach": True}, id="sgd_foreach"),
]
BACKENDS = ["eager", "aot_eager", "inductor"]


def _model_and_optimizer(kind: str, options: dict[str, Any]) -> tuple[nn.Module, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = getattr(torch.optim, kind)(model.parameters(), lr=1e-2, **options)
    return model, optimizer


def _batch(step: int) -> torch.Tensor:
    return torch.randn(5, 8, generator=torch.Generator().manual_seed(100 + step))


def _train(kind: str, options: dict[str, Any], wrap: Callable[[Callable[[], Any]], Any],
           steps: int = 5) -> tuple[nn.Module, Any]:
    """`steps` steps: backward, (lr changed at step 2, the last bias without a grad at step
    3), the (maybe compiled) step, `zero_grad(set_to_none=True)`."""
    model, optimizer = _model_and_optimizer(kind, options)
    step_fn = wrap(optimizer.step)
    for step in range(steps):
        model(_batch(step)).pow(2).sum().backward()
        if step == 2:
            for group in optimizer.param_groups:
                group["lr"] = 3e-2
        if step == 3:
            model[2].bias.grad = None
        step_fn()
        optimizer.zero_grad(set_to_none=True)
    return model, optimizer


def _assert_same_state(model: nn.Module, optimizer: Any, e_model: nn.Module,
                       e_optimizer: Any) -> None:
    for (name, p), e_p in zip(model.named_parameters(), e_model.parameters(), strict=True):
        torch.testing.assert_close(p, e_p, rtol=1e-5, atol=1e-5, msg=f"parameter {name}")
        state, e_state = optimizer.state[p], e_optimizer.state[e_p]
        assert state.keys() == e_state.keys(), name
        for key, value in e_state.items():
            got = state[key]
            if isinstance(value, torch.Tensor):
                assert isinstance(got, torch.Tensor), (name, key)
                torch.testing.assert_close(got, value, rtol=1e-5, atol=1e-5,
                                           msg=f"state {key} of {name}")
            else:
                assert got == value, (name, key)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("kind", "options"), OPTIMIZERS)
def test_compiled_step_matches_eager(kind: str, options: dict[str, Any], backend: str) -> None:
    compiler.reset()
    e_model, e_optimizer = _train(kind, options, lambda fn: fn)
    model, optimizer = _train(kind, options, lambda fn: compiler.compile(fn, backend=backend))
    _assert_same_state(model, optimizer, e_model, e_optimizer)


@pytest.mark.parametrize(("kind", "options"), OPTIMIZERS)
def test_compiled_training_step_matches_eager(kind: str, options: dict[str, Any]) -> None:
    """A whole training step compiled (a graph break at backward is fine)."""
    compiler.reset()
    results = []
    for compiled in (False, True):
        model, optimizer = _model_and_optimizer(kind, options)

        def train_step(x: torch.Tensor, model: nn.Module = model,
                       optimizer: Any = optimizer) -> torch.Tensor:
            loss = model(x).pow(2).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss

        fn = compiler.compile(train_step, backend="aot_eager") if compiled else train_step
        losses = [fn(_batch(step)).detach() for step in range(4)]
        results.append((model, optimizer, losses))
    (e_model, e_optimizer, e_losses), (model, optimizer, losses) = results
    torch.testing.assert_close(losses, e_losses)
    _assert_same_state(model, optimizer, e_model, e_optimizer)


def _ours(optimizer: Any) -> tuple[int, int]:
    explanation = compiler.explain(optimizer.step)()
    return explanation.graph_count, explanation.graph_break_count


def _torchs(optimizer: Any) -> tuple[int, int]:
    import torch._dynamo

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(optimizer.step)()
    return explanation.graph_count, explanation.graph_break_count


@pytest.mark.parametrize(("kind", "options"), OPTIMIZERS)
def test_one_graph_per_step_like_torch_compile(kind: str, options: dict[str, Any]) -> None:
    compiler.reset()
    counts = []
    for count in (_ours, _torchs):
        model, optimizer = _model_and_optimizer(kind, options)
        model(_batch(0)).sum().backward()
        counts.append(count(optimizer))
    (graphs, breaks), (t_graphs, t_breaks) = counts
    assert (graphs, breaks) == (1, 0)
    assert graphs <= max(t_graphs, 1) and breaks <= t_breaks


def _compiles_per_step(kind: str, options: dict[str, Any],
                       compile_fn: Callable[..., Any]) -> list[int]:
    """Graphs compiled so far after each of 6 steps, then after an lr change."""
    compiled = [0]

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        compiled[0] += 1
        return gm.forward

    model, optimizer = _model_and_optimizer(kind, options)
    step_fn = compile_fn(optimizer.step, backend=backend)
    counts = []
    for step in range(6):
        model(_batch(step)).pow(2).sum().backward()
        step_fn()
        optimizer.zero_grad()
        counts.append(compiled[0])
    optimizer.param_groups[0]["lr"] = 0.5
    model(_batch(9)).pow(2).sum().backward()
    step_fn()
    counts.append(compiled[0])
    return counts


@pytest.mark.parametrize(("kind", "options"), OPTIMIZERS)
def test_steady_steps_hit_the_cache(kind: str, options: dict[str, Any]) -> None:
    """The first step (its state created) and the second (state read) compile; later steps
    hit the cache; a new lr recompiles (a guarded constant), as it does in torch.compile
    (which compiles once fewer for Adam/AdamW: it creates the state eagerly while tracing)."""
    import torch._dynamo

    compiler.reset()
    ours = _compiles_per_step(kind, options, compiler.compile)
    torch._dynamo.reset()
    torchs = _compiles_per_step(kind, options, torch.compile)
    assert ours == [1, 2, 2, 2, 2, 2, 3]
    assert ours[-1] - ours[-2] == torchs[-1] - torchs[-2] == 1
    assert ours[-2] <= torchs[-2] + 1


@pytest.mark.parametrize(("kind", "options"), [
    pytest.param("Adam", {"amsgrad": True}, id="adam_amsgrad"),
    pytest.param("SGD", {"momentum": 0.9, "nesterov": True}, id="sgd_nesterov"),
    pytest.param("SGD", {}, id="sgd_plain"),
    pytest.param("AdamW", {"maximize": True, "foreach": True}, id="adamw_maximize"),
    pytest.param("Adam", {"weight_decay": 0.1, "foreach": True}, id="adam_wd_foreach"),
    pytest.param("RMSprop", {}, id="rmsprop"),
    pytest.param("Adagrad", {}, id="adagrad"),
])
def test_more_optimizers_match_eager_in_one_graph(kind: str, options: dict[str, Any]) -> None:
    compiler.reset()
    e_model, e_optimizer = _train(kind, options, lambda fn: fn)
    model, optimizer = _train(kind, options,
                              lambda fn: compiler.compile(fn, backend="aot_eager"))
    _assert_same_state(model, optimizer, e_model, e_optimizer)
    assert _ours(optimizer) == (1, 0)


def test_two_param_groups_match_eager() -> None:
    """Per-group lr and weight decay (each group's values guarded constants)."""
    compiler.reset()
    runs = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        optimizer = torch.optim.AdamW([
            {"params": model[0].parameters(), "lr": 1e-2},
            {"params": model[2].parameters(), "lr": 1e-3, "weight_decay": 0.0},
        ])
        step_fn = compiler.compile(optimizer.step, backend="inductor") if compiled else \
            optimizer.step
        for step in range(4):
            model(_batch(step)).pow(2).sum().backward()
            step_fn()
            optimizer.zero_grad()
        runs.append((model, optimizer))
    (e_model, e_optimizer), (model, optimizer) = runs
    _assert_same_state(model, optimizer, e_model, e_optimizer)
