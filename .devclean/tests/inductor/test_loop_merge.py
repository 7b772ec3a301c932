"""Loop merging on the C++ target (`scheduler/loop_merge.py`): adjacent loops that every
index walks as one run as one loop; loops that some index walks otherwise stay apart."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from tests_inductor_support import run_and_compare


def _loops(source: str) -> list[int]:
    return [int(n) for n in re.findall(r"for \(int64_t \w+ = 0; \w+ < (\d+); \+\+\w+\)", source)]


def test_batch_norm_runs_over_whole_planes() -> None:
    x, w, b = torch.randn(4, 8, 28, 28), torch.randn(8), torch.randn(8)
    compiled = run_and_compare(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b],
        atol=1e-5, rtol=1e-5)
    loops = _loops(compiled.output_code())
    assert 784 in loops and 28 not in loops, loops


def test_per_channel_pointwise_merges_batch_and_planes_apart_from_channels() -> None:
    x, s = torch.randn(4, 8, 6, 5), torch.randn(1, 8, 1, 1)
    compiled = run_and_compare(lambda x, s: (x * s).relu(), [x, s])
    loops = _loops(compiled.output_code())
    assert loops == [4, 8, 30], loops


def test_fully_contiguous_chain_is_one_loop() -> None:
    x, y = torch.randn(3, 7, 11), torch.randn(3, 7, 11)
    compiled = run_and_compare(lambda x, y: torch.sigmoid(x) * y + 1, [x, y])
    assert _loops(compiled.output_code()) == [231]


def test_transposed_and_strided_reads_keep_their_loops() -> None:
    x, y = torch.randn(6, 10), torch.randn(10, 6)
    compiled = run_and_compare(lambda x, y: x + y.t(), [x, y])
    assert 60 not in _loops(compiled.output_code())
    z = torch.randn(6, 20)
    # NOTE: the read's row stride (20) is not the row length (10): the loops stay apart
    compiled = run_and_compare(lambda z: z[:, :10] * 2, [z])
    assert _loops(compiled.output_code()) == [6, 10]
    # NOTE: every other element of the whole storage: one loop with stride 2
    compiled = run_and_compare(lambda z: z[:, ::2] * 2, [z])
    assert _loops(compiled.output_code()) == [60]


def test_index_values_and_broadcasts_block_a_merge() -> None:
    x = torch.randn(5, 9)
    # an iota over the rows only (the row index is a value, not a contiguous walk)
    compiled = run_and_compare(
        lambda x: x + torch.arange(5, dtype=torch.float32).unsqueeze(1), [x])
    assert _loops(compiled.output_code()) == [5, 9]
    # a mask from comparing the row index with the column index (tril)
    compiled = run_and_compare(lambda x: torch.tril(x) * 3, [x])
    assert _loops(compiled.output_code()) == [5, 9]


def test_reduction_over_merged_rows_matches_eager() -> None:
    x = torch.randn(3, 16, 7, 9)
    compiled = run_and_compare(
        lambda x: (x.sum((0, 2, 3)), x.amax((2, 3)), x.var((0, 2, 3)), F.softmax(x, -1)), [x],
        atol=1e-4, rtol=1e-5)
    assert 63 in _loops(compiled.output_code())
