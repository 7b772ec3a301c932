"""Training steps whose loss is `out.sum()` outside the compiled program: the backward gets
a broadcast-scalar gradient and runs a variant compiled for it (`aotgrad.scalar_tangents`),
on both CPU targets, with eager's gradients; with dynamic sizes the gradient is copied to a
tensor as before."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from tests_inductor_support import needs_compiler

PROGRAMS: dict[str, tuple[Any, list[tuple[int, ...]]]] = {
    "elu": (lambda x: F.elu(x), [(64, 96)]),
    "layer_norm": (lambda x, w: F.layer_norm(x, (96,), w), [(64, 96), (96,)]),
    "softmax + matmul": (lambda x, w: torch.softmax(x @ w, -1), [(32, 24), (24, 40)]),
    "conv + relu": (lambda x, w: F.relu(F.conv2d(x, w, padding=1)), [(2, 3, 8, 8), (4, 3, 3, 3)]),
    "returns its input view": (lambda x: x.t() * 1.0, [(5, 7)]),
}


@needs_compiler
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sum_backward_matches_eager(name: str, target: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import aotgrad.runtime
    import compiler

    made: list[object] = []
    original = aotgrad.runtime.scalar_tangent_backward

    def spy(*args: Any) -> Any:
        made.append(original(*args))
        return made[-1]

    monkeypatch.setattr(aotgrad.runtime, "scalar_tangent_backward", spy)
    fn, shapes = PROGRAMS[name]
    torch.manual_seed(0)
    args = [torch.randn(s) for s in shapes]
    compiled = compiler.compile(fn, backend="inductor", options={"cpu_backend": target})
    for step in range(2):
        leaves = [a.clone().requires_grad_() for a in args]
        compiled(*leaves).sum().backward()
        ref = [a.clone().requires_grad_() for a in args]
        fn(*ref).sum().backward()
        for got, want in zip(leaves, ref):
            assert got.grad is not None and want.grad is not None
            torch.testing.assert_close(got.grad, want.grad, atol=1e-5, rtol=1e-5,
                                       msg=lambda m, s=step: f"call {s}: {m}")
            assert got.grad.stride() == want.grad.stride()
    assert len(made) == 1 and made[0] is not None  # the variant, made once
    compiler.reset()


@needs_compiler
def test_dynamic_sizes_copy_the_gradient() -> None:
    import compiler

    compiled = compiler.compile(lambda x: x.exp() * 2, backend="inductor", dynamic=True)
    for n in (5, 9, 13):
        x = torch.randn(n, 3, requires_grad=True)
        compiled(x).sum().backward()
        assert x.grad is not None
        torch.testing.assert_close(x.grad, 2 * x.detach().exp())
    compiler.reset()
