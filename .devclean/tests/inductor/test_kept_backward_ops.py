"""Backward ops kept as ATen's own kernels where torch's decompositions make them an
accumulating index_put (2-6x slower on the CPU, ~17x on a GPU): the embedding backward and
index_select's index_add; gradients against eager."""

from __future__ import annotations

import torch
from inductor.decompositions import decomposition_table
from tests_inductor_support import needs_compiler
from triton_support import DEVICE

aten = torch.ops.aten


def test_the_embedding_backward_and_index_add_are_kept_whole() -> None:
    table = decomposition_table()
    assert aten.embedding_dense_backward.default not in table
    assert aten.index_add.default not in table


@needs_compiler
def test_embedding_training_matches_eager_with_repeated_and_padding_rows() -> None:
    import compiler

    torch.manual_seed(0)
    for padding_idx in (None, 2):
        emb = torch.nn.Embedding(50, 16, padding_idx=padding_idx).to(DEVICE)
        ref = torch.nn.Embedding(50, 16, padding_idx=padding_idx).to(DEVICE)
        ref.load_state_dict(emb.state_dict())
        idx = torch.tensor([[2, 7, 7, 7], [0, 2, 49, 7]], device=DEVICE)

        def step(m: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
            return (m(idx) * torch.arange(16.0, device=DEVICE)).sum()

        compiled = compiler.compile(step, backend="inductor")
        compiled(emb, idx).backward()
        step(ref, idx).backward()
        assert emb.weight.grad is not None and ref.weight.grad is not None
        torch.testing.assert_close(emb.weight.grad, ref.weight.grad)
        assert ref.weight.grad[7].abs().sum() > 0
        compiler.reset()


@needs_compiler
def test_index_select_training_matches_eager_with_repeated_rows() -> None:
    import compiler

    torch.manual_seed(0)
    idx = torch.tensor([3, 0, 3, 7, 3, 9], device=DEVICE)
    x = torch.randn(10, 5, device=DEVICE, requires_grad=True)

    def step(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return (x.index_select(0, idx) * torch.arange(5.0, device=DEVICE)).sum()

    compiler.compile(step, backend="inductor")(x, idx).backward()
    got, x.grad = x.grad, None
    step(x, idx).backward()
    torch.testing.assert_close(got, x.grad)
    compiler.reset()
