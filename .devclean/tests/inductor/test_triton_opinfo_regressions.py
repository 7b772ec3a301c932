"""Regressions of the Triton target found by the OpInfo conformance run on a GPU (issue 12):
each reproduces on CPU tensors through Triton's interpreter, against eager.

- A reduction over a size-1 (or empty) dim fused beside nodes over longer rows reduced the
  group's whole r block: the element counted once per lane (multilabel_soft_margin_loss
  5x too big, nanquantile's index out of bounds), and loads and stores of such a node ran
  past its buffer.
- A reduction over no elements (prod of an empty tensor) read element 0 of an empty buffer.
- cat with a part empty along the cat dim loaded (clamped to index 0) from the empty part.
- One kernel source served buffers of different dtypes (a copy of an int64 and of a
  float32 tensor): a GPU binary, and the launcher's fast path, are for one set of dtypes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import config
from triton_support import DEVICE, check, compile_triton, randn, triton_kernels


def _gpu_sources(fn: Callable[..., Any], inputs: list[torch.Tensor]) -> list[str]:
    """The sources a GPU would get for `fn` (generated on the CPU, not run)."""
    from inductor.codegen.triton_split import generate_triton_kernel
    from inductor.pipeline import plan
    from inductor.scheduler.fusion import FusedGroup

    with config.patch(cpu_backend="triton"):
        p = plan(trace_aten(fn, inputs), inputs)
    return [generate_triton_kernel(g, p.ctx.buffers, interpret=False).source
            for g in p.steps if isinstance(g, FusedGroup)]


@pytest.mark.parametrize("n", [5, 3000, 20000])  # NOTE: persistent, looped, split rows
def test_mean_over_one_element_beside_longer_rows(n: int) -> None:
    """multilabel_soft_margin_loss of 1-D inputs: a sum over the n classes, then a mean
    over a batch dim of size 1 in the same kernel (it gave n times the loss)."""
    x, t = randn(n) * 3, torch.rand(n, device=DEVICE)
    check(lambda x, t: F.multilabel_soft_margin_loss(x, t), [x, t], atol=1e-4, rtol=1e-4)


def test_reduction_over_a_size_one_dim_masks_its_lanes() -> None:
    """nanquantile of a 0-d tensor: the count of non-NaN values (a sum over one element)
    fused with the pointwise node over q; the count counted twice made the index 1 of a
    size-1 dim, an out-of-bounds error (a device-side assert on the GPU)."""
    x = torch.tensor(0.3, device=DEVICE)
    q = torch.tensor([0.2, 0.7], device=DEVICE)
    check(lambda x, q: torch.nanquantile(x, q), [x, q])
    check(lambda x, q: torch.quantile(x, q), [x, q])
    check(lambda x: torch.nanquantile(x, torch.tensor([0.1, 0.5, 0.9], device=DEVICE),
                                      dim=1, keepdim=True), [randn(3, 1, 4)])


def test_fused_size_one_reduction_is_masked_on_the_gpu_too() -> None:
    """The GPU kernel of such a group masks the short node's reduction to its extent."""
    x = torch.tensor(0.3)
    q = torch.tensor([0.2, 0.7])
    sources = _gpu_sources(lambda x, q: torch.nanquantile(x, q), [x, q])
    fused = [s for s in sources if "_rmask = ridx < 1" in s]
    assert len(fused) == 1, sources
    lines = fused[0].splitlines()
    mask = next(line.split("=")[0].strip() for line in lines if "_rmask = ridx < 1" in line)
    reduce_line = next(line for line in lines if "tl.sum(" in line)
    assert f"xmask & rmask & {mask}" in reduce_line, fused[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reductions_over_no_elements(dtype: torch.dtype) -> None:
    """prod/sum of empty rows are 1/0 (they read element 0 of an empty buffer: an illegal
    memory access in bfloat16 on the GPU)."""
    e = torch.randn(0, device=DEVICE).to(dtype)
    check(lambda x: (x.prod(), x.sum()), [e])
    check(lambda x: (x.prod(1), x.sum(1)), [torch.randn(4, 0, device=DEVICE).to(dtype)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cat_with_a_part_empty_along_the_cat_dim(dtype: torch.dtype) -> None:
    a = torch.randn(0, 5, device=DEVICE).to(dtype)
    b = torch.randn(5, 5, device=DEVICE).to(dtype)
    c = torch.randn(2, 5, device=DEVICE).to(dtype)
    check(lambda a, b: torch.cat([a, b], 0), [a, b])
    check(lambda a, b, c: torch.cat([b, a, c], 0) * 2, [a, b, c])
    check(lambda a, b: torch.cat([a.t(), b.t()], 1), [a, b])


def test_cat_lowering_drops_empty_parts() -> None:
    """No kernel reads the empty part (its buffer is not an argument of any kernel)."""
    a = torch.randn(0, 5, device=DEVICE)
    b = torch.randn(5, 5, device=DEVICE)
    compiled = compile_triton(lambda a, b: torch.cat([a, b], 0) + 1, [a, b])
    (kernel,) = triton_kernels(compiled)
    assert "arg0" not in kernel.params, kernel.params


def test_one_kernel_source_serves_one_set_of_dtypes() -> None:
    """Flattening a permuted float32 and a permuted int64 tensor: the same loop, but two
    kernels, each naming its arguments' dtypes (one source served both, and on a GPU the
    launcher's fast path ran the int64 binary on the float32 buffers)."""
    x = torch.randn(2, 7, 2, device=DEVICE).permute(0, 2, 1)
    i = torch.randint(0, 9, (2, 7, 2), device=DEVICE).permute(0, 2, 1)
    compiled = check(lambda x, i: (x.reshape(-1) * 1, i.reshape(-1) + 0), [x, i])
    kernels = triton_kernels(compiled)
    assert len({k.name for k in kernels}) == len(kernels) == 2, [k.source for k in kernels]
    assert any("float32" in k.source.split("@triton.jit\ndef triton_")[0] for k in kernels)
    assert any("int64" in k.source.split("@triton.jit\ndef triton_")[0] for k in kernels)


def test_minimum_of_a_constant_and_a_block() -> None:
    """log-sigmoid's `minimum(0, x)` (a 0-d constant against a block): the interpreter
    could not `|` them in the NaN-propagating helper."""
    x = randn(33) * 4
    x[3] = float("nan")
    check(lambda x: (F.logsigmoid(x), torch.maximum(torch.zeros((), device=DEVICE), x)),
          [x])


def test_no_load_from_an_empty_buffer() -> None:
    """Padding an empty tensor: the lowering's clamped load of the source (discarded by the
    pad's select) has no element to read; the kernel reads nothing from that buffer."""
    x = torch.randn(0, 3, device=DEVICE)
    compiled = check(lambda x: F.pad(x, (1, 1, 1, 1), value=2.0) + 1, [x])
    (kernel,) = triton_kernels(compiled)
    assert "tl.load(in_ptr0" not in kernel.source, kernel.source


def test_out_of_range_indices_in_masked_off_lanes_do_not_raise() -> None:
    """Lanes past the end of a block compute indices too (here 3 * lane, past the 13
    elements of `w`): the bounds check, an error slot here and a device-side assert on a GPU,
    is masked like the loads and stores, in pointwise and in reduction kernels."""
    w = randn(13)
    x = randn(2, 5)
    check(lambda w: w[torch.arange(5, device=w.device) * 3] + 1, [w])
    check(lambda w, x: (w[torch.arange(5, device=w.device) * 3] * x).sum(1), [w, x])
    sources = _gpu_sources(lambda w, x: (w[torch.arange(5) * 3] * x).sum(1),
                           [torch.randn(13), torch.randn(2, 5)])
    asserts = [line for s in sources for line in s.splitlines() if "tl.device_assert(" in line]
    assert asserts, sources
    assert all("xmask" in line for line in asserts), asserts


def test_sign_in_every_dtype_is_eagers() -> None:
    """sign/sgn as eager's (0 < a) - (a < 0) in the argument's type (NaN -> 0): the
    where-over-integer-constants form stored +1 for negative bfloat16 values on an H100
    (CUDA OpInfo: 223 of 400 wrong) and NaN for NaN."""
    from triton_support import DEVICE, check

    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.uint8):
        x = (torch.randn(6, 7) * 5).to(dtype)
        if dtype.is_floating_point:
            x[0, :4] = torch.tensor([float("nan"), -0.0, float("-inf"), float("inf")])
        compiled = check(lambda t: (torch.sign(t), torch.sgn(t) * 2), [x.to(DEVICE)],
                         atol=0, rtol=0)
        assert ".to(" in compiled.kernels[0].source


def test_bfloat16_casts_round_to_nearest_even() -> None:
    """Casts into bfloat16 round to nearest even, as eager and a GPU do (Triton's interpreter
    truncated float32 and reinterpreted an integer's low bits; a bfloat16 prod of 15 and
    10.375 gave 155, eager 156): ties, overflow to inf, NaN, signed zeros, integers."""
    x = torch.tensor([155.625, -2.0703125, 1 + 2**-8, 1 + 3 * 2**-8, 3.3e38, -3.3e38,
                      float("nan"), float("-inf"), 0.0, -0.0, 1e-40, 7.0], device=DEVICE)
    i = torch.tensor([257, 1000, -3, 65535, 2**40 + 2**31], device=DEVICE)
    check(lambda x, i: (x.bfloat16(), (x * 2 - 1).bfloat16(), i.to(torch.bfloat16)), [x, i],
          atol=0, rtol=0)
    h = torch.tensor([15.0, 10.375, -2.0, 1.0390625], device=DEVICE).bfloat16()
    check(lambda h: h.view(2, 2).prod(1), [h], atol=0, rtol=0)
