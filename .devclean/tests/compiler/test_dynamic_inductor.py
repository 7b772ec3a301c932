"""Inductor kernels that take sizes as arguments: one compiled graph (and one set of C++
kernels) serves every size its guards admit.

Each program runs through the facade with a counting backend around
`compiler.lookup_backend("inductor")` and through torch.compile with a counting backend
(torch's graph count is decided by its frame capture); every result equals eager, ours
never compiles more graphs than torch, and the number of kernels inductor generates does
not grow once the symbolic graph is compiled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import aotgrad.cache
import compiler
import inductor.config
import inductor.targets
import pytest
import torch
import torch.nn.functional as F
from inductor import pipeline


class Counting:
    """`compiler.lookup_backend("inductor")` that counts its compiles."""

    def __init__(self) -> None:
        self.inner = compiler.lookup_backend("inductor")
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kw: Any) -> Any:
        self.count += 1
        return self.inner(gm, example_inputs, **kw)


class TorchCounting:
    """torch.compile's yardstick: the graphs its frame capture compiles."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.count += 1
        return gm.forward


def count_kernels(monkeypatch: pytest.MonkeyPatch, generator: str) -> list[str]:
    """Names of the kernels `inductor.targets.<generator>` makes from now on (caches of
    plans and compiled graphs cleared, so nothing of an earlier test is reused)."""
    made: list[str] = []
    generate = getattr(inductor.targets, generator)

    def counting(*args: Any, **kwargs: Any) -> Any:
        kernel = generate(*args, **kwargs)
        made.append(kernel.name)
        return kernel

    monkeypatch.setattr(inductor.targets, generator, counting)
    pipeline.clear_plan_cache()
    aotgrad.cache.clear()  # NOTE: compiled graphs of an earlier test would be shared
    return made


@pytest.fixture
def kernels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the C++ kernels inductor generates while the test runs."""
    return count_kernels(monkeypatch, "generate_kernel")


def run_both(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], kernels: list[str],
             dynamic: bool | None = None, grad: bool = False,
             before: Callable[[tuple[Any, ...]], None] | None = None,
             options: dict[str, Any] | None = None, atol: float = 1e-5,
             ) -> tuple[int, int, list[int]]:
    """Call `fn` compiled by us (inductor, with the inductor `options` in effect while ours
    runs) and by torch.compile on each argument tuple, compared with eager (outputs, and
    gradients of the inputs that require them when `grad`); returns (our compiles, torch's
    compiles, kernels generated after each call)."""
    compiler.reset()
    torch._dynamo.reset()
    ours = Counting()
    theirs = TorchCounting()
    mine = compiler.compile(fn, backend=ours, dynamic=dynamic)
    torch_fn = torch.compile(fn, backend=theirs, dynamic=dynamic)
    after: list[int] = []
    for args in calls:
        if before is not None:
            before(args)
        for run in (mine, torch_fn):
            leaves = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
                      else a for a in args]
            ref_leaves = [a.detach().requires_grad_(a.requires_grad)
                          if isinstance(a, torch.Tensor) else a for a in args]
            patched = options is not None and run is mine
            with inductor.config.patch(options) if patched else contextlib.nullcontext():
                got = run(*leaves)
            expected = fn(*ref_leaves)
            torch.testing.assert_close(got, expected, atol=atol, rtol=1e-5)
            if grad:
                got.sum().backward()
                expected.sum().backward()
                for a, b in zip(leaves, ref_leaves):
                    if isinstance(a, torch.Tensor) and a.requires_grad:
                        torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=1e-5)
        after.append(len(kernels))
    name = getattr(fn, "__name__", type(fn).__name__)
    print(f"COMPILES {name} options={options} dynamic={dynamic}: ours {ours.count}, torch.compile "
          f"{theirs.count}; kernels generated after each call {after}")
    return ours.count, theirs.count, after


def _steady(after: list[int], first: int) -> None:
    """No kernel generated after call `first` (the symbolic compile)."""
    assert after[first:] == [after[first]] * (len(after) - first), after


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


class Attention(torch.nn.Module):
    """Layer norm, QKV projection, scaled_dot_product_attention, output projection."""

    def __init__(self, dim: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, s, d)) + x


def test_batch_size_changes(kernels: list[str]) -> None:
    model = mlp().eval()
    calls = [(torch.randn(b, 12),) for b in (3, 5, 7, 16, 33, 64, 2, 100)]
    with torch.no_grad():
        ours, theirs, after = run_both(model, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_attention_over_sequence_lengths(kernels: list[str]) -> None:
    torch.manual_seed(0)
    model = Attention().eval()
    calls = [(torch.randn(2, s, 32),) for s in (5, 7, 9, 16, 33, 64, 100, 3)]
    with torch.no_grad():
        ours, theirs, after = run_both(model, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def _int_argument(kernels: list[str]) -> list[int]:
    def scale_rows(x: torch.Tensor, n: int) -> torch.Tensor:
        return (x * n).softmax(-1) + n

    calls = [(torch.randn(4, 40), n) for n in (3, 5, 8, 13, 21, 34, 6, 9)]
    ours, theirs, after = run_both(scale_rows, calls, kernels)
    assert ours <= theirs == 2
    return after


def test_int_argument(kernels: list[str]) -> None:
    _int_argument(kernels)


def test_int_argument_kernels_compiled_once(kernels: list[str]) -> None:
    """The symbolic int is an input of aotgrad's graphs: one kernel set for every value."""
    _steady(_int_argument(kernels), 1)


def test_int_argument_training(kernels: list[str]) -> None:
    """A symbolic int read by the forward and the backward (`x * n`'s gradient is n times
    the incoming one): an input of both graphs, compiled once."""
    def f(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
        return torch.tanh(x / n + w) * (n - 1) + x.sum(1, keepdim=True) / n

    torch.manual_seed(0)
    calls = [(torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True), n)
             for n in (3, 5, 8, 13, 21, 34, 6, 9)]
    ours, theirs, after = run_both(f, calls, kernels, grad=True)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_slice_by_an_int_argument(kernels: list[str]) -> None:
    """`x[:, :n]` keeps n symbolic (capture records the slice with its bound, guards the
    relations the slice needs, not n's value), in the forward and the backward."""
    def head(x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:, :n].sin() * 2 + x[:, n:n + 3].sum(1, keepdim=True)

    torch.manual_seed(0)
    calls = [(torch.randn(4, 40, requires_grad=True), n) for n in (3, 5, 8, 13, 21, 34, 6, 9)]
    ours, theirs, after = run_both(head, calls, kernels, grad=True)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_slice_from_the_end(kernels: list[str]) -> None:
    """`x[:, -n:]`: the aten slice's start is -n, counted from the end as the trace did."""
    def tail(x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:, -n:].cos() + x[:, n:].sum()

    calls = [(torch.randn(4, 40), n) for n in (3, 5, 8, 13, 21, 34, 6, 9)]
    ours, theirs, after = run_both(tail, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_slice_bounds_on_every_side(kernels: list[str]) -> None:
    """Bounds the first symbolic compile did not see (negative, 0, 1, the size, past it):
    each call equals eager, recompiled where the trace's decisions do not hold."""
    del kernels

    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:, :n].sin() * 2 + x[:, -n:].sum() + x[:, n:n + 3].sum(1, keepdim=True)

    compiler.reset()
    fn = compiler.compile(f, backend="inductor", options={"cache_size_limit": 64})
    for n in (3, 5, 8, -3, 50, 0, 1, 40, 39, 38, -1, -39, -40, 7):
        x = torch.randn(4, 40)
        torch.testing.assert_close(fn(x, n), f(x, n))


def test_slice_to_half_a_size(kernels: list[str]) -> None:
    """`x[:, :x.shape[1] // 2]`: the bound is an expression of a size symbol."""
    def first_half(x: torch.Tensor) -> torch.Tensor:
        half = x[:, :x.shape[1] // 2]
        return half.cos() + half.softmax(-1)

    calls = [(torch.randn(4, 2 * n + 1),) for n in (3, 5, 8, 13, 21, 34, 6, 9)]
    ours, theirs, after = run_both(first_half, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_mark_dynamic_compiles_once(kernels: list[str]) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) @ x.t() + x.mean()

    def mark(args: tuple[Any, ...]) -> None:
        compiler.mark_dynamic(args[0], 0)
        torch._dynamo.mark_dynamic(args[0], 0)

    calls = [(torch.randn(n, 8),) for n in (4, 6, 9, 17, 30, 5, 12, 3)]
    ours, theirs, after = run_both(f, calls, kernels, before=mark)
    assert ours <= theirs
    _steady(after, ours - 1)


def test_dynamic_true_compiles_once(kernels: list[str]) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + y).sum(1) / x.shape[1]

    calls = [(torch.randn(n, m), torch.randn(n, m)) for n, m in
             ((3, 13), (5, 9), (9, 4), (17, 33), (2, 7), (64, 3), (8, 8), (11, 100))]
    ours, theirs, after = run_both(f, calls, kernels, dynamic=True)
    assert ours <= theirs == 1
    _steady(after, 0)


def test_branch_on_a_size(kernels: list[str]) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 8:
            return (x * 2).cumsum(0).sin()
        return x.cos() - 1

    calls = [(torch.randn(n, 6),) for n in (3, 5, 7, 12, 20, 4, 30, 6)]
    ours, theirs, _ = run_both(f, calls, kernels)
    assert ours <= theirs


def test_training_with_symbolic_sizes(kernels: list[str]) -> None:
    model = mlp()

    def step(x: torch.Tensor) -> torch.Tensor:
        return model(x).square()

    calls = [(torch.randn(b, 12, requires_grad=True),) for b in (3, 5, 7, 16, 33, 4, 9, 20)]
    ours, theirs, after = run_both(step, calls, kernels, grad=True)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_size_one_and_strides_the_kernels_were_not_made_for(kernels: list[str]) -> None:
    """A call with a size the symbolic code does not serve (1) or another layout (a
    transposed input) gets eager's result: recompiled or compiled for its sizes."""
    del kernels

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 3).sum(1) + x[:, 0]

    compiler.reset()
    fn = compiler.compile(f, backend="inductor", dynamic=True)
    for x in (torch.randn(5, 7), torch.randn(9, 7), torch.randn(1, 7), torch.randn(7, 6).t(),
              torch.randn(4, 1), torch.randn(6, 8)[:, ::2], torch.randn(3, 3)):
        torch.testing.assert_close(fn(x), f(x))
