"""Triton matmul templates under `max_autotune` (`codegen/triton_mm.py`): mm, addmm and bmm
with their pointwise epilogues fused into the template's store, against eager; the ATen
alternative (the interpreter's pick under `mm_template='auto'`); the cases that stay ATen
calls; a golden test printing the template of Linear + GELU (regenerate with
`EXPECTTEST_ACCEPT=1`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import expecttest
import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import CompiledGraph, compile_aten, config
from inductor.codegen.triton import TritonKernel
from inductor.ir.printer import normalize_kernel_names
from inductor.pipeline import plan
from inductor.runtime.triton_mm_launch import MatmulLauncher, load_matmul_kernels
from inductor.scheduler.fusion import format_schedule
from tests_inductor_support import needs_compiler
from triton_support import DEVICE, OPTIONS, randn

TEMPLATE = {**OPTIONS, "max_autotune": True, "mm_template": "always"}
AUTO = {**OPTIONS, "max_autotune": True, "mm_template": "auto"}
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}


def _compile(fn: Callable[..., Any], inputs: Sequence[torch.Tensor],
             options: dict[str, Any]) -> CompiledGraph:
    gm = trace_aten(fn, inputs)
    with config.patch(options):
        return compile_aten(gm, list(inputs))


def _templates(compiled: CompiledGraph) -> list[TritonKernel]:
    return [k for k in compiled.kernels if isinstance(k, TritonKernel) and k.matmul is not None]


def check_template(fn: Callable[..., Any], inputs: Sequence[torch.Tensor],
                   dtype: torch.dtype = torch.float32, templates: int = 1,
                   kernels: int | None = None, options: dict[str, Any] | None = None,
                   ) -> CompiledGraph:
    """Compile with the template forced, compare with eager (float64 eager for halves:
    the template must be as close to it as eager's own half result, within a margin)."""
    compiled = _compile(fn, inputs, options or TEMPLATE)
    assert len(_templates(compiled)) == templates, compiled.output_code()
    if kernels is not None:
        assert len(compiled.kernels) == kernels, compiled.output_code()
    got = compiled(*inputs)
    expected = fn(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    ref = fn(*[t.double() for t in inputs])
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    for g, e, r in zip(got, expected, ref, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        if dtype == torch.float32:
            torch.testing.assert_close(g, e, atol=TOL[dtype], rtol=TOL[dtype], equal_nan=True)
            continue
        err = (g.double() - r).abs().max().item()
        eager_err = (e.double() - r).abs().max().item()
        scale = r.abs().max().item()
        assert err <= 2 * eager_err + TOL[dtype] * scale, (err, eager_err, scale)
    return compiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_linear_gelu_residual_is_one_template_kernel(dtype: torch.dtype) -> None:
    x, w, b, r = (randn(37, 70, dtype=dtype), randn(45, 70, dtype=dtype),
                  randn(45, dtype=dtype), randn(37, 45, dtype=dtype))

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b)) + r

    compiled = check_template(f, [x, w, b, r], dtype, kernels=1)
    assert not compiled.extern_calls.get("aten.addmm.default"), compiled.extern_calls
    (k,) = _templates(compiled)
    # NOTE: the bias is added in the epilogue with GELU (`bias_unfuse.py`)
    assert k.matmul is not None and k.matmul.op == "mm" and k.matmul.dims == (1, 37, 45, 70)
    if dtype != torch.float32:
        # NOTE: the operands are loaded in their own type (widened only for the
        # interpreter's dot), the accumulator is float32
        assert "tl.zeros([BLOCK_M, BLOCK_N], tl.float32)" in k.source
        assert ".to(tl.float32), b.to(tl.float32)" in k.source or "tl.dot(a, b)" in k.source


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_mm_ragged_and_transposed(dtype: torch.dtype, ta: bool, tb: bool) -> None:
    m, n, k = 33, 50, 47
    a = randn(k, m, dtype=dtype).t() if ta else randn(m, k, dtype=dtype)
    b = randn(n, k, dtype=dtype).t() if tb else randn(k, n, dtype=dtype)
    check_template(lambda a, b: torch.relu(a @ b), [a, b], dtype, kernels=1)


def test_addmm_alpha_beta_and_broadcast_bias() -> None:
    a, b = randn(40, 24), randn(24, 36)
    for bias in (randn(36), randn(1, 36), randn(40, 1), randn(40, 36)):
        check_template(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0),
                       [bias, a, b])


def test_addmm_beta_zero_ignores_a_nan_bias() -> None:
    bias = torch.full((36,), float("nan"), device=DEVICE)
    check_template(lambda c, a, b: torch.addmm(c, a, b, beta=0.0, alpha=3.0),
                   [bias, randn(40, 24), randn(24, 36)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bmm_with_epilogue(dtype: torch.dtype) -> None:
    a, b = randn(3, 20, 33, dtype=dtype), randn(3, 33, 17, dtype=dtype)
    s = randn(3, 20, 17, dtype=dtype)
    check_template(lambda a, b, s: torch.sigmoid(torch.bmm(a, b) * 0.5) * s, [a, b, s], dtype,
                   kernels=1)


def test_bmm_of_transposed_batches_and_a_batch_of_one() -> None:
    a = randn(4, 33, 20).transpose(1, 2)
    b = randn(4, 17, 33).transpose(1, 2)
    check_template(lambda a, b: torch.bmm(a, b) + 1, [a, b])
    check_template(lambda a, b: torch.bmm(a, b) - 1, [randn(1, 20, 33), randn(1, 33, 17)])


def test_linear_over_three_dims_keeps_its_view_epilogue() -> None:
    # NOTE: x[B, S, D] @ w.t() is an addmm over B*S rows whose GELU runs over (B, S, N):
    # the group's loops refine the matmul's M into (B, S)
    x, w, b = randn(2, 9, 32), randn(24, 32), randn(24)
    check_template(lambda x, w, b: F.gelu(F.linear(x, w, b)), [x, w, b], kernels=1)


def test_matmul_read_elsewhere_is_stored_too() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = a @ b
        return y, torch.tanh(y)

    compiled = check_template(f, [randn(30, 40), randn(40, 20)])
    (k,) = _templates(compiled)
    assert k.source.count("tl.store(") == 2


def test_auto_on_the_interpreter_runs_aten_then_the_epilogue() -> None:
    x, w, b, r = randn(37, 70), randn(45, 70), randn(45), randn(37, 45)

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b)) * r

    compiled = check_template(f, [x, w, b, r], options=AUTO)
    (k,) = _templates(compiled)
    assert k.matmul is not None and k.matmul.epilogue is not None
    assert "tl.dot" not in k.matmul.epilogue.source
    launcher = load_matmul_kernels([k])[k.name]
    assert isinstance(launcher, MatmulLauncher)
    if DEVICE == "cpu":
        assert k.matmul.choice == launcher.choice == "aten"
    else:  # NOTE: a GPU timed the template's configurations against ATen on the first call
        assert k.matmul.choice == "auto" and launcher.choice is not None


@pytest.mark.parametrize("case", ["tiny", "float64", "never", "default_mode", "int"])
def test_cases_the_template_does_not_take_stay_aten_calls(case: str) -> None:
    a, b = randn(40, 24), randn(24, 36)
    options = TEMPLATE
    if case == "tiny":
        a, b = randn(8, 24), randn(24, 36)
    elif case == "float64":
        a, b = a.double(), b.double()
    elif case == "never":
        options = {**TEMPLATE, "mm_template": "never"}
    elif case == "default_mode":
        options = {**OPTIONS, "mm_template": "always"}  # NOTE: max_autotune off
    elif case == "int":
        if DEVICE == "cuda":
            pytest.skip("ATen has no integer matmul on CUDA (eager raises the same)")
        a, b = (a * 10).long(), (b * 10).long()
    compiled = _compile(lambda a, b: (a @ b) + 1, [a, b], options)
    assert not _templates(compiled)
    assert compiled.extern_calls.get("aten.mm.default") == 1, compiled.extern_calls
    torch.testing.assert_close(compiled(a, b)[0], (a @ b) + 1)


def test_an_unknown_mm_template_setting_is_an_error() -> None:
    with pytest.raises(ValueError, match="mm_template"):
        _compile(lambda a, b: a @ b, [randn(40, 24), randn(24, 36)],
                 {**TEMPLATE, "mm_template": "sometimes"})


def _count_templates(monkeypatch: pytest.MonkeyPatch) -> list[TritonKernel]:
    """The matmul templates inductor generates from now on."""
    import inductor.targets

    made: list[TritonKernel] = []
    generate = inductor.targets.generate_matmul_template

    def counted(*args: Any, **kwargs: Any) -> TritonKernel:
        made.append(generate(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(inductor.targets, "generate_matmul_template", counted)
    return made


@needs_compiler
def test_training_step_with_templates_matches_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler
    made = _count_templates(monkeypatch)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.GELU(),
                                torch.nn.Linear(40, 20), torch.nn.ReLU(),
                                torch.nn.Linear(20, 17)).to(DEVICE)
    x, target = randn(33, 24), torch.randint(0, 17, (33,), device=DEVICE)

    def step(m: torch.nn.Module) -> list[torch.Tensor]:
        for p in m.parameters():
            p.grad = None
        loss = F.cross_entropy(m(x), target)
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in m.parameters() if p.grad is not None]

    want = step(model)
    compiler.reset()
    compiled = compiler.compile(model, backend="inductor", options=TEMPLATE)
    got = step(compiled)  # type: ignore[arg-type]
    assert len(got) == len(want) == 7
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
    # NOTE: 2 forward addmms (the first one's result is saved for GELU's backward, the
    # last one's feeds log-softmax), the middle layer an mm with its bias added in the
    # ReLU epilogue (`bias_unfuse.py`), and in the backward the input gradients of the
    # last two layers and the weight gradients of all three (transposed operands)
    ops = sorted(k.matmul.op for k in made if k.matmul is not None)
    assert ops == ["addmm"] * 2 + ["mm"] * 6, ops


def render(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> str:
    """The schedule, the wrapper and the template's function (imports and helpers left
    out) for the interpreter, the template forced."""
    gm = trace_aten(fn, inputs)
    with config.patch(TEMPLATE):
        p = plan(gm, inputs)
    parts = ["# schedule", format_schedule(p.steps), "# wrapper", p.wrapper_source.rstrip()]
    for k in p.kernels.values():
        assert isinstance(k, TritonKernel) and k.matmul is not None
        text = k.source[k.source.index("@triton.jit\ndef triton_mm_"):]
        parts += [f"# configs {k.matmul.configs} choice={k.matmul.choice}", text.rstrip()]
    # NOTE: content-hash names (they hash the argument dtypes too) become kernel0, ...
    text = re.sub(r"triton_(mm_)?([0-9a-f]{16})", r"kernel_\2", "\n".join(parts))
    return normalize_kernel_names(text).replace("triton_", "kernel") + "\n"


class TestMatmulTemplateGolden(expecttest.TestCase):
    def test_linear_gelu(self) -> None:
        def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return F.gelu(F.linear(x, w, b))

        self.assertExpectedInline(render(f, [torch.randn(20, 32), torch.randn(24, 32),
                                             torch.randn(24)]), """\
# schedule
step0: kernel outer=(20, 24) nodes=['buf0', 'buf1'] local=['buf0']
# wrapper
def call(arg0, arg1, arg2):
    buf1 = empty_strided((20, 24), (24, 1), dtype=torch.float32)
    kernel0(arg0, arg1, arg2, buf1)
    return (buf1,)
# configs ((32, 32, 32, 4, 1),) choice=template
@triton.jit
def kernel0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = (20 + BLOCK_M - 1) // BLOCK_M
    grid_n = (24 + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, 32, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(in_ptr0 + (rm[:, None] * 32 + rk[None, :]), mask=(rm[:, None] < 20) & (rk[None, :] < 32), other=0.0)
        b = tl.load(in_ptr1 + (rk[:, None] + rn[None, :] * 32), mask=(rk[:, None] < 32) & (rn[None, :] < 24), other=0.0)
        acc += tl.dot(a, b, input_precision='ieee')
    xm = rm[:, None] + rn[None, :] * 0
    xn = rn[None, :] + rm[:, None] * 0
    xmask = (xm < 20) & (xn < 24)
    xzero = xm * 0
    x0 = xm
    x1 = xn
    n0_t4 = tl.load(in_ptr2 + x1, mask=xmask, other=0)
    n0_t5 = (acc + n0_t4)
    n1_t0 = n0_t5
    n1_t1 = tl.full([], 0.5, tl.float32)
    n1_t2 = tl.full([], 0.7071067811865476, tl.float32)
    n1_t3 = (n1_t0 * n1_t2)
    n1_t4 = tl.erf(n1_t3)
    n1_t5 = (n1_t1 * n1_t0)
    n1_t6 = tl.full([], 1.0, tl.float32)
    n1_t7 = (n1_t6 + n1_t4)
    n1_t8 = (n1_t5 * n1_t7)
    tl.store(out_ptr0 + ((24 * x0) + x1), n1_t8, mask=xmask)
""")


def test_a_template_with_an_epilogue_may_be_timed() -> None:
    # NOTE: its epilogue reads the matmul's own value, which a re-run computes again: a GPU
    # times it (the launcher never re-runs a kernel marked inplace)
    compiled = _compile(lambda a, b, c: torch.relu(a @ b) + c,
                        [randn(40, 24), randn(24, 36), randn(40, 36)], TEMPLATE)
    (k,) = _templates(compiled)
    assert not k.inplace


def test_a_recorded_choice_is_used_and_runs(tmp_path: Any) -> None:
    # NOTE: a GPU records the winner in `<kernel>.best`; a later process takes it untimed
    import dataclasses
    import json

    from inductor.runtime.triton_launch import kernel_module

    a, b = randn(40, 24), randn(24, 36)
    options = {**TEMPLATE, "cache_dir": str(tmp_path)}
    compiled = _compile(lambda a, b: torch.relu(a @ b), [a, b], options)
    (k,) = _templates(compiled)
    assert k.matmul is not None
    other = (16, 32, 16, 4, 1)
    k2 = dataclasses.replace(k, matmul=dataclasses.replace(
        k.matmul, configs=(*k.matmul.configs, other)))
    with config.patch(options):
        module, best = kernel_module(k2)
        best.write_text(json.dumps(list(other)))
        launcher = MatmulLauncher(k2, module, best, None)
        assert launcher.choice == other
        out = torch.empty(40, 36, device=DEVICE)
        by_name = {"arg0": a, "arg1": b}
        launcher(*(by_name.get(p, out) for p in k2.params))
        torch.testing.assert_close(out, torch.relu(a @ b), atol=1e-4, rtol=1e-4)
        best.write_text(json.dumps(["aten"]))  # NOTE: not a choice of a template-only plan
        assert MatmulLauncher(k2, module, best, None).choice is None


def test_a_template_that_fails_to_launch_falls_back_to_aten(
        caplog: pytest.LogCaptureFixture) -> None:
    a, b, c = randn(40, 24), randn(24, 36), randn(40, 36)
    compiled = _compile(lambda a, b, c: torch.relu(a @ b) * c, [a, b, c], TEMPLATE)
    (k,) = _templates(compiled)
    assert k.matmul is not None and k.matmul.has_aten
    launcher = load_matmul_kernels([k])[k.name]
    assert isinstance(launcher, MatmulLauncher)

    class Broken:
        def __getitem__(self, grid: Any) -> Any:
            raise RuntimeError("out of resources: shared memory")

    launcher.fn = Broken()
    launcher.choice = None
    with caplog.at_level(logging.WARNING, "inductor"):
        got = compiled(a, b, c)[0]
    torch.testing.assert_close(got, torch.relu(a @ b) * c, atol=1e-4, rtol=1e-4)
    assert launcher.choice == "aten" and "using ATen's call" in caplog.text


@needs_compiler
def test_max_autotune_mode_through_the_facade(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler
    made = _count_templates(monkeypatch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.SiLU(),
                                torch.nn.Linear(48, 16)).to(DEVICE)
    x = randn(20, 32)
    compiler.reset()
    # NOTE: a mode and options are exclusive (as in torch.compile): the target comes from
    # the global option
    compiled = compiler.compile(model, backend="inductor", mode="max-autotune")
    with config.patch(cpu_backend="triton"), torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    assert [k.matmul.choice for k in made if k.matmul is not None] == [
        "aten" if DEVICE == "cpu" else "auto"] * 2
