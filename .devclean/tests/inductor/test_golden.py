"""Golden tests: the loop IR, the schedule and the generated C++ of small programs, so
codegen changes show up in review. Regenerate with `EXPECTTEST_ACCEPT=1`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import expecttest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import config
from inductor.ir.printer import format_kernels, normalize_kernel_names
from inductor.pipeline import plan
from inductor.scheduler.fusion import format_schedule


def render(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> str:
    gm = trace_aten(fn, inputs)
    with config.patch(threads=2, parallel_threshold=32768, simd=True, fusion=True,
                      verify_ir=True):
        p = plan(gm, inputs)
    kernels = [k for s in p.steps for k in (s.nodes if hasattr(s, "nodes") else [s])]
    parts = [
        "# IR", format_kernels(kernels),
        "# schedule", format_schedule(p.steps),
        "# wrapper", p.wrapper_source.rstrip(),
        "# C++", *(k.source.rstrip() for k in p.kernels.values()),
    ]
    return normalize_kernel_names("\n".join(parts)) + "\n"


class TestGolden(expecttest.TestCase):
    def test_fused_pointwise_chain(self) -> None:
        def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x * 2 + y).relu() - 1

        self.assertExpectedInline(render(f, [torch.randn(8, 16), torch.randn(16)]), """\
# IR
buf0: size=(8, 16) stride=(16, 1) float32
  body(i0: 8, i1: 16)
    tmp0 = load('arg0', 16*i0 + i1)  # float32
    tmp1 = constant(2.0)  # float32
    tmp2 = mul(tmp0, tmp1)  # float32
    tmp3 = load('arg1', i1)  # float32
    tmp4 = add(tmp2, tmp3)  # float32
    tmp5 = sigmoid(tmp4)  # float32
    tmp6 = relu(tmp5)  # float32
    tmp7 = constant(1.0)  # float32
    tmp8 = sub(tmp6, tmp7)  # float32
    store('buf0', 16*i0 + i1, tmp8)
# schedule
step0: kernel outer=(8, 16) nodes=['buf0']
# wrapper
def call(arg0, arg1):
    buf0 = empty_strided((8, 16), (16, 1), dtype=torch.float32)
    kernel0(arg0.data_ptr(), arg1.data_ptr(), buf0.data_ptr())
    return (buf0,)
# C++
extern "C" void kernel0(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, float* __restrict__ out_ptr0)
{
    for (int64_t x0 = 0; x0 < 8; ++x0)
    {
        #pragma omp simd
        for (int64_t x1 = 0; x1 < 16; ++x1)
        {
            // buf0
            {
                float tmp0 = in_ptr0[(16*x0 + x1)];
                float tmp1 = 2.0f;
                float tmp2 = (tmp0 * tmp1);
                float tmp3 = in_ptr1[x1];
                float tmp4 = (tmp2 + tmp3);
                float tmp5 = ind_sigmoid(tmp4);
                float tmp6 = ind_relu(tmp5);
                float tmp7 = 1.0f;
                float tmp8 = (tmp6 - tmp7);
                out_ptr0[(16*x0 + x1)] = tmp8;
            }
        }
    }
}
""")

    def test_softmax(self) -> None:
        self.assertExpectedInline(render(lambda x: torch.softmax(x, -1),
                                         [torch.randn(32, 100)]), """\
# IR
buf0: size=(32, 1) stride=(1, 1) float32
  body(i0: 32 | r0: 100)
    tmp0 = load('arg0', 100*i0 + r0)  # float32
    tmp1 = reduction('max', tmp0)  # float32
    store_reduction('buf0', i0, tmp1)
buf1: size=(32, 1) stride=(1, 1) float32
  body(i0: 32 | r0: 100)
    tmp0 = load('arg0', 100*i0 + r0)  # float32
    tmp1 = load('buf0', i0)  # float32
    tmp2 = sub(tmp0, tmp1)  # float32
    tmp3 = exp(tmp2)  # float32
    tmp4 = reduction('sum', tmp3)  # float32
    store_reduction('buf1', i0, tmp4)
buf2: size=(32, 100) stride=(100, 1) float32
  body(i0: 32, i1: 100)
    tmp0 = load('arg0', 100*i0 + i1)  # float32
    tmp1 = load('buf0', i0)  # float32
    tmp2 = sub(tmp0, tmp1)  # float32
    tmp3 = exp(tmp2)  # float32
    tmp4 = load('buf1', i0)  # float32
    tmp5 = reciprocal(tmp4)  # float32
    tmp6 = mul(tmp3, tmp5)  # float32
    store('buf2', 100*i0 + i1, tmp6)
# schedule
step0: kernel outer=(32,) nodes=['buf0', 'buf1', 'buf2'] local=['buf0', 'buf1']
# wrapper
def call(arg0):
    buf2 = empty_strided((32, 100), (100, 1), dtype=torch.float32)
    kernel0(arg0.data_ptr(), buf2.data_ptr())
    return (buf2,)
# C++
extern "C" void kernel0(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0)
{
    for (int64_t x0 = 0; x0 < 32; ++x0)
    {
        float loc0;
        float loc1;
        float row0[100];
        // buf0
        {
            float acc = -std::numeric_limits<float>::infinity();
            int acc_nan = 0;
            #pragma omp simd reduction(max:acc) reduction(|:acc_nan)
            for (int64_t p0 = 0; p0 < 100; ++p0)
            {
                float tmp0 = in_ptr0[(p0 + 100*x0)];
                acc = acc > tmp0 ? acc : tmp0;
                acc_nan |= (tmp0 != tmp0);
            }
            if (acc_nan) acc = std::numeric_limits<float>::quiet_NaN();
            float tmp1 = acc;
            loc0 = tmp1;
        }
        // buf1
        {
            float acc = 0.0f;
            float tmp1 = loc0;
            #pragma omp simd reduction(+:acc)
            for (int64_t p0 = 0; p0 < 100; ++p0)
            {
                float tmp0 = in_ptr0[(p0 + 100*x0)];
                float tmp2 = (tmp0 - tmp1);
                float tmp3 = ind_exp(tmp2);
                row0[p0] = tmp3;
                acc = acc + tmp3;
            }
            float tmp4 = acc;
            loc1 = tmp4;
        }
        // buf2
        {
            float tmp4 = loc1;
            float tmp5 = (1 / tmp4);
            #pragma omp simd
            for (int64_t p0 = 0; p0 < 100; ++p0)
            {
                float tmp3 = row0[p0];
                float tmp6 = (tmp3 * tmp5);
                out_ptr0[(p0 + 100*x0)] = tmp6;
            }
        }
    }
}
""")

    def test_layer_norm(self) -> None:
        def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return F.layer_norm(x, (64,), w, b)

        self.assertExpectedInline(
            render(f, [torch.randn(4, 8, 64), torch.randn(64), torch.randn(64)]), """\
# IR
buf0: size=(4, 8, 1) stride=(8, 1, 1) float32
  body(i0: 4, i1: 8 | r0: 64)
    tmp0 = load('arg0', 512*i0 + 64*i1 + r0)  # float32
    tmp1 = reduction('sum', tmp0)  # float32
    tmp2 = constant(64.0)  # float32
    tmp3 = truediv(tmp1, tmp2)  # float32
    store_reduction('buf0', 8*i0 + i1, tmp3)
buf1: size=(4, 8, 1) stride=(8, 1, 1) float32
  body(i0: 4, i1: 8 | r0: 64)
    tmp0 = load('arg0', 512*i0 + 64*i1 + r0)  # float32
    tmp1 = load('buf0', 8*i0 + i1)  # float32
    tmp2 = sub(tmp0, tmp1)  # float32
    tmp3 = mul(tmp2, tmp2)  # float32
    tmp4 = reduction('sum', tmp3)  # float32
    tmp5 = constant(64.0)  # float32
    tmp6 = truediv(tmp4, tmp5)  # float32
    store_reduction('buf1', 8*i0 + i1, tmp6)
buf2: size=(4, 8, 64) stride=(512, 64, 1) float32
  body(i0: 4, i1: 8, i2: 64)
    tmp0 = load('arg0', 512*i0 + 64*i1 + i2)  # float32
    tmp1 = load('buf0', 8*i0 + i1)  # float32
    tmp2 = sub(tmp0, tmp1)  # float32
    tmp3 = load('buf1', 8*i0 + i1)  # float32
    tmp4 = constant(1e-05)  # float32
    tmp5 = add(tmp3, tmp4)  # float32
    tmp6 = rsqrt(tmp5)  # float32
    tmp7 = mul(tmp2, tmp6)  # float32
    tmp8 = load('arg1', i2)  # float32
    tmp9 = mul(tmp7, tmp8)  # float32
    tmp10 = load('arg2', i2)  # float32
    tmp11 = add(tmp9, tmp10)  # float32
    store('buf2', 512*i0 + 64*i1 + i2, tmp11)
# schedule
step0: kernel outer=(4, 8) nodes=['buf0', 'buf1', 'buf2'] local=['buf0', 'buf1']
# wrapper
def call(arg0, arg1, arg2):
    buf2 = empty_strided((4, 8, 64), (512, 64, 1), dtype=torch.float32)
    kernel0(arg0.data_ptr(), arg1.data_ptr(), arg2.data_ptr(), buf2.data_ptr())
    return (buf2,)
# C++
extern "C" void kernel0(const float* __restrict__ in_ptr0, const float* __restrict__ in_ptr1, const float* __restrict__ in_ptr2, float* __restrict__ out_ptr0)
{
    for (int64_t x0 = 0; x0 < 32; ++x0)
    {
        float loc0;
        float loc1;
        // buf0
        {
            float acc = 0.0f;
            #pragma omp simd reduction(+:acc)
            for (int64_t p0 = 0; p0 < 64; ++p0)
            {
                float tmp0 = in_ptr0[(p0 + 64*x0)];
                acc = acc + tmp0;
            }
            float tmp1 = acc;
            float tmp2 = 64.0f;
            float tmp3 = (tmp1 / tmp2);
            loc0 = tmp3;
        }
        // buf1
        {
            float acc = 0.0f;
            float tmp1 = loc0;
            #pragma omp simd reduction(+:acc)
            for (int64_t p0 = 0; p0 < 64; ++p0)
            {
                float tmp0 = in_ptr0[(p0 + 64*x0)];
                float tmp2 = (tmp0 - tmp1);
                float tmp3 = (tmp2 * tmp2);
                acc = acc + tmp3;
            }
            float tmp4 = acc;
            float tmp5 = 64.0f;
            float tmp6 = (tmp4 / tmp5);
            loc1 = tmp6;
        }
        // buf2
        {
            float tmp1 = loc0;
            float tmp3 = loc1;
            float tmp4 = 1e-05f;
            float tmp5 = (tmp3 + tmp4);
            float tmp6 = (1 / std::sqrt(tmp5));
            #pragma omp simd
            for (int64_t p0 = 0; p0 < 64; ++p0)
            {
                float tmp0 = in_ptr0[(p0 + 64*x0)];
                float tmp2 = (tmp0 - tmp1);
                float tmp7 = (tmp2 * tmp6);
                float tmp8 = in_ptr1[p0];
                float tmp9 = (tmp7 * tmp8);
                float tmp10 = in_ptr2[p0];
                float tmp11 = (tmp9 + tmp10);
                out_ptr0[(p0 + 64*x0)] = tmp11;
            }
        }
    }
}
""")

    def test_view_heavy(self) -> None:
        def f(x: torch.Tensor) -> torch.Tensor:
            y = x.permute(0, 2, 1).reshape(4, 30)[:, 1::2]
            return y.unsqueeze(1).expand(4, 3, 15) * 2

        self.assertExpectedInline(render(f, [torch.randn(4, 5, 6)]), """\
# IR
buf0: size=(4, 3, 15) stride=(45, 15, 1) float32
  body(i0: 4, i1: 3, i2: 15)
    tmp0 = load('arg0', 30*i0 + FloorDiv(2*i2 + 1, 5) + 6*ModIndex(2*i2 + 1, 5))  # float32
    tmp1 = constant(2.0)  # float32
    tmp2 = mul(tmp0, tmp1)  # float32
    store('buf0', 45*i0 + 15*i1 + i2, tmp2)
# schedule
step0: kernel outer=(4, 3, 15) nodes=['buf0']
# wrapper
def call(arg0):
    buf0 = empty_strided((4, 3, 15), (45, 15, 1), dtype=torch.float32)
    kernel0(arg0.data_ptr(), buf0.data_ptr())
    return (buf0,)
# C++
extern "C" void kernel0(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0)
{
    for (int64_t x0 = 0; x0 < 4; ++x0)
    {
        for (int64_t x1 = 0; x1 < 3; ++x1)
        {
            #pragma omp simd
            for (int64_t x2 = 0; x2 < 15; ++x2)
            {
                // buf0
                {
                    float tmp0 = in_ptr0[(30*x0 + ind_floordiv((1 + 2*x2), 5) + 6*(ind_mod((1 + 2*x2), 5)))];
                    float tmp1 = 2.0f;
                    float tmp2 = (tmp0 * tmp1);
                    out_ptr0[(45*x0 + 15*x1 + x2)] = tmp2;
                }
            }
        }
    }
}
""")
