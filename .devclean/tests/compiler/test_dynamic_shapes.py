"""Dynamic shapes end to end through capture: automatic dynamic, dynamic=True, size relations
as guards, int arguments, against eager results and torch.compile's compile counts in the
same run (a counting backend around ours, one around torch's eager backend: torch's graph
count is decided by its frame capture, whatever backend runs the graphs)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import compiler
import pytest
import torch
import torch.nn.functional as F

BACKENDS = ["eager", "inductor"]


class Counting:
    """`compiler.lookup_backend(name)` that counts its compiles."""

    def __init__(self, name: str) -> None:
        self.inner = compiler.lookup_backend(name)
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **kw: Any) -> Any:
        self.count += 1
        return self.inner(gm, example_inputs, **kw)


class TorchCounting:
    """torch.compile's yardstick: counts the graphs torch's frame capture compiles."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.count += 1
        return gm.forward


def run_both(fn: Any, calls: Sequence[tuple[Any, ...]], backend: str, dynamic: bool | None = None,
             before: Callable[[tuple[Any, ...]], None] | None = None) -> tuple[int, int]:
    """Call `fn` compiled by us and by torch.compile on each argument tuple (compared with
    eager); returns (our compiles, torch's compiles)."""
    compiler.reset()
    torch._dynamo.reset()
    ours = Counting(backend)
    theirs = TorchCounting()
    mine = compiler.compile(fn, backend=ours, dynamic=dynamic)
    torch_fn = torch.compile(fn, backend=theirs, dynamic=dynamic)
    for args in calls:
        if before is not None:
            before(args)
        expected = fn(*args)
        torch.testing.assert_close(mine(*args), expected)
        torch.testing.assert_close(torch_fn(*args), expected)
    name = getattr(fn, "__name__", type(fn).__name__)
    print(f"COMPILES {name} backend={backend} dynamic={dynamic}: ours {ours.count}, "
          f"torch.compile {theirs.count}")
    return ours.count, theirs.count


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


class Attention(torch.nn.Module):
    """Layer norm, QKV projection, scaled_dot_product_attention, output projection."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(b, t, d))


BATCHES = [3, 5, 8, 10, 13, 16, 21, 32]
SEQ_LENS = [5, 7, 9, 12, 16, 20, 31, 64]


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_size_changing_over_8_calls(backend: str) -> None:
    model = mlp()
    calls = [(torch.randn(b, 12),) for b in BATCHES]
    ours, theirs = run_both(model, calls, backend)
    assert ours == 2  # static, then the batch dimension symbolic
    assert ours <= theirs


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_block_over_8_sequence_lengths(backend: str) -> None:
    torch.manual_seed(0)
    block = Attention()
    calls = [(torch.randn(2, t, 16),) for t in SEQ_LENS]
    ours, theirs = run_both(block, calls, backend)
    assert ours == 2
    assert ours <= theirs


def scale_shift(x: torch.Tensor, k: int) -> torch.Tensor:
    return x * k + k // 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_argument_that_changes(backend: str) -> None:
    calls = [(torch.randn(4), k) for k in (2, 3, 5, 7, 11, 4, 9, 6)]
    ours, theirs = run_both(scale_shift, calls, backend)
    assert ours == 2
    assert ours <= theirs


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_true_compiles_once(backend: str) -> None:
    model = mlp()
    calls = [(torch.randn(b, 12),) for b in BATCHES]
    ours, theirs = run_both(model, calls, backend, dynamic=True)
    assert ours == 1
    assert ours <= theirs


def branch_on_size(x: torch.Tensor) -> torch.Tensor:
    if x.shape[0] > 6:
        return x.sin() * x.shape[0]
    return x.cos() - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_program_that_branches_on_a_size(backend: str) -> None:
    calls = [(torch.randn(n, 3),) for n in (3, 4, 5, 6, 7, 8, 9, 10)]
    ours, theirs = run_both(branch_on_size, calls, backend)
    # static (3), symbolic with n <= 6 (4), symbolic with n > 6 (7): each relation guarded
    assert ours == 3
    assert ours <= theirs


def test_dynamic_false_recompiles_per_size() -> None:
    compiler.reset()
    counting = Counting("eager")
    fn = compiler.compile(lambda x: x * 2, backend=counting, dynamic=False)
    for n in (2, 3, 4, 5):
        torch.testing.assert_close(fn(torch.ones(n)), torch.ones(n) * 2)
    assert counting.count == 4


def test_sizes_zero_and_one_stay_static() -> None:
    compiler.reset()
    counting = Counting("eager")
    fn = compiler.compile(lambda x: x.sum(0) / x.shape[0], backend=counting)
    for n in (4, 5, 6):
        x = torch.randn(n, 3)
        torch.testing.assert_close(fn(x), x.sum(0) / n)
    assert counting.count == 2
    one = torch.randn(1, 3)
    torch.testing.assert_close(fn(one), one.sum(0))  # 1 is outside the symbol's range
    assert counting.count == 3


def test_failing_relation_is_the_recompile_reason(caplog: pytest.LogCaptureFixture) -> None:
    compiler.reset()
    fn = compiler.compile(branch_on_size, backend="eager")
    fn(torch.randn(3, 2))
    fn(torch.randn(4, 2))  # symbolic, relied on n <= 6
    with caplog.at_level(logging.INFO, logger="capture.recompiles"):
        out = fn(torch.randn(9, 2))
    assert "size relation" in caplog.text and "<= 6" in caplog.text and "= 9" in caplog.text
    assert out.shape == (9, 2)


def test_symbolic_entry_rejects_other_strides() -> None:
    """A symbolic entry traced for contiguous inputs is not used for a transposed one."""
    compiler.reset()
    counting = Counting("eager")

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.view(-1) * 2

    fn = compiler.compile(f, backend=counting)
    for n in (3, 4, 5):
        x = torch.randn(n, 6)
        torch.testing.assert_close(fn(x), f(x))
    assert counting.count == 2
    y = torch.randn(6, 5).t()  # non-contiguous: eager's view raises
    with pytest.raises(RuntimeError):
        f(y)
    with pytest.raises(RuntimeError):
        fn(y)


def test_two_symbolic_sizes_that_broadcast_are_related() -> None:
    compiler.reset()
    counting = Counting("eager")

    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y

    fn = compiler.compile(add, backend=counting)
    for n in (3, 4, 5):
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(fn(x, y), x + y)
    with pytest.raises(RuntimeError):
        fn(torch.randn(6), torch.randn(7))  # eager raises: the entry must not compute
    x, one = torch.randn(6), torch.ones(1)
    torch.testing.assert_close(fn(x, one), x + one)


def test_size_used_as_python_number_is_specialized_and_guarded() -> None:
    compiler.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        parts = [x * i for i in range(x.shape[0])]  # needs the size as a Python int
        return torch.stack(parts).sum(0)

    fn = compiler.compile(f, backend="eager")
    for n in (2, 3, 4, 5, 3, 2):
        x = torch.randn(n)
        torch.testing.assert_close(fn(x), f(x))


def test_symbolic_int_rejects_bool_and_float() -> None:
    compiler.reset()
    fn = compiler.compile(scale_shift, backend="eager")
    x = torch.randn(3)
    for k in (2, 3, 4):
        torch.testing.assert_close(fn(x, k), scale_shift(x, k))
    torch.testing.assert_close(fn(x, True), scale_shift(x, True))
    torch.testing.assert_close(fn(x, 2.5), scale_shift(x, 2.5))


def test_guards_bind_sizes_and_relations() -> None:
    compiler.reset()
    with capture_records() as records:
        fn = compiler.compile(branch_on_size, backend="eager")
        fn(torch.randn(3, 2))
        fn(torch.randn(4, 2))
    text = records[-1].guard_tree.render()
    assert "= L['x'].shape[0]" in text
    assert "<= 6" in text and ">= 2" in text


def capture_records() -> Any:
    import capture

    return capture.recording()


def test_inductor_compiles_symbolic_sizes_once() -> None:
    """Behind one symbolic capture entry, the inductor backend compiles one runner for the
    symbolic signature (its kernels take the sizes as arguments), not one per size."""
    compiler.reset()
    made: list[Any] = []
    inductor = compiler.lookup_backend("inductor")

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any], **kw: Any) -> Any:
        out = inductor(gm, example_inputs, **kw)
        made.append(out)
        return out

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum(1)

    fn = compiler.compile(f, backend=keep)
    for n in (3, 4, 5, 4, 3):
        x = torch.randn(n, 6)
        torch.testing.assert_close(fn(x), f(x))
    assert len(made) == 2  # static (3), then symbolic
    keys = list(made[-1].compiled.cache)
    assert len(keys) == 1
    assert any(p[:1] == ("symbolic",) for p in keys[0] if isinstance(p, tuple))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_views_with_storage_offsets_and_mutation(backend: str) -> None:
    compiler.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x.sum()

    fn = compiler.compile(f, backend=backend)
    for n in (3, 4, 5, 6):
        base, expected_base = torch.arange(20.0), torch.arange(20.0)
        got = fn(base[n:2 * n])
        expected = f(expected_base[n:2 * n])
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(base, expected_base)
        x, y = torch.randn(n, 3), None
        y = x.clone()
        torch.testing.assert_close(fn(x), f(y))
        torch.testing.assert_close(x, y)


def test_shape_tuple_arithmetic_stays_symbolic() -> None:
    """`x.shape[:-1] + (2, d // 2)` (transformers' reshapes) keeps the sizes symbolic: the
    tuple is built, not specialized to its value."""
    compiler.reset()
    counting = Counting("eager")

    def f(x: torch.Tensor) -> torch.Tensor:
        shape = (-1,) + x.shape[1:-1] + (2, x.size(-1) // 2)
        return x.reshape(shape).sum(-2)

    fn = compiler.compile(f, backend=counting)
    for n in (3, 4, 5, 6, 7):
        x = torch.randn(2, n, 8)
        torch.testing.assert_close(fn(x), f(x))
    assert counting.count == 2
