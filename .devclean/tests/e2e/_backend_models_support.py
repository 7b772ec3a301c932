"""Checks for real models under the `aot_eager` and `inductor` backends: compile a deep copy of
a model through `compiler.compile(..., fullgraph=True)` with the named backend (wrapped so the
graphs it receives are counted), then compare with eager PyTorch:

`via="backend_only"` skips capture (symbolic_trace, then the backend), to check what the
backends do with a model capture cannot take yet.

- inference: eval mode and `torch.no_grad()`, outputs equal on two calls, one graph;
- training: train mode, outputs and loss equal, every parameter's gradient equal, buffers
  (BatchNorm running stats) equal, an optimizer step on both, then a second step the same way,
  still one graph (the step must not cause a recompile).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import capture
import compiler
import torch

# float32 tolerances. Outputs of shallow computations: rtol=1e-4, atol=1e-5.
OUT_TOL: dict[str, float] = {"rtol": 1e-4, "atol": 1e-5}
# NOTE: gradients are sums over the batch and sequence of products of several float32
# values; a compiled kernel sums in a different order (fused, vectorized, split reductions)
# than ATen, so grads get a looser absolute tolerance.
GRAD_TOL: dict[str, float] = {"rtol": 1e-4, "atol": 1e-4}


def lookup_backend(name: str) -> Any:
    """The backend registered as `name` (through the `capture.backends` entry points)."""
    return capture.lookup_backend(name)


class CountingBackend:
    """A registered backend (by name), counting the graphs capture hands it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = lookup_backend(name)
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def compile_counted(target: Any, backend: str) -> tuple[Any, CountingBackend]:
    """`compiler.compile(target, backend=<counted backend>, fullgraph=True)` after a reset."""
    compiler.reset()
    counted = CountingBackend(backend)
    return compiler.compile(target, backend=counted, fullgraph=True), counted


class _TupleOut(torch.nn.Module):
    """`model` of one tensor, returning a 1-tuple, as the backend contract wants of a graph."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[Any]:
        return (self.model(x),)


class DirectBackend:
    """`model` through a backend without capture: `torch.fx.symbolic_trace` (leaf modules
    such as nn.LSTM stay call_module nodes, which aotgrad traces into ATen) gives the graph,
    handed once to the named backend with the first call's inputs."""

    def __init__(self, model: torch.nn.Module, backend: str) -> None:
        self.gm = torch.fx.symbolic_trace(_TupleOut(model))
        self.counted = CountingBackend(backend)
        self.compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            self.compiled = self.counted(self.gm, list(args))
        return self.compiled(*args)[0]


def compile_direct(target: torch.nn.Module, backend: str) -> tuple[Any, CountingBackend]:
    """The named backend applied to `symbolic_trace(target)`, bypassing capture."""
    direct = DirectBackend(target, backend)
    return direct, direct.counted


COMPILE = {"compiler": compile_counted, "backend_only": compile_direct}


def tensors_of(out: Any, prefix: str = "out") -> dict[str, torch.Tensor]:
    """Every tensor in a (nested) model output, by a path name."""
    if isinstance(out, torch.Tensor):
        return {prefix: out}
    found: dict[str, torch.Tensor] = {}
    if isinstance(out, Mapping):
        items = list(out.items())
    elif isinstance(out, (tuple, list)):
        items = list(enumerate(out))
    else:
        return found
    for key, value in items:
        found.update(tensors_of(value, f"{prefix}.{key}"))
    return found


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str,
                 tol: Mapping[str, float]) -> None:
    """`torch.testing.assert_close` with tolerances `tol` and `what` before its message."""

    def message(m: str) -> str:
        return f"{what}: {m}"

    torch.testing.assert_close(actual, expected, rtol=tol["rtol"], atol=tol["atol"],
                               msg=message)


def assert_close_all(actual: Any, expected: Any, where: str, tol: Mapping[str, float]) -> None:
    """Every tensor of `actual` equals the same-named tensor of `expected`."""
    a, e = tensors_of(actual), tensors_of(expected)
    assert list(a) == list(e), f"{where}: fields {list(a)} vs {list(e)}"
    for name, ev in e.items():
        assert_close(a[name], ev, f"{where} {name}", tol)


def _clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def check_inference(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    backend: str,
    kwargs: dict[str, Any] | None = None,
    calls: int = 2,
    tol: Mapping[str, float] = OUT_TOL,
    via: str = "compiler",
) -> CountingBackend:
    """Eval mode, no grad: same outputs as eager on `calls` calls, exactly one graph."""
    kwargs = kwargs or {}
    model.eval()
    twin = copy.deepcopy(model)
    compiled, counted = COMPILE[via](twin, backend)
    with torch.no_grad():
        for call in range(calls):
            expected = model(*_clone_args(args), **kwargs)
            actual = compiled(*_clone_args(args), **kwargs)
            assert_close_all(actual, expected, f"{backend} call {call + 1}", tol)
    assert len(counted.graphs) == 1, f"expected one graph, got {len(counted.graphs)}"
    return counted


def check_training(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    loss_of: Callable[[Any], torch.Tensor],
    backend: str,
    kwargs: dict[str, Any] | None = None,
    steps: int = 2,
    out_tol: Mapping[str, float] = OUT_TOL,
    grad_tol: Mapping[str, float] = GRAD_TOL,
    via: str = "compiler",
) -> CountingBackend:
    """Train mode, `steps` times: forward, loss.backward(), compare outputs, loss, every
    parameter's grad and every buffer, then an SGD (momentum) step on both; one graph."""
    kwargs = kwargs or {}
    model.train()
    twin = copy.deepcopy(model)
    compiled, counted = COMPILE[via](twin, backend)
    opt_e = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt_c = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        where = f"{backend} step {step + 1}"
        torch.manual_seed(step)
        expected = model(*_clone_args(args), **kwargs)
        torch.manual_seed(step)
        actual = compiled(*_clone_args(args), **kwargs)
        assert_close_all(actual, expected, where, out_tol)
        loss_e, loss_c = loss_of(expected), loss_of(actual)
        assert_close(loss_c, loss_e, f"{where} loss", out_tol)
        loss_e.backward()  # type: ignore[no-untyped-call]  # torch: untyped
        loss_c.backward()  # type: ignore[no-untyped-call]  # torch: untyped
        e_params = dict(model.named_parameters())
        for name, p in twin.named_parameters():
            e = e_params[name]
            if e.grad is None:
                assert p.grad is None, f"{where}: {name} has a grad only when compiled"
                continue
            assert p.grad is not None, f"{where}: {name} has no grad when compiled"
            assert_close(p.grad, e.grad, f"{where} grad {name}", grad_tol)
        e_buffers = dict(model.named_buffers())
        for name, b in twin.named_buffers():
            assert_close(b, e_buffers[name], f"{where} buffer {name}", out_tol)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    assert len(counted.graphs) == 1, f"expected one graph, got {len(counted.graphs)}"
    return counted


def check_function(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    backend: str,
    calls: int = 2,
    tol: Mapping[str, float] = OUT_TOL,
) -> CountingBackend:
    """A function that may mutate its tensor arguments: outputs and the final state of every
    argument equal eager on `calls` calls (fresh clones each call), exactly one graph."""
    compiled, counted = compile_counted(fn, backend)
    for call in range(calls):
        e_args, c_args = _clone_args(args), _clone_args(args)
        expected = fn(*e_args)
        actual = compiled(*c_args)
        where = f"{backend} call {call + 1}"
        assert_close_all(actual, expected, where, tol)
        assert_close_all(c_args, e_args, f"{where} (inputs after the call)", tol)
    assert len(counted.graphs) == 1, f"expected one graph, got {len(counted.graphs)}"
    return counted
