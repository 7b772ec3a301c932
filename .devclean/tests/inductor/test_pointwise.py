"""Pointwise chains and views, compiled end to end and compared with eager."""

from __future__ import annotations

import torch
from inductor import compile_aten
from tests_inductor_support import run_and_compare


def test_fused_chain() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + y).sigmoid() - 1

    x, y = torch.randn(64, 33), torch.randn(64, 33)
    compiled = run_and_compare(f, [x, y])
    assert len(compiled.kernels) == 1


def test_broadcast_and_scalar() -> None:
    run_and_compare(lambda x, b: torch.tanh(x + b) * 0.5, [torch.randn(8, 16), torch.randn(16)])


def test_compile_aten_direct() -> None:
    from aten_trace import trace_aten

    gm = trace_aten(lambda x: (x + 1,), [torch.randn(4)])
    out = compile_aten(gm, [torch.randn(4)])(torch.ones(4))
    assert torch.equal(out[0], torch.full((4,), 2.0))


def test_vector_math_accuracy() -> None:
    """The prelude's vectorizable exp/tanh/erf/sigmoid against eager, specials included."""
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30])
    x = torch.cat([torch.linspace(-120, 100, 20001), specials])
    run_and_compare(lambda t: (t.exp(), t.tanh(), t.sigmoid(), torch.erf(t)), [x],
                    atol=1e-6, rtol=2e-6)
    x = torch.linspace(-6, 6, 20001)
    run_and_compare(lambda t: (torch.nn.functional.gelu(t),
                               torch.nn.functional.gelu(t, approximate="tanh")), [x],
                    atol=1e-5, rtol=1.3e-6)


def test_erf_relative_accuracy() -> None:
    """The rational float erf: relative error (not only absolute) stays small, near 0 too."""
    x = torch.cat([torch.linspace(-5, 5, 200001), torch.logspace(-30, 0, 2001),
                   -torch.logspace(-30, 0, 2001)])
    compiled = run_and_compare(lambda t: torch.erf(t) * 1.0, [x], atol=0.0, rtol=2e-6)
    got = compiled(x)[0].double()
    want = torch.erf(x.double())
    assert ((got - want).abs() / want.abs().clamp_min(1e-30)).max().item() < 1e-6


def test_log_is_within_one_ulp_of_double_log() -> None:
    """The prelude's vectorizable float log (Cephes' logf): specials (0, negatives, inf,
    NaN, denormals) as eager gives them, every other value within 1 ulp of double log."""
    specials = torch.tensor([0.0, -0.0, -1.0, float("inf"), -float("inf"), float("nan"),
                             1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4028235e38])
    x = torch.cat([specials, torch.logspace(-37, 38, 100001), torch.linspace(0.5, 2, 100001)])
    compiled = run_and_compare(lambda t: torch.log(t) * 1.0, [x], atol=0.0, rtol=1.3e-6)
    got = compiled(x)[0]
    assert "= ind_log(" in compiled.output_code()
    want = torch.log(x.double())
    finite = want.isfinite()
    ulp = (want[finite].float().nextafter(torch.tensor(float("inf"))) - want[finite].float())
    assert ((got[finite].double() - want[finite]).abs() / ulp.double()).max().item() <= 1.0


def test_log1p_and_expm1_are_within_three_ulp_of_double() -> None:
    """The prelude's vectorizable float log1p and expm1 (from log and exp, their rounding
    error divided out): specials as eager gives them, the rest within 3 ulp of double."""
    specials = torch.tensor([0.0, -0.0, -1.0, -2.0, float("inf"), -float("inf"),
                             float("nan"), 1e-30, -1e-30, 1e-8, 88.0, 89.0, -104.0])
    x = torch.cat([specials, torch.linspace(-0.999, 3, 100001), torch.logspace(-30, 30, 10001),
                   -torch.logspace(-30, 2, 10001)])
    compiled = run_and_compare(lambda t: (torch.log1p(t) * 1.0, torch.expm1(t) * 1.0), [x],
                               atol=0.0, rtol=4e-7)
    assert "= ind_log1p(" in compiled.output_code() and "= ind_expm1(" in compiled.output_code()
    for got, want in zip(compiled(x), (torch.log1p(x.double()), torch.expm1(x.double()))):
        finite = want.isfinite() & (want.abs() < 3e38)
        w = want[finite].float()
        ulp = (w.nextafter(torch.tensor(float("inf"))) - w).abs().double()
        assert ((got[finite].double() - want[finite]).abs() / ulp).max().item() <= 3.0


def test_negative_scalar_powers_are_eager_bit_for_bit_without_pow() -> None:
    """`x ** -0.5`, `-1`, `-2` as ATen's float kernels compute them (rsqrt, reciprocal,
    reciprocal of the square), specials included, and no libm pow in the kernel."""
    for dtype in (torch.float32, torch.float64):
        x = torch.cat([torch.rand(2000) * 10 + 1e-3,
                       torch.tensor([0.0, -0.0, float("inf"), -1.0, float("nan"), 1e-30, -3.0])]
                      ).to(dtype)
        for e in (-0.5, -1, -2.0):
            compiled = run_and_compare(lambda t, e=e: t ** e, [x], atol=0, rtol=0)
            assert "ind_pow(" not in compiled.output_code().split('extern "C"')[1]


def test_no_fma_contraction() -> None:
    # `1 - x * x` near |x| = 1 (asin's and atanh's derivatives): eager rounds the product
    # before the add; a fused multiply-add would not, and the difference is then large
    # relative to the result. Kernels are built with -ffp-contract=off.
    x = torch.linspace(0.99, 0.99999, 64)
    run_and_compare(lambda t: (1 - t * t, torch.rsqrt(-t * t + 1)), [x], atol=0, rtol=0)
