"""The inline-vs-store choice for a pointwise value with several users
(`LoweringContext.maybe_realize_shared`): a value that reads its input with a stride along
its innermost dimension is stored once, so no user gathers it again."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from inductor import CompiledGraph
from inductor.ir.loop_body import LoopBody, record_pointwise
from inductor.ir.ops import ops
from inductor.lowering.context import strided_inner_read
from inductor.scheduler.fusion import FusedGroup
from inductor.sizevars import Expr
from tests_inductor_support import run_and_compare


def _loads_of(compiled: CompiledGraph, name: str) -> int:
    """How many loads of buffer `name` the generated kernels' bodies hold."""
    count = 0
    for step in compiled.steps:
        if isinstance(step, FusedGroup):
            for node in step.nodes:
                assert node.body is not None
                count += sum(1 for buf, _ in node.body.reads() if buf == name)
    return count


def _embedding(x: torch.Tensor, cls: torch.Tensor, pos: torch.Tensor, w: torch.Tensor,
               b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ViT's patch embedding (class token, then the transposed patches, plus positions),
    its layer norm and the residual add that reads the embedding again."""
    h = torch.cat([cls.expand(x.shape[0], 1, -1), x.transpose(1, 2)], 1) + pos
    n = F.layer_norm(h, (h.shape[-1],), w, b)
    return n, h + n


def _embedding_inputs(channels_first: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shape = (4, 32, 16) if channels_first else (4, 16, 32)
    x = torch.randn(*shape, generator=gen)
    return [x, torch.randn(1, 1, 32, generator=gen), torch.randn(1, 17, 32, generator=gen),
            torch.randn(32, generator=gen), torch.randn(32, generator=gen)]


def test_transposed_shared_value_is_read_once() -> None:
    """The embedding gathers `x` (stride 16 along its last dimension): stored once, its
    layer norm's passes and the residual add read the stored copy, not `x`."""
    compiled = run_and_compare(_embedding, _embedding_inputs(True), atol=1e-5, rtol=1e-4)
    assert _loads_of(compiled, "arg0") == 1


def test_contiguous_shared_value_stays_inlined() -> None:
    """The same program on contiguous patches: a cheap value read with unit steps is still
    inlined into its users (each reads `x` itself), not stored."""
    def f(x: torch.Tensor, cls: torch.Tensor, pos: torch.Tensor, w: torch.Tensor,
          b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.cat([cls.expand(x.shape[0], 1, -1), x], 1) + pos
        n = F.layer_norm(h, (h.shape[-1],), w, b)
        return n, h + n

    compiled = run_and_compare(f, _embedding_inputs(False), atol=1e-5, rtol=1e-4)
    assert _loads_of(compiled, "arg0") > 1


def test_channels_last_shared_value_stays_inlined() -> None:
    """A channels-last input steps by C along W, but the value is stored channels-last as
    eager has it, where the read is contiguous: storing it would copy the input unchanged
    (batch norm's `to(float32)` of a convolution's output was copied so after every
    convolution of a small CNN), so it stays inlined."""
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x + 1
        return y.sum((0, 2, 3)), y * 2

    x = torch.randn(2, 8, 5, 6).contiguous(memory_format=torch.channels_last)
    compiled = run_and_compare(f, [x], atol=1e-5, rtol=1e-5)
    assert _loads_of(compiled, "arg0") == 2


def _body_reading(index: Callable[[Expr, Expr], Expr]) -> LoopBody:
    """The loop body of a (4, 8) value that loads buffer `x` at `index(i, j)`."""
    def body(idx: list[Expr]) -> None:
        ops.store("out", idx[0] * 8 + idx[1], ops.load("x", index(idx[0], idx[1])))

    return record_pointwise([4, 8], body, lambda name: torch.float32)


def test_strided_inner_read_predicate() -> None:
    contiguous = _body_reading(lambda i, j: 8 * i + j)
    broadcast = _body_reading(lambda i, j: i)
    reversed_ = _body_reading(lambda i, j: 8 * i + 7 - j)
    transposed = _body_reading(lambda i, j: i + 4 * j)
    assert not strided_inner_read(contiguous, contiguous.index_vars[-1])
    assert not strided_inner_read(broadcast, broadcast.index_vars[-1])
    assert not strided_inner_read(reversed_, reversed_.index_vars[-1])
    assert strided_inner_read(transposed, transposed.index_vars[-1])
    # NOTE: along its first dimension the transposed read steps by 1: a value stored with
    # that dimension contiguous reads it contiguously
    assert not strided_inner_read(transposed, transposed.index_vars[0])
