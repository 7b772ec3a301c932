"""Boxed inductor backwards (`aotgrad.boxed`, `InductorCompiler.compile_boxed`): the compiled
backward takes its inputs as one list, clears it, and its wrapper frees each input after its
last use (`scheduler/memory.py` plans it), so a saved activation dies inside the backward.
Gradients equal eager's (MLP, CNN with batch norm, GPT-2-like attention), with
retain_graph, create_graph, symbolic sizes (and their per-size fallback), CUDA graphs
(kept unboxed behind the list), and after the disk form's round trip in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aotgrad
import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from boxed_support import freed_before_last_matmul, saved_alive_during_backward
from inductor import compile_aten, config
from inductor.backend import InductorCompiler
from inductor.pipeline import CompiledGraph
from inductor.runtime import graph_cache
from tests_inductor_support import HAS_FACADE, needs_compiler
from torch import nn

HERE = Path(__file__).resolve().parent


@pytest.fixture
def boxed_compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, Any]]]:
    """(graph, compiled) of every `compile_boxed` from now on; compiled-graph caches off,
    so each backward is compiled here."""
    seen: list[tuple[Any, Any]] = []
    original = InductorCompiler.compile_boxed

    def spy(self: InductorCompiler, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        compiled = original(self, gm, example_inputs)
        seen.append((gm, compiled))
        return compiled

    monkeypatch.setattr(InductorCompiler, "compile_boxed", spy)
    _reset_capture()
    with aotgrad.config.patch(graph_cache=False):
        yield seen
    _reset_capture()


def _facade_compile(*args: Any, **kwargs: Any) -> Any:
    import compiler

    return compiler.compile(*args, **kwargs)


def _reset_capture() -> None:
    if HAS_FACADE:
        import compiler

        compiler.reset()


def _program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x @ w)
    b = torch.tanh(a @ w)
    return (b * b).sum()


def _inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(64, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)]


# ------------------------------------------------------------------------ the convention


def test_backward_takes_a_list_clears_it_and_frees_inputs(
        boxed_compiles: list[tuple[Any, Any]]) -> None:
    compiled = aotgrad.aot_function(_program, InductorCompiler({}))
    x, w = _inputs()
    compiled(x, w).backward()
    ((gm, bw),) = boxed_compiles
    assert isinstance(bw, CompiledGraph) and bw.boxed_call
    assert bw.wrapper_source.startswith("def call(args):\n")
    assert "    args.clear()\n" in bw.wrapper_source
    assert "    del arg0\n" in bw.wrapper_source
    torch.manual_seed(1)
    _boxed_call_equals_graph(bw, gm)


def test_saved_activation_dies_inside_the_backward(
        boxed_compiles: list[tuple[Any, Any]]) -> None:
    compiled = aotgrad.aot_function(_program, InductorCompiler({}))
    x, w = _inputs()
    compiled(x, w).backward()  # NOTE: compiles the backward
    assert boxed_compiles and boxed_compiles[-1][1].boxed_call
    x.grad = w.grad = None
    watched, mode = saved_alive_during_backward(lambda: compiled(x, w), [x, w])
    assert freed_before_last_matmul(watched, mode), (watched, mode.alive, mode.ops)
    want_x, want_w = _inputs()
    _program(want_x, want_w).backward()
    torch.testing.assert_close(x.grad, want_x.grad)
    torch.testing.assert_close(w.grad, want_w.grad)


def _boxed_graph(fn: Callable[..., Any], inputs: list[torch.Tensor]) -> CompiledGraph:
    return compile_aten(trace_aten(fn, inputs), list(inputs), boxed=True)


def test_inputs_returned_or_viewed_by_an_output_are_kept() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return a.t(), (a * b).sum(0), b.view(-1)

    a, b = torch.randn(6, 5), torch.randn(6, 5)
    compiled = _boxed_graph(fn, [a, b])
    assert "del arg0" not in compiled.wrapper_source
    assert "del arg1" not in compiled.wrapper_source
    listed = [a, b]
    got = compiled(listed)
    assert listed == []
    for g, e in zip(got, fn(a, b)):
        torch.testing.assert_close(g, e)
    assert got[0].data_ptr() == a.data_ptr() and got[2].data_ptr() == b.data_ptr()


def test_an_input_no_step_reads_is_freed_first() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor]:
        return ((a * 2) @ b,)

    a, b, c = torch.randn(4, 3), torch.randn(3, 5), torch.randn(7)
    compiled = _boxed_graph(fn, [a, b, c])
    lines = compiled.wrapper_source.splitlines()
    assert lines[1:4] == ["    arg0, arg1, arg2 = args", "    args.clear()", "    del arg2"]
    (got,) = compiled([a, b, c])
    torch.testing.assert_close(got, (a * 2) @ b)


def test_a_buffer_no_allocation_takes_over_is_freed_after_its_last_use() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor]:
        return ((a.exp() @ b).sin().sum(0),)  # NOTE: nothing else of exp's layout

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    compiled = compile_aten(trace_aten(fn, [a, b]), [a, b])
    assert "    del buf0\n" in compiled.wrapper_source, compiled.wrapper_source
    torch.testing.assert_close(compiled(a, b)[0], fn(a, b)[0])


# ------------------------------------------------------------------------ models vs eager


class _Attention(nn.Module):
    """A GPT-2 block: layer norm, causal multi-head SDPA, GELU MLP, residuals."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def _mlp() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 8))
    return model, torch.randn(32, 16)


def _cnn() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.BatchNorm2d(16),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))
    return model, torch.randn(4, 3, 16, 16)


def _gpt2_block() -> tuple[nn.Module, torch.Tensor]:
    return nn.Sequential(_Attention(), _Attention()), torch.randn(2, 16, 32)


MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "mlp": _mlp, "cnn_batch_norm": _cnn, "gpt2_attention": _gpt2_block}


def _twins(name: str) -> tuple[nn.Module, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model, x = MODELS[name]()
    reference = MODELS[name]()[0]
    reference.load_state_dict(model.state_dict())
    return model.train(), reference.train(), x


def _assert_same_grads(model: nn.Module, reference: nn.Module) -> None:
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4, msg=name)


@needs_compiler
@pytest.mark.parametrize("name", list(MODELS))
def test_gradients_equal_eager(name: str, boxed_compiles: list[tuple[Any, Any]]) -> None:
    model, reference, x = _twins(name)
    compiled = _facade_compile(model, backend="inductor")
    for _ in range(2):
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
    _assert_same_grads(model, reference)
    for key in ("running_mean", "running_var"):
        for got, want in zip(model.modules(), reference.modules()):
            if isinstance(got, nn.BatchNorm2d):
                torch.testing.assert_close(getattr(got, key), getattr(want, key))
    assert boxed_compiles and all(bw.boxed_call for _, bw in boxed_compiles)


@needs_compiler
@pytest.mark.parametrize("name", list(MODELS))
def test_saved_activations_die_inside_the_model_backward(
        name: str, boxed_compiles: list[tuple[Any, Any]]) -> None:
    model, reference, x = _twins(name)
    # NOTE: the loss inside the compiled graph: every tensor saved is the backward's input
    # (eager's saves of a loss outside would die in eager's own backward, before it)
    compiled = _facade_compile(lambda inp: model(inp).square().mean(), backend="inductor")
    compiled(x).backward()
    reference(x).square().mean().backward()
    assert boxed_compiles and boxed_compiles[-1][1].boxed_call
    state = [*model.parameters(), *model.buffers(), x]
    watched, mode = saved_alive_during_backward(lambda: compiled(x), state)
    reference(x).square().mean().backward()
    assert freed_before_last_matmul(watched, mode), (watched, mode.alive, mode.ops)
    _assert_same_grads(model, reference)


@needs_compiler
def test_retain_graph_backward_twice_equals_eager(
        boxed_compiles: list[tuple[Any, Any]]) -> None:
    model, reference, x = _twins("mlp")
    compiled = _facade_compile(model, backend="inductor")
    loss, want = compiled(x).square().mean(), reference(x).square().mean()
    loss.backward(retain_graph=True)
    loss.backward()
    want.backward(retain_graph=True)
    want.backward()
    _assert_same_grads(model, reference)
    assert boxed_compiles and boxed_compiles[-1][1].boxed_call


@needs_compiler
def test_double_backward_equals_eager(boxed_compiles: list[tuple[Any, Any]]) -> None:
    del boxed_compiles
    model, reference, x = _twins("mlp")
    compiled = _facade_compile(model, backend="inductor")
    for m, fn in ((model, compiled), (reference, reference)):
        inp = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(fn(inp).square().mean(), inp, create_graph=True)
        g.square().sum().backward()
    _assert_same_grads(model, reference)


# ------------------------------------------------------------------------ symbolic sizes


@needs_compiler
def test_symbolic_sizes_backward_is_boxed(boxed_compiles: list[tuple[Any, Any]]) -> None:
    model, reference, _ = _twins("mlp")
    compiled = _facade_compile(model, backend="inductor", dynamic=True)
    for batch in (3, 5, 9, 17):
        x = torch.randn(batch, 16)
        for m in (model, reference):
            m.zero_grad(set_to_none=True)
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
        _assert_same_grads(model, reference)
    symbolic = [(gm, bw) for gm, bw in boxed_compiles if "compile_for_sizes" in
                getattr(bw, "wrapper_source", "")]
    assert symbolic, [bw.wrapper_source for _, bw in boxed_compiles]
    gm, bw = symbolic[0]
    assert bw.boxed_call and bw.wrapper_source.startswith("def call(args):\n")
    # NOTE: a batch of 1 is not what the symbolic code serves: the per-size fallback
    # compiles it (boxed too) and gets the list the wrapper put its inputs back into
    args = [_concrete(n.meta["example_value"], 1) for n in gm.graph.nodes
            if n.op == "placeholder"]
    want = gm(*args)
    listed = list(args)
    got = bw(listed)
    assert listed == []
    for g, e in zip(got, want):
        if e is None:
            assert g is None
        else:
            torch.testing.assert_close(g, e)


def _concrete(example: Any, size: int) -> Any:
    """A random tensor of `example`'s shape (contiguous) with each symbolic size `size`."""
    if isinstance(example, torch.SymInt):
        return size
    shape = [d if isinstance(d, int) else size for d in example.shape]
    return torch.randn(shape, dtype=example.dtype)


# ------------------------------------------------------------------------ CUDA graphs


def test_cudagraphs_on_cpu_keeps_the_boxed_wrapper() -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with config.patch(cudagraphs=True):
        compiled = _boxed_graph(lambda u, v: ((u * 2) @ v,), [a, b])
    assert compiled.boxed_call and compiled.wrapper_source.startswith("def call(args):\n")
    listed = [a, b]
    torch.testing.assert_close(compiled(listed)[0], (a * 2) @ b)
    assert listed == []


@needs_compiler
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU box runs it)")
def test_cudagraphs_backward_runs_the_runner_behind_the_list(
        boxed_compiles: list[tuple[Any, Any]]) -> None:
    from inductor.runtime.cudagraphs import CudaGraphRunner

    model, reference, x = _twins("mlp")
    model, reference, x = model.cuda(), reference.cuda(), x.cuda()
    compiled = _facade_compile(model, backend="inductor", mode="reduce-overhead")
    for _ in range(4):
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
    _assert_same_grads(model, reference)
    bw = boxed_compiles[-1][1]
    assert bw.boxed_call and bw.wrapper_source.startswith("def call(arg0")
    runners = [c.cell_contents for c in bw.call.__closure__ or ()
               if isinstance(c.cell_contents, CudaGraphRunner)]
    assert runners and runners[0].replays > 0


# ------------------------------------------------------------------------ disk forms


def test_disk_form_round_trip_stays_boxed(boxed_compiles: list[tuple[Any, Any]]) -> None:
    compiled = aotgrad.aot_function(_program, InductorCompiler({}))
    x, w = _inputs()
    compiled(x, w).backward()
    gm, bw = boxed_compiles[-1]
    state = InductorCompiler({}).save_compiled(bw, gm)
    assert state["boxed"] is True
    loaded = graph_cache.load_compiled(state)
    assert loaded.boxed_call and loaded.wrapper_source == bw.wrapper_source
    _boxed_call_equals_graph(loaded, gm)


def _boxed_call_equals_graph(boxed: Any, gm: torch.fx.GraphModule) -> None:
    """`boxed` called on a list of random inputs of `gm`'s example shapes clears the list
    and returns what `gm` returns."""
    examples = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]
    args = [torch.randn(e.shape, dtype=e.dtype) for e in examples]
    want = gm(*args)
    listed = list(args)
    got = boxed(listed)
    assert listed == []
    for g, e in zip(got, want):
        # NOTE: random inputs are not a forward's values (tanh's saved output beyond 1):
        # gradients of a few hundred, compared to float32 rounding at that scale
        scale = max(1.0, float(e.abs().max()))
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6 * scale)


def _warm_run(cache: Path) -> dict[str, Any]:
    env = dict(os.environ, INDUCTOR_CACHE_DIR=str(cache), AOTGRAD_DISK_CACHE="1")
    env.pop("AOTGRAD_GRAPH_CACHE", None)
    done = subprocess.run([sys.executable, str(HERE / "_boxed_warm_driver.py"), str(cache)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@needs_compiler
def test_warm_process_runs_the_backward_boxed(tmp_path: Path) -> None:
    cold = _warm_run(tmp_path)
    assert cold["same"] and cold["freed_early"], cold
    assert cold["plans"] > 0 and cold["loaded"] == []
    warm = _warm_run(tmp_path)
    assert warm["same"] and warm["freed_early"], warm
    assert warm["plans"] == 0, warm  # nothing planned: every graph came from the disk
    assert True in warm["loaded"], warm  # the backward, loaded boxed
