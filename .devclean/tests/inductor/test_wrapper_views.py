"""The generated wrapper's views and extern calls: transposed inputs become `.t()` /
`.permute()` (right for any storage offset), views of the wrapper's own buffers a direct
`as_strided`, matmuls go through torch's bindings; results equal eager's."""

from __future__ import annotations

import aotgrad
import torch
from aten_trace import trace_aten
from inductor.pipeline import compile_aten


def test_transposed_inputs_are_permutes_and_match_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.addmm(b, x, w.t()).relu()
        return torch.bmm(h.unsqueeze(0), y.permute(0, 2, 1)) * 2

    torch.manual_seed(0)
    x, w, b, y = torch.randn(8, 16), torch.randn(32, 16), torch.randn(32), torch.randn(1, 4, 32)
    gm = trace_aten(f, [x, w, b, y])
    compiled = compile_aten(gm, [x, w, b, y])
    source = compiled.wrapper_source
    assert "arg1.t()" in source and "arg3.permute([0, 2, 1])" in source, source
    (out,) = compiled(x, w, b, y)
    torch.testing.assert_close(out, f(x, w, b, y))
    # NOTE: the same layouts at a non-zero storage offset: a permute keeps the offset.
    w_off = torch.randn(32 * 16 + 5)[5:].view(32, 16)
    y_off = torch.randn(4 * 32 + 3)[3:].view(1, 4, 32)
    (out_off,) = compiled(x, w_off, b, y_off)
    torch.testing.assert_close(out_off, f(x, w_off, b, y_off))


def test_views_of_own_buffers_and_outputs_match_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = (x * 2).sigmoid()
        return h.t() @ w, h.sum(0)

    torch.manual_seed(0)
    x, w = torch.randn(64, 32), torch.randn(64, 8)
    gm = trace_aten(f, [x, w])
    compiled = compile_aten(gm, [x, w])
    got = compiled(x, w)
    for g, e in zip(got, f(x, w)):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()


def test_training_through_direct_externs_and_double_backward() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    compiled = aotgrad.aot_module(layer, compile_aten, compile_aten, partition_fn="min_cut")
    out = compiled(x)
    out.square().sum().backward()
    got = [p.grad.clone() for p in layer.parameters()]  # type: ignore[union-attr]
    layer.zero_grad()
    layer(x).square().sum().backward()
    for g, p in zip(got, layer.parameters()):
        torch.testing.assert_close(g, p.grad)
    # NOTE: create_graph=True (a gradient penalty): the second-order terms are eager's.
    params = list(layer.parameters())
    seed = torch.ones(8, 4, requires_grad=True)
    grads = torch.autograd.grad(compiled(x), params, seed, create_graph=True)
    seed_e = torch.ones(8, 4, requires_grad=True)
    expected = torch.autograd.grad(layer(x), params, seed_e, create_graph=True)
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e)
    sum(g.square().sum() for g in grads).backward()  # type: ignore[union-attr]
    sum(e.square().sum() for e in expected).backward()  # type: ignore[union-attr]
    torch.testing.assert_close(seed.grad, seed_e.grad)


def test_a_freed_buffer_is_taken_over_in_other_sizes_of_the_same_extent() -> None:
    """The memory plan pools freed buffers by dtype and extent of memory: a `[8, 4]` buffer
    takes over a freed `[4, 8]` one, reinterpreted in its own sizes and strides."""
    def f(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        h = (x + 1).relu() @ w1  # NOTE: [4, 8] written by a kernel, freed after the matmul
        g = (h.t() * 2).contiguous()  # NOTE: [8, 4], the same 32 elements
        return g @ w2

    torch.manual_seed(0)
    x, w1, w2 = torch.randn(4, 8), torch.randn(8, 8), torch.randn(4, 3)
    gm = trace_aten(f, [x, w1, w2])
    compiled = compile_aten(gm, [x, w1, w2])
    source = compiled.wrapper_source
    assert "take_over(" in source and "# reuse" in source, source
    (out,) = compiled(x, w1, w2)
    torch.testing.assert_close(out, f(x, w1, w2))


def test_an_output_taking_over_a_freed_buffer_is_not_a_view() -> None:
    """A returned buffer may take over a dead one's memory; it is a tensor of its own (a view
    would carry the dead buffer as its base into autograd's view rules)."""
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = (x + 1).relu() @ w  # NOTE: [4, 8] freed after the matmul
        return h, (h.t() * 2).contiguous()  # NOTE: [8, 4] returned, over the freed memory

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiled = compile_aten(trace_aten(f, [x, w]), [x, w])
    assert "take_over(" in compiled.wrapper_source, compiled.wrapper_source
    _h, g = compiled(x, w)
    assert not g._is_view() and g._base is None
    torch.testing.assert_close(g, f(x, w)[1])
    g.add_(1)  # NOTE: its own tensor: in-place use is the caller's business
    torch.testing.assert_close(g, f(x, w)[1] + 1)


def test_a_freed_matmul_output_is_taken_over_by_a_kernel_output() -> None:
    """A matmul's output (a fresh row-major tensor) goes to the pool once dead: a later
    kernel output of the same extent takes over its memory instead of allocating."""
    def f(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
          w3: torch.Tensor) -> torch.Tensor:
        h = x @ w1  # NOTE: [8, 16] from mm, dead after the sum
        y = (h * 2).sum(0, keepdim=True) @ w2  # NOTE: [1, 16]
        return w3 + y  # NOTE: [8, 16], allocated after h died: h's memory

    torch.manual_seed(0)
    x, w1, w2, w3 = torch.randn(8, 4), torch.randn(4, 16), torch.randn(16, 16), torch.randn(8, 16)
    gm = trace_aten(f, [x, w1, w2, w3])
    compiled = compile_aten(gm, [x, w1, w2, w3])
    source = compiled.wrapper_source
    mm_out = source.split(" = ", 2)[0].split()[-1]  # NOTE: the first line's buffer: x @ w1
    assert f"= {mm_out}; del {mm_out}  # reuse" in source, source
    for _ in range(2):
        (out,) = compiled(x, w1, w2, w3)
        torch.testing.assert_close(out, f(x, w1, w2, w3))
