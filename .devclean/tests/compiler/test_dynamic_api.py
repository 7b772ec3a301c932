"""compiler.mark_dynamic / maybe_mark_dynamic / mark_static, against eager results and
torch.compile's compile counts (torch._dynamo's marks) in the same run."""

from __future__ import annotations

import inspect
from typing import Any

import compiler
import pytest
import torch
from capture.shape_guards import ConstraintViolation


class Counting:
    def __init__(self, name: str = "eager") -> None:
        self.inner = compiler.lookup_backend(name)
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kw: Any) -> Any:
        self.count += 1
        return self.inner(gm, example_inputs, **kw)


class TorchCounting:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.count += 1
        return gm.forward


def double_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x]) * x.shape[0]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_mark_dynamic_before_first_call_compiles_once(backend: str) -> None:
    compiler.reset()
    torch._dynamo.reset()
    ours, theirs = Counting(backend), TorchCounting()
    mine = compiler.compile(double_rows, backend=ours)
    torch_fn = torch.compile(double_rows, backend=theirs)
    for n in (4, 6, 9, 12, 17, 20, 25, 33):
        x = torch.randn(n, 5)
        compiler.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 0)
        expected = double_rows(x)
        torch.testing.assert_close(mine(x), expected)
        torch.testing.assert_close(torch_fn(x), expected)
    print(f"COMPILES mark_dynamic backend={backend}: ours {ours.count}, "
          f"torch.compile {theirs.count}")
    assert ours.count == 1
    assert ours.count <= theirs.count


def test_mark_dynamic_unmarked_later_calls_still_served() -> None:
    compiler.reset()
    counting = Counting()
    fn = compiler.compile(double_rows, backend=counting)
    x = torch.randn(4, 5)
    compiler.mark_dynamic(x, 0)
    fn(x)
    for n in (6, 7):
        y = torch.randn(n, 5)
        torch.testing.assert_close(fn(y), double_rows(y))
    assert counting.count == 1


def test_mark_dynamic_bounds_are_guarded() -> None:
    compiler.reset()
    counting = Counting()
    fn = compiler.compile(double_rows, backend=counting)
    x = torch.randn(4, 5)
    compiler.mark_dynamic(x, 0, min=2, max=8)
    fn(x)
    torch.testing.assert_close(fn(torch.ones(8, 5)), double_rows(torch.ones(8, 5)))
    assert counting.count == 1
    big = torch.ones(9, 5)
    torch.testing.assert_close(fn(big), double_rows(big))  # outside the bound: recompiles
    assert counting.count == 2


def specializes(x: torch.Tensor) -> torch.Tensor:
    if x.shape[0] == 8:  # the line named in the error
        return x + 1
    return x - 1


def test_mark_dynamic_specialized_by_the_program_is_an_error_naming_the_line() -> None:
    compiler.reset()
    torch._dynamo.reset()
    fn = compiler.compile(specializes, backend="eager")
    x = torch.randn(8, 3)
    compiler.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolation) as info:
        fn(x)
    line = inspect.getsourcelines(specializes)[1] + 1
    message = str(info.value)
    assert f"test_dynamic_api.py:{line}" in message
    assert "L['x'].shape[0]" in message and "8" in message
    # torch.compile refuses it too
    y = torch.randn(8, 3)
    torch._dynamo.mark_dynamic(y, 0)
    with pytest.raises(Exception, match="(?i)constraint|specializ"):
        torch.compile(specializes, backend="eager")(y)


def test_maybe_mark_dynamic_allows_specialization() -> None:
    compiler.reset()
    fn = compiler.compile(specializes, backend="eager")
    x = torch.randn(8, 3)
    compiler.maybe_mark_dynamic(x, 0)
    torch.testing.assert_close(fn(x), x + 1)
    y = torch.randn(5, 3)
    torch.testing.assert_close(fn(y), y - 1)


def test_maybe_mark_dynamic_compiles_once_when_not_specialized() -> None:
    compiler.reset()
    counting = Counting()
    fn = compiler.compile(double_rows, backend=counting)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        compiler.maybe_mark_dynamic(x, 0)
        torch.testing.assert_close(fn(x), double_rows(x))
    assert counting.count == 1


def test_mark_static_under_dynamic_true() -> None:
    compiler.reset()
    torch._dynamo.reset()
    ours, theirs = Counting(), TorchCounting()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sum(1)

    mine = compiler.compile(f, backend=ours, dynamic=True)
    torch_fn = torch.compile(f, backend=theirs, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n, 6)
        compiler.mark_static(x, 1)
        torch._dynamo.mark_static(x, 1)
        torch.testing.assert_close(mine(x), f(x))
        torch.testing.assert_close(torch_fn(x), f(x))
    assert ours.count == 1 and ours.count <= theirs.count
    z = torch.randn(3, 7)  # the static dimension changes: a new compile
    compiler.mark_static(z, 1)
    torch.testing.assert_close(mine(z), f(z))
    assert ours.count == 2


def test_mark_static_on_a_module() -> None:
    compiler.reset()
    counting = Counting()
    model = torch.nn.Linear(4, 3)
    compiler.mark_static(model)
    fn = compiler.compile(model, backend=counting, dynamic=True)
    for n in (2, 5, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(fn(x), model(x))
    assert counting.count == 1


@pytest.mark.parametrize("call", [
    lambda: compiler.mark_dynamic([1, 2], 0),
    lambda: compiler.mark_dynamic(torch.ones(2), "0"),
    lambda: compiler.mark_dynamic(torch.ones(2), 0, min="2"),
    lambda: compiler.maybe_mark_dynamic(3, 0),
    lambda: compiler.mark_static("x"),
])
def test_wrong_argument_types_raise_type_error(call: Any) -> None:
    with pytest.raises(TypeError):
        call()


def test_dimension_out_of_range() -> None:
    with pytest.raises(IndexError):
        compiler.mark_dynamic(torch.ones(2, 3), 2)
