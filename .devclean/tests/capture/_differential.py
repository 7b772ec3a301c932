"""Differential checking of `capture` against eager Python, shared by tests/capture/test_cases_*.py.

A case is a small real program. `check` runs it eagerly and through `capture.optimize` on fresh
copies of the same inputs, then compares the results, every side effect visible through the
arguments, gradients (optionally) and the number of graphs the backend received. This module
imports only capture, torch and pytest so the corpus runs in capture's standalone venv.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import math
import types
from collections.abc import Callable, Iterator
from typing import Any

import capture
import pytest
import torch


class CountingBackend:
    """An eager backend that records every graph and the example inputs it receives."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list[Any]] = []
        self.calls = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))

        def run(*args: Any) -> Any:
            self.calls += 1
            return gm(*args)

        return run

    @property
    def frame_count(self) -> int:
        return len(self.graphs)

    def call_nodes(self, index: int = -1) -> list[torch.fx.Node]:
        """The call_function/call_method/call_module nodes of one recorded graph."""
        graph = self.graphs[index].graph
        return [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]

    def targets(self, index: int = -1) -> list[Any]:
        return [n.target for n in self.call_nodes(index)]


# Objects that a test shares between the eager and the compiled run (never copied).
_SHARED = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
    torch.nn.Module,
    torch.dtype,
    torch.device,
    torch.Size,
    enum.Enum,
    range,
    slice,
)


def fresh(obj: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of `obj` equal in value: tensors cloned, containers and plain objects rebuilt.

    Modules, functions, classes and parameters are shared (their identity is part of the
    program); aliasing inside `obj` is preserved.
    """
    if memo is None:
        memo = {}
    if id(obj) in memo:
        return memo[id(obj)]
    out: Any
    if isinstance(obj, (torch.nn.Parameter, *_SHARED)) or obj is None:
        return obj
    if isinstance(obj, (bool, int, float, complex, str, bytes)):
        return obj
    if isinstance(obj, torch.Tensor):
        out = obj.detach().clone()
        if obj.requires_grad:
            out.requires_grad_(True)
    elif type(obj) is list:
        out = []
        memo[id(obj)] = out
        out.extend(fresh(v, memo) for v in obj)
        return out
    elif isinstance(obj, tuple):
        items = [fresh(v, memo) for v in obj]
        out = type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    elif isinstance(obj, dict):
        out = type(obj)()
        memo[id(obj)] = out
        for k, v in obj.items():
            out[k] = fresh(v, memo)
        return out
    elif isinstance(obj, (set, frozenset)):
        out = type(obj)(fresh(v, memo) for v in obj)
    elif hasattr(obj, "__dict__") and not callable(obj):
        out = object.__new__(type(obj))
        memo[id(obj)] = out
        for k, v in vars(obj).items():
            out.__dict__[k] = fresh(v, memo)
        return out
    elif hasattr(type(obj), "__slots__") and not callable(obj):
        out = object.__new__(type(obj))
        memo[id(obj)] = out
        for k in type(obj).__slots__:
            if hasattr(obj, k):
                setattr(out, k, fresh(getattr(obj, k), memo))
        return out
    else:
        return obj
    memo[id(obj)] = out
    return out


def assert_same(actual: Any, expected: Any, where: str = "result") -> None:
    """Structural equality of a compiled run's value with the eager one (tensors: assert_close)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {type(actual)}"
        assert type(actual) is type(expected), f"{where}: {type(actual)} vs {type(expected)}"
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{where}: {m}", equal_nan=True)
        assert actual.requires_grad == expected.requires_grad, f"{where}: requires_grad differs"
        return
    if isinstance(expected, torch.nn.Module) or isinstance(expected, _SHARED) and not isinstance(
        expected, (torch.Size, range, slice, torch.dtype, torch.device, enum.Enum)
    ):
        assert actual is expected, f"{where}: expected the same object {expected!r}"
        return
    assert type(actual) is type(expected), (
        f"{where}: type {type(actual).__name__} != {type(expected).__name__} "
        f"({actual!r} vs {expected!r})"
    )
    if isinstance(expected, float):
        assert actual == expected or (math.isnan(actual) and math.isnan(expected)), (
            f"{where}: {actual!r} != {expected!r}"
        )
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}[{k!r}]")
    elif dataclasses.is_dataclass(expected) or (
        hasattr(expected, "__dict__") and not callable(expected)
        and type(expected).__module__ != "builtins"
    ):
        assert_same(dict(vars(actual)), dict(vars(expected)), f"{where}.__dict__")
    elif hasattr(type(expected), "__slots__") and type(expected).__module__ != "builtins":
        for k in type(expected).__slots__:
            assert_same(getattr(actual, k, None), getattr(expected, k, None), f"{where}.{k}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_same_identity(actual: Any, expected: Any, c_args: Any, e_args: Any,
                         where: str) -> None:
    """Where eager returns one of its (mutable) arguments itself, compiled returns its own."""
    pairs = [(actual, expected)]
    if isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)):
        pairs += list(zip(actual, expected))
    for a, e in pairs:
        for i, (c_arg, e_arg) in enumerate(zip(c_args, e_args)):
            if e is e_arg and isinstance(e_arg, (torch.Tensor, list, dict)) or (
                e is e_arg and hasattr(e_arg, "__dict__") and not callable(e_arg)
            ):
                assert a is c_arg, f"{where}: eager returned argument {i} itself, compiled did not"


def _leaf_tensors(obj: Any, seen: set[int] | None = None) -> Iterator[torch.Tensor]:
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        if obj.requires_grad and obj.is_leaf:
            yield obj
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            yield from _leaf_tensors(v, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _leaf_tensors(v, seen)


def _output_tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj] if obj.requires_grad else []
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _output_tensors(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _output_tensors(v)]
    return []


def _backward(out: Any) -> None:
    tensors = _output_tensors(out)
    assert tensors, "grad=True needs an output that requires grad"
    total = sum((t.float().sum() for t in tensors), torch.zeros(()))
    total.backward()


def optimize(fn: Any, backend: Any, fullgraph: bool = True) -> Any:
    """capture.optimize with the keyword arguments of the public API."""
    return capture.optimize(fn, backend=backend, fullgraph=fullgraph)


def check(
    fn: Callable[..., Any],
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    graphs: int | None = 1,
    fullgraph: bool = True,
    calls: int = 2,
    grad: bool = False,
    seed: int = 0,
) -> CountingBackend:
    """Run `fn` eagerly and compiled on fresh copies of `args`; compare everything.

    Compares results, the arguments after the call (side effects on lists, dicts, objects and
    tensors), gradients of leaf tensors in the arguments (with `grad=True`), and that the
    backend received exactly `graphs` graphs after every call (so later calls hit the cache).
    """
    capture.reset()
    backend = CountingBackend()
    compiled = optimize(fn, backend, fullgraph)
    kwargs = kwargs or {}
    for call in range(calls):
        e_args, e_kwargs = fresh((args, kwargs))
        c_args, c_kwargs = fresh((args, kwargs))
        torch.manual_seed(seed)
        expected = fn(*e_args, **e_kwargs)
        torch.manual_seed(seed)
        actual = compiled(*c_args, **c_kwargs)
        where = f"call {call + 1}"
        assert_same(actual, expected, f"{where}: result")
        assert_same(list(c_args), list(e_args), f"{where}: arguments after the call")
        assert_same(c_kwargs, e_kwargs, f"{where}: keyword arguments after the call")
        assert_same_identity(actual, expected, c_args, e_args, f"{where}: result")
        if grad:
            _backward(expected)
            _backward(actual)
            for i, (a, e) in enumerate(zip(_leaf_tensors(c_args), _leaf_tensors(e_args))):
                assert_same(a.grad, e.grad, f"{where}: grad of input tensor {i}")
        if graphs is not None:
            assert backend.frame_count == graphs, (
                f"{where}: expected {graphs} graph(s), the backend got {backend.frame_count}"
            )
    return backend


def check_module(
    module: torch.nn.Module,
    *args: Any,
    graphs: int | None = 1,
    grad: bool = False,
    calls: int = 2,
    fullgraph: bool = True,
    seed: int = 0,
) -> tuple[CountingBackend, Any]:
    """Compile a deep copy of `module`; compare outputs, grads and state with the original."""
    import copy

    capture.reset()
    backend = CountingBackend()
    eager = module
    twin = copy.deepcopy(module)
    compiled = optimize(twin, backend, fullgraph)
    for call in range(calls):
        e_args = fresh(args)
        c_args = fresh(args)
        torch.manual_seed(seed)
        expected = eager(*e_args)
        torch.manual_seed(seed)
        actual = compiled(*c_args)
        where = f"call {call + 1}"
        assert_same(actual, expected, f"{where}: result")
        assert_same(list(c_args), list(e_args), f"{where}: arguments after the call")
        if grad:
            _backward(expected)
            _backward(actual)
            e_params = dict(eager.named_parameters())
            for name, p in twin.named_parameters():
                assert_same(p.grad, e_params[name].grad, f"{where}: grad of {name}")
            for i, (a, e) in enumerate(zip(_leaf_tensors(c_args), _leaf_tensors(e_args))):
                assert_same(a.grad, e.grad, f"{where}: grad of input tensor {i}")
            eager.zero_grad(set_to_none=True)
            twin.zero_grad(set_to_none=True)
        e_state = eager.state_dict()
        for name, value in twin.state_dict().items():
            assert_same(value, e_state[name], f"{where}: state_dict[{name!r}] after the call")
        if graphs is not None:
            assert backend.frame_count == graphs, (
                f"{where}: expected {graphs} graph(s), the backend got {backend.frame_count}"
            )
    return backend, compiled


def case(fn: Callable[..., Any], *args: Any, id: str | None = None, marks: Any = (),
         **opts: Any) -> Any:
    """One parametrized case: `fn` applied to `args`, checked with `check(**opts)`."""
    return pytest.param(fn, args, opts, id=id or fn.__name__, marks=marks)


def line_of(fn: Callable[..., Any], marker: str) -> int:
    """The absolute line number of the first source line of `fn` that contains `marker`."""
    lines, start = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if marker in text:
            return start + offset
    raise AssertionError(f"marker {marker!r} not in the source of {fn.__name__}")


@contextlib.contextmanager
def config_patch(**changes: Any) -> Iterator[None]:
    """Temporarily change `capture.config` options (via its `patch` if it has one)."""
    cfg = capture.config
    patch = getattr(cfg, "patch", None)
    if patch is not None:
        with patch(**changes):
            yield
        return
    old = {k: getattr(cfg, k) for k in changes}
    try:
        for k, v in changes.items():
            setattr(cfg, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(cfg, k, v)


def t(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32,
      requires_grad: bool = False) -> torch.Tensor:
    """A deterministic random tensor (normal for floats, 0..9 for integers)."""
    g = torch.Generator().manual_seed(seed * 7919 + sum(shape) + len(shape))
    if dtype.is_floating_point:
        out = torch.randn(*shape, generator=g).to(dtype)
    elif dtype == torch.bool:
        out = torch.randint(0, 2, shape, generator=g).bool()
    else:
        out = torch.randint(0, 10, shape, generator=g).to(dtype)
    return out.requires_grad_(requires_grad)
