"""Shared checks for the real-model tests: compile a copy of a model with a counting eager
backend (through `capture.optimize` or `compiler.compile`), run inference or one training
step on both, and compare outputs, gradients and state with eager."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import capture
import compiler
import torch


class CountingBackend:
    """The eager backend, counting the graphs it receives."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return gm.forward


def _via_capture(model: torch.nn.Module, backend: CountingBackend) -> Any:
    return capture.optimize(model, backend=backend, fullgraph=True)


def _via_compiler(model: torch.nn.Module, backend: CountingBackend) -> Any:
    return compiler.compile(model, backend=backend, fullgraph=True)


VIA: dict[str, Callable[[torch.nn.Module, CountingBackend], Any]] = {
    "capture": _via_capture,
    "compiler": _via_compiler,
}


def tensors_of(out: Any) -> dict[str, torch.Tensor]:
    """The tensor fields of a model output (ModelOutput, dict, tuple or tensor), by name;
    a key/value cache (`transformers` Cache: `past_key_values`) by its layers' tensors."""
    if isinstance(out, torch.Tensor):
        return {"out": out}
    if isinstance(out, Mapping):
        items = list(out.items())
    elif isinstance(out, (tuple, list)):
        items = [(str(i), v) for i, v in enumerate(out)]
    else:
        raise TypeError(f"unexpected output type {type(out)}")
    found: dict[str, torch.Tensor] = {}
    for name, value in items:
        if isinstance(value, torch.Tensor):
            found[name] = value
        else:
            found.update((f"{name}.{k}", v) for k, v in _cache_tensors(value).items())
    return found


def _cache_tensors(value: Any) -> dict[str, torch.Tensor]:
    """The tensors of a transformers cache (DynamicCache, EncoderDecoderCache), by path."""
    found: dict[str, torch.Tensor] = {}
    for part in ("self_attention_cache", "cross_attention_cache"):
        inner = getattr(value, part, None)
        if inner is not None:
            found.update((f"{part}.{k}", v) for k, v in _cache_tensors(inner).items())
    for i, layer in enumerate(getattr(value, "layers", None) or []):
        for field in ("keys", "values"):
            tensor = getattr(layer, field, None)
            if isinstance(tensor, torch.Tensor):
                found[f"layers.{i}.{field}"] = tensor
    return found


def _compare_outputs(actual: Any, expected: Any, where: str, **tol: float) -> None:
    assert type(actual) is type(expected), f"{where}: {type(actual)} vs {type(expected)}"
    a, e = tensors_of(actual), tensors_of(expected)
    assert list(a) == list(e), f"{where}: fields {list(a)} vs {list(e)}"
    for name in e:
        torch.testing.assert_close(a[name], e[name], msg=lambda m, w=where, n=name: f"{w}.{n}: {m}", **tol)


def check_inference(
    model: torch.nn.Module, kwargs: dict[str, Any], via: str, calls: int = 2, **tol: float
) -> CountingBackend:
    """Eval-mode forward: same outputs, exactly one graph, no recompile on a second call."""
    model.eval()
    twin = copy.deepcopy(model)
    backend = CountingBackend()
    capture.reset()
    compiled = VIA[via](twin, backend)
    with torch.no_grad():
        for call in range(calls):
            _compare_outputs(compiled(**kwargs), model(**kwargs), f"call {call + 1}", **tol)
    assert len(backend.graphs) == 1, f"expected one graph, got {len(backend.graphs)}"
    return backend


def check_training_step(
    model: torch.nn.Module,
    kwargs: dict[str, Any],
    loss_of: Callable[[Any], torch.Tensor],
    via: str,
    steps: int = 2,
    **tol: float,
) -> CountingBackend:
    """Train-mode forward + backward + SGD step, `steps` times: outputs, every parameter's
    gradient and the state (parameters, buffers) match eager; exactly one graph."""
    model.train()
    twin = copy.deepcopy(model)
    backend = CountingBackend()
    capture.reset()
    compiled = VIA[via](twin, backend)
    opt_e = torch.optim.SGD(model.parameters(), lr=0.01)
    opt_c = torch.optim.SGD(twin.parameters(), lr=0.01)
    for step in range(steps):
        where = f"step {step + 1}"
        torch.manual_seed(step)
        expected = model(**kwargs)
        torch.manual_seed(step)
        actual = compiled(**kwargs)
        _compare_outputs(actual, expected, where, **tol)
        loss_of(expected).backward()
        loss_of(actual).backward()
        e_params = dict(model.named_parameters())
        for name, p in twin.named_parameters():
            e = e_params[name]
            if e.grad is None:
                assert p.grad is None, f"{where}: {name} has a grad only when compiled"
                continue
            assert p.grad is not None, f"{where}: {name} has no grad when compiled"
            torch.testing.assert_close(p.grad, e.grad, msg=lambda m, w=where, n=name: f"{w} grad {n}: {m}",
                                       **tol)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
        e_state = model.state_dict()
        for name, value in twin.state_dict().items():
            torch.testing.assert_close(value, e_state[name],
                                       msg=lambda m, w=where, n=name: f"{w} state {n}: {m}", **tol)
    assert len(backend.graphs) == 1, f"expected one graph, got {len(backend.graphs)}"
    return backend
