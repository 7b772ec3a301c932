"""Backwards for broadcast-scalar gradients (`aotgrad.scalar_tangents`): `out.sum()` hands
the backward one value expanded to `out`'s shape (`out.mean()` a tensor autograd divided); a variant of the backward
compiled for that zero-stride tangent gives eager's gradients, is compiled once per set of
such tangents, and other gradients still go to the plain backward."""

from __future__ import annotations

from typing import Any

import aotgrad
import pytest
import torch
from aotgrad.scalar_tangents import expanded_scalar
from torch import fx


class _Recorder:
    """A compiler that runs graphs as they are and records the tangent strides it saw."""

    def __init__(self) -> None:
        self.compiled: list[list[tuple[int, ...]]] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.compiled.append([tuple(e.stride()) for e in example_inputs
                              if isinstance(e, torch.Tensor)])
        return gm


def _grads(fn: Any, args: list[torch.Tensor], reduce: Any) -> list[torch.Tensor]:
    leaves = [a.detach().clone().requires_grad_() for a in args]
    outs = fn(*leaves)
    reduce(outs).backward()
    return [leaf.grad for leaf in leaves]  # type: ignore[misc]


CASES: dict[str, tuple[Any, list[tuple[int, ...]]]] = {
    "pointwise": (lambda x: (torch.nn.functional.elu(x) * 2,), [(8, 16)]),
    "identity-like": (lambda x: (x * 1.0,), [(4, 5)]),
    "reduction": (lambda x: (torch.softmax(x, -1),), [(6, 7)]),
    "matmul": (lambda x, w: (x @ w,), [(5, 3), (3, 4)]),
    "two outputs": (lambda x: (x.sin(), x.cos() * 3), [(3, 4)]),
}


@pytest.mark.parametrize("reduce_name", ["sum", "mean", "sum of first"])
@pytest.mark.parametrize("case", list(CASES))
def test_broadcast_gradients_match_eager(case: str, reduce_name: str) -> None:
    fn, shapes = CASES[case]
    reduce = {"sum": lambda outs: sum(o.sum() for o in outs),
              "mean": lambda outs: sum(o.mean() for o in outs),
              "sum of first": lambda outs: outs[0].sum()}[reduce_name]
    torch.manual_seed(0)
    args = [torch.randn(s) for s in shapes]
    recorder = _Recorder()
    compiled = aotgrad.aot_function(fn, recorder, recorder)
    for _ in range(2):
        got = _grads(compiled, args, reduce)
        want = _grads(fn, args, reduce)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    # the forward and one backward, nothing more (the second call reuses it); `sum`'s
    # gradient is a broadcast scalar, `mean`'s a tensor autograd divided already
    assert len(recorder.compiled) == 2, recorder.compiled
    broadcast = any(0 in strides for strides in recorder.compiled[1])
    assert broadcast == (reduce_name != "mean")


def test_other_gradients_use_the_plain_backward() -> None:
    recorder = _Recorder()
    compiled = aotgrad.aot_function(lambda x: (x.exp(),), recorder, recorder)
    x = torch.randn(4, 6, requires_grad=True)
    (out,) = compiled(x)
    out.backward(torch.ones(4, 6) * 2)  # a real tensor: the plain backward
    torch.testing.assert_close(x.grad, 2 * x.detach().exp())
    assert [(6, 1), (6, 1)] in recorder.compiled  # saved exp and a contiguous tangent
    x.grad = None
    (out,) = compiled(x)
    out.sum().backward()  # broadcast: the variant
    torch.testing.assert_close(x.grad, x.detach().exp())
    assert [(6, 1), (0, 0)] in recorder.compiled


def test_expanded_scalar() -> None:
    assert expanded_scalar(torch.ones(()).expand(3, 4))
    assert not expanded_scalar(torch.ones(3, 4))
    assert not expanded_scalar(torch.ones(()).expand(1, 1))  # one element: nothing to gain
    assert not expanded_scalar(torch.ones(3, 1).expand(3, 4))  # one dimension broadcast
    assert not expanded_scalar(torch.ones(()))
    # CPU only for now (scalar_tangents' NOTE): other devices copy the gradient as before
    assert not expanded_scalar(torch.ones((), device="meta").expand(3, 4))
