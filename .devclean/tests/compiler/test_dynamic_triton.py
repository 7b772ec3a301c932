"""Triton kernels that take sizes as arguments: one compiled graph (and one set of Triton
kernels) serves every size its guards admit, run on CPU tensors through Triton's
interpreter (`options={"cpu_backend": "triton"}`; on a GPU the same kernels run on CUDA).

Each program runs through the facade with a counting backend around
`compiler.lookup_backend("inductor")` and through torch.compile with a counting backend;
every result (and gradient) equals eager, ours never compiles more graphs than torch, and
the number of Triton kernels inductor generates does not grow after the symbolic compile.
"""

from __future__ import annotations

import functools
from typing import Any

import compiler
import inductor.config
import inductor.targets
import pytest
import torch
from test_dynamic_inductor import Attention, _steady, count_kernels, mlp
from test_dynamic_inductor import run_both as inductor_run_both

pytest.importorskip("triton")

OPTIONS = {"cpu_backend": "triton"}


@pytest.fixture
def kernels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the Triton kernels inductor generates while the test runs."""
    return count_kernels(monkeypatch, "generate_triton_kernel")


#: `test_dynamic_inductor.run_both` with the Triton target in effect while ours runs
run_both = functools.partial(inductor_run_both, options=OPTIONS)


def test_batch_size_changes(kernels: list[str]) -> None:
    model = mlp().eval()
    calls = [(torch.randn(b, 12),) for b in (3, 5, 7, 16, 33, 2, 100)]
    with torch.no_grad():
        ours, theirs, after = run_both(model, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_attention_over_sequence_lengths(kernels: list[str]) -> None:
    torch.manual_seed(0)
    model = Attention().eval()
    calls = [(torch.randn(2, s, 32),) for s in (5, 7, 9, 16, 33, 3)]
    with torch.no_grad():
        ours, theirs, after = run_both(model, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_reductions_over_a_symbolic_row_length(kernels: list[str]) -> None:
    """Softmax and layer norm over rows whose length changes: looped reductions whose
    block size the launcher picks from each call's row length (short and long rows)."""
    def rows(x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.layer_norm(x, x.shape[-1:])
        return x.softmax(-1) + y * 0.5 + x.amax(-1, keepdim=True)

    calls = [(torch.randn(6, m),) for m in (7, 13, 40, 129, 1500, 3, 64)]
    ours, theirs, after = run_both(rows, calls, kernels, atol=2e-5)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_dynamic_true_two_symbolic_sizes(kernels: list[str]) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + y).sum(1) / x.shape[1] + x.t().contiguous().sum(1).sum()

    calls = [(torch.randn(n, m), torch.randn(n, m)) for n, m in
             ((3, 13), (5, 9), (9, 4), (17, 33), (2, 7), (8, 8))]
    ours, theirs, after = run_both(f, calls, kernels, dynamic=True)
    assert ours <= theirs == 1
    _steady(after, 0)


def test_training_with_symbolic_sizes(kernels: list[str]) -> None:
    model = mlp()

    def step(x: torch.Tensor) -> torch.Tensor:
        return model(x).square()

    calls = [(torch.randn(b, 12, requires_grad=True),) for b in (3, 5, 7, 16, 4, 9)]
    ours, theirs, after = run_both(step, calls, kernels, grad=True)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_int_argument_and_slice(kernels: list[str]) -> None:
    """A symbolic int read as a number and as a slice bound: one kernel set."""
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return (x[:, :n] * n).softmax(-1) + x[:, -n:].sum(1, keepdim=True)

    calls = [(torch.randn(4, 40), n) for n in (3, 5, 8, 13, 21, 6)]
    ours, theirs, after = run_both(f, calls, kernels)
    assert ours <= theirs == 2
    _steady(after, 1)


def test_kernel_takes_its_sizes(kernels: list[str]) -> None:
    """The symbolic graph's Triton kernel: sizes as (unspecialized) arguments, masks and
    the row loop bounded by them, no size baked in; a row in one block when the launcher's
    RBLOCK covers the call's rows (ONE_BLOCK), else looped."""
    del kernels
    compiler.reset()
    sources: list[str] = []
    generate = inductor.targets.generate_triton_kernel

    def keep(*args: Any, **kwargs: Any) -> Any:
        kernel = generate(*args, **kwargs)
        sources.append(kernel.source)
        return kernel

    fn = compiler.compile(lambda x: x.softmax(-1) * 2, backend="inductor", dynamic=True)
    with pytest.MonkeyPatch.context() as patch, inductor.config.patch(OPTIONS):
        patch.setattr(inductor.targets, "generate_triton_kernel", keep)
        x = torch.randn(5, 37)
        torch.testing.assert_close(fn(x), x.softmax(-1) * 2)
    (source,) = sources
    head = next(line for line in source.splitlines() if line.startswith("def triton_"))
    sizes = [a.strip() for a in head[head.index("(") + 1:].split(",")
             if a.strip().startswith("s")]
    assert len(sizes) == 2, head
    assert all(s in source.split("do_not_specialize=")[1].splitlines()[0] for s in sizes)
    assert any(f"range(0, {s}, RBLOCK)" in source for s in sizes), source
    assert "if ONE_BLOCK:" in source  # NOTE: short rows in one block, long ones looped
    assert "37" not in source and "5," not in head
