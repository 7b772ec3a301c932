"""Split reductions on the Triton target (`codegen/triton_split.py`): a full reduction of a
big tensor, or a few hundred long rows (batch-norm statistics), as partials over chunks then
a final kernel; each kind of reduction against eager, ties and NaN across chunks, Welford's
variance, the epilogue in the final kernel, and the error of a million-element sum against
float64 within 2x of eager's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from inductor.codegen import triton_split
from triton_support import DEVICE, check, compile_triton, randn, triton_kernels


@pytest.fixture
def short_split(monkeypatch: Any) -> None:
    """Rows of 2048 and more split, in chunks of 512 (the interpreter is slow)."""
    monkeypatch.setattr(triton_split, "SPLIT_MIN_RNUMEL", 2048)
    monkeypatch.setattr(triton_split, "SPLIT_CHUNK", 512)


def test_every_kind_of_full_reduction_splits_into_one_kernel_pair(short_split: None) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.sum(), x.mean() * 2 + 1, x.amax(), x.amin(), x.argmax(), x.argmin(),
                (x > 4.5).any(), (x > -9).all(), (x * x).sum(), (x * 1e-3 + 1).prod())

    x = randn(60, 71)
    x[3, 7] = -7.0
    compiled = check(f, [x], rtol=1e-4, atol=1e-4)
    ks = triton_kernels(compiled)
    assert len(ks) == 1 and ks[0].split > 1, [(k.split, k.xnumel) for k in ks]
    assert f"def {ks[0].name}_final(" in ks[0].source


def test_ties_and_nan_across_chunks_and_long_rows(short_split: None) -> None:
    x = torch.zeros(3, 4000, device=DEVICE)
    x[:, 5] = x[:, 3900] = 2.0  # NOTE: the same maximum in the first and the last chunk
    x[:, 100] = x[:, 3000] = -2.0
    x[2, 2000] = float("nan")
    compiled = check(lambda v: (v.argmax(-1), v.argmin(-1), v.amax(-1), v.sum(-1) + 1),
                     [x])
    assert [k.split > 1 for k in triton_kernels(compiled)] == [True]


def test_a_variance_splits_through_welford_and_other_two_pass_groups_do_not(
        short_split: None) -> None:
    compiled = check(lambda v: torch.var_mean(v), [randn(4000) * 2 + 3], rtol=1e-4,
                     atol=1e-4)
    ks = triton_kernels(compiled)
    assert len(ks) == 1 and ks[0].split > 1 and "_welford" in ks[0].source
    compiled = check(lambda v: torch.softmax(v, 0), [randn(4000)], rtol=1e-4, atol=1e-5)
    assert all(k.split == 1 for k in triton_kernels(compiled))


@pytest.mark.parametrize("channels_last", [False, True])
def test_batch_norm_statistics_split_over_many_rows(short_split: None,
                                                    channels_last: bool) -> None:
    w, b = randn(16), randn(16)
    x = randn(8, 16, 20, 20) * 0.5 + 3
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)

    def f(v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.ops.aten.native_batch_norm(v, w, b, None, None, True, 0.1, 1e-5)

    compiled = check(f, [x], atol=1e-4, rtol=1e-4)
    stats = [k for k in triton_kernels(compiled) if k.reduction]
    assert len(stats) == 1 and stats[0].split > 1 and stats[0].xnumel == 16, \
        [(k.split, k.xnumel) for k in stats]


@pytest.mark.skipif(DEVICE != "cpu", reason="the float64 reference runs on the CPU")
def test_a_million_element_sum_is_as_exact_as_eager() -> None:
    g = torch.Generator().manual_seed(3)
    xs = [torch.rand(1_000_000, generator=g) for _ in range(2)]
    ours = eager = 0.0
    for fn in (lambda t: t.sum(), lambda t: t.mean()):
        compiled = compile_triton(fn, [xs[0]])
        assert triton_kernels(compiled)[0].split > 1
        for x in xs:
            ref = fn(x.double())
            ours += (compiled(x)[0].double() - ref).abs().item() / ref.abs().item()
            eager += (fn(x).double() - ref).abs().item() / ref.abs().item()
    assert ours <= 2 * eager, (ours, eager)


def test_gpu_candidates_follow_the_rows_layout() -> None:
    # NOTE: generated for a GPU (not launched): batch-norm statistics over 64 channels of
    # 32x56x56, NCHW (each row contiguous) and channels-last (rows adjacent in memory)
    from aten_trace import trace_aten
    from inductor import config
    from inductor.pipeline import plan
    from inductor.scheduler.fusion import FusedGroup

    w, b = torch.randn(64), torch.randn(64)
    widths = []
    for channels_last in (False, True):
        x = torch.randn(32, 64, 56, 56)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)

        def f(v: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return torch.ops.aten.native_batch_norm(v, w, b, None, None, True, 0.1, 1e-5)

        with config.patch(cpu_backend="triton"):
            p = plan(trace_aten(f, [x]), [x])
        groups = [g for g in p.steps if isinstance(g, FusedGroup) and g.has_reduction()]
        assert len(groups) == 1
        k = triton_split.generate_triton_kernel(groups[0], p.ctx.buffers, interpret=False)
        assert k.split > 1 and k.xnumel == 64 and "_welford" in k.source
        widths.append(max(xb for xb, _, _ in k.configs))
        # NOTE: the GPU is filled whatever block of rows the tuner picks (the channels-last
        # split ran 14 programs before: chunks of 4096 elements, rows in blocks of 64)
        programs = [k.split * -(-64 // xb) for xb, _, _ in k.configs]
        assert min(programs) >= 256, (k.split, k.configs)
    assert widths[0] <= 8 < widths[1], widths


def test_gpu_chunks_fill_the_gpu_and_bound_the_partials() -> None:
    # NOTE: ResNet-50's batch-norm weight gradient, 128 channels of 32x28x28 channels-last
    chunk = triton_split.gpu_chunk(25088, 128, 64, 128)
    split = -(-25088 // chunk)
    assert chunk % 128 == 0 and split * 2 >= 256, (chunk, split)
    # NOTE: one row of 2^26: at most MAX_SPLIT partials; one of 2^14: chunks of 4096
    assert -(-(1 << 26) // triton_split.gpu_chunk(1 << 26, 1, 1, 2048)) <= triton_split.MAX_SPLIT
    assert triton_split.gpu_chunk(1 << 14, 1, 1, 2048) == 4096
    assert triton_split.gpu_chunk(4000, 1, 1, 2048) == 2048  # NOTE: two chunks, at least


def test_a_gpu_row_of_one_block_is_not_split(short_split: None) -> None:
    # NOTE: generated for a GPU (not launched): rows of 2048 and 4000 with blocks of 2048;
    # a split of one chunk was generated with workspaces its launch did not pass
    from aten_trace import trace_aten
    from inductor import config
    from inductor.pipeline import plan
    from inductor.scheduler.fusion import FusedGroup

    splits = []
    for n in (2048, 4000):
        x = torch.randn(n)
        with config.patch(cpu_backend="triton"):
            p = plan(trace_aten(lambda v: torch.var_mean(v), [x]), [x])
        group = next(g for g in p.steps if isinstance(g, FusedGroup) and g.has_reduction())
        k = triton_split.generate_triton_kernel(group, p.ctx.buffers, interpret=False)
        splits.append((k.split, "ws_n" in k.source))
    assert splits == [(1, False), (2, True)], splits



@pytest.fixture
def small_columns(monkeypatch: Any) -> None:
    """Column splits from 2^12 elements (the interpreter is slow)."""
    monkeypatch.setattr(triton_split, "COLUMN_MIN_ELEMENTS", 1 << 12)
    monkeypatch.setattr(triton_split, "COLUMN_MIN_RNUMEL", 64)


def test_column_reductions_split_and_equal_eager(small_columns: None) -> None:
    """A bias gradient and layer norm's weight gradient (`[N, C] -> [C]`, C adjacent in
    memory) split into chunks of rows; a row-major reduction of the same tensor does not."""
    g, x = randn(300, 48), randn(300, 48)
    mean = x.mean(-1, keepdim=True)

    def f(go: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return go.sum(0), (go * (v - m)).sum(0), (go * 2).amax(0), go * 3

    compiled = check(f, [g, x, mean], rtol=1e-4, atol=1e-4)
    ks = [k for k in triton_kernels(compiled) if k.reduction]
    assert ks and all(k.split > 1 and k.xnumel == 48 for k in ks), \
        [(k.split, k.xnumel) for k in ks]
    compiled = check(lambda v: v.sum(-1), [randn(48, 300)], rtol=1e-4, atol=1e-4)
    assert all(k.split == 1 for k in triton_kernels(compiled))
    compiled = check(lambda v: v.t().sum(0), [randn(48, 300)], rtol=1e-4, atol=1e-4)
    assert all(k.split == 1 for k in triton_kernels(compiled))


def test_column_chunks_fill_the_gpu() -> None:
    chunk = triton_split.column_chunk(2048, 768, 128)
    split = -(-2048 // chunk)
    assert chunk % 128 == 0 and split * -(-768 // 64) >= 128, (chunk, split)
    assert triton_split.column_chunk(300, 8192, 32) >= 32
