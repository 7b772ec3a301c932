"""Views as index rewrites, cat/pad, tensor indexing, dtypes, random ops."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tests_inductor_support import run_and_compare


def test_view_heavy() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x.permute(0, 2, 1).reshape(4, -1)[:, 2:10:3]
        z = x.transpose(1, 2).unsqueeze(0).expand(2, 4, 6, 5).sum(0)
        return y * 2, z + 1, x[1].t().contiguous(), x.select(2, 3).squeeze()

    run_and_compare(f, [torch.randn(4, 5, 6)])


def test_views_returned_alias() -> None:
    run_and_compare(lambda x: (x.view(2, 3, 4), x.t()), [torch.randn(6, 4)])


def test_reshape_of_computed() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = (x.transpose(1, 2) + 1).reshape(3, 20)
        return y.view(3, 4, 5).sum(-1)

    run_and_compare(f, [torch.randn(3, 5, 4)])


def test_cat_and_pad() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.cat([a, b * 2, a + 1], 1), F.pad(a, (1, 2, 0, 3), value=-1.0)

    run_and_compare(f, [torch.randn(3, 4), torch.randn(3, 5)])


def test_index_gather_embedding() -> None:
    w = torch.randn(10, 8)
    idx = torch.tensor([[1, 9, -1], [0, 3, 3]])

    def f(w: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (F.embedding(idx.abs(), w), w[idx], torch.gather(w, 1, idx.abs() % 8),
                w.index_select(0, idx[0].abs()), w[:, idx[1]])

    run_and_compare(f, [w, idx])


def test_where_masked_fill_compare() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.where(x > y, x, y * 0.5), x.masked_fill(x < 0, 3.0),
                (x == y) | (x > 1), torch.isnan(x.log()))

    run_and_compare(f, [torch.randn(6, 7), torch.randn(7)])


def test_dtypes_half_bf16_int() -> None:
    def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (a * 2 + 1, (b.exp() + 1).sum(-1), (c * 3) // 2, c.float() / 3,
                a.to(torch.float32).sum(), c % 5, -c)

    a = torch.randn(5, 33).half()
    b = torch.randn(5, 33).bfloat16()
    c = torch.randint(-50, 50, (5, 33), dtype=torch.int32)
    run_and_compare(f, [a, b, c], atol=1e-2, rtol=1e-2)


def test_float64() -> None:
    run_and_compare(lambda x: (x.sin() * x.cos()).sum(0), [torch.randn(9, 3, dtype=torch.float64)])


def test_constructors() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x + torch.arange(7), torch.ones_like(x) * 3, torch.zeros(2, 3),
                torch.full((4,), 2.5) + x[0, :4])

    run_and_compare(f, [torch.randn(3, 7)])


def test_random_distribution() -> None:
    from aten_trace import trace_aten
    from inductor import compile_aten

    gm = trace_aten(lambda x: (torch.rand_like(x), torch.randn_like(x),
                               F.dropout(x, 0.25, True)), [torch.ones(200, 500)])
    c = compile_aten(gm, [torch.ones(200, 500)])
    u, n, d = c(torch.ones(200, 500))
    u2, _, _ = c(torch.ones(200, 500))
    assert not torch.equal(u, u2)
    assert 0.49 < u.mean().item() < 0.51 and u.min() >= 0 and u.max() < 1
    assert abs(n.mean().item()) < 0.02 and 0.98 < n.std().item() < 1.02
    kept = (d != 0).float().mean().item()
    assert 0.73 < kept < 0.77
    assert torch.allclose(d[d != 0], torch.full_like(d[d != 0], 1 / 0.75))


def test_extern_matmul_and_fallback() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(x @ w + 1)
        return y, torch.cumsum(y, 1), torch.sort(y, 1)[0]

    c = run_and_compare(f, [torch.randn(8, 16), torch.randn(16, 12)], atol=1e-4, rtol=1e-4)
    assert c.extern_calls


def test_slice_and_select_scatter() -> None:
    def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.slice_scatter(x, a, 1, 2, 8, 2), torch.slice_scatter(x, b, 0, 1, 3),
                torch.select_scatter(x, a[:, 0] * 2, 1, -1))

    x = torch.randn(4, 9)
    run_and_compare(f, [x, torch.randn(4, 3), torch.randn(2, 9)])


def test_clamped_loops_split() -> None:
    # NOTE: cat, pad and slice_scatter along the innermost dim clamp their loads; the
    # innermost loop is split where the clamps change, and each piece must stay exact
    def f(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x.tanh()
        return (torch.cat([a.sigmoid(), b * 2], 1), F.pad(a, (3, 5), value=-1.0),
                torch.slice_scatter(y, y[:, :8] * 0.5, 1, 0, 8),
                torch.cat([a, b, a + 1, b - 1], 1))

    compiled = run_and_compare(f, [torch.randn(64, 40), torch.randn(64, 24),
                                   torch.randn(64, 128)])
    source = "\n".join(k.source for k in compiled.kernels)
    assert "x1 = 8; x1 < 128" in source  # slice_scatter: the untouched columns
    compiled = run_and_compare(lambda a, b: torch.cat([a.sigmoid(), b * 2], 1) + 1,
                               [torch.randn(64, 40), torch.randn(64, 24)])
    source = "\n".join(k.source for k in compiled.kernels)
    assert "x1 = 40; x1 < 64" in source  # the cat's second part in its own loop
    compiled = run_and_compare(lambda a: F.pad(a, (3, 5), value=-1.0).relu(),
                               [torch.randn(64, 40)])
    source = "\n".join(k.source for k in compiled.kernels)
    assert "x1 = 3; x1 < 43" in source and "x1 = 43; x1 < 48" in source


def test_flip_is_a_fused_index_reversal() -> None:
    # NOTE: cumsum's backward is flip, cumsum, flip: the flips were extern copies.
    x = torch.randn(3, 4, 5)
    compiled = run_and_compare(lambda t: (t.flip(0) * 2, t.flip([-1, 1]).sum(1),
                                          t.transpose(0, 2).flip(1)), [x])
    assert "flip" not in compiled.output_code()
    run_and_compare(lambda t: (t.flip(0), t.flip(1)), [torch.arange(12).reshape(3, 4)])
    run_and_compare(lambda t: t.flip(1), [torch.rand(3, 4) > 0.5])
    run_and_compare(lambda t: t.flip(0), [torch.randn(0, 3)])
