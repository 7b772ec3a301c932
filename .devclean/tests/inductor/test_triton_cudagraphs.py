"""`mode="reduce-overhead"` (option `cudagraphs`, `runtime/cudagraphs.py`): compiled graphs
replayed as CUDA graphs on CUDA tensors, against eager: static inputs read in place, others
copied in (a static input that moves too), outputs still referenced never overwritten,
an out-of-bounds index a device-side assert, logged fallbacks (random ops, CPU work), and a no-op
with a log line on CPU tensors."""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aten_trace import trace_aten
from inductor import CompiledGraph, compile_aten, config
from inductor.ir.layout import Layout
from inductor.ir.nodes import BufferView, ExternKernel, ExternOutput
from inductor.runtime.cudagraphs import (
    CudaGraphRunner,
    _Recording,
    _use_count,
    copy_input,
    mutated_inputs,
    runs_on_cpu,
    unsupported_reason,
)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU "
                               "box runs it)")


def _compile(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> CompiledGraph:
    gm = trace_aten(fn, inputs)
    with config.patch(cudagraphs=True, verify_ir=True):
        return compile_aten(gm, list(inputs))


def test_inputs_are_copied_into_static_buffers_even_when_expanded() -> None:
    """`copy_input` (a copied input before each replay): plain tensors element by element;
    an expanded one (a broadcast gradient, a user's `x.expand(...)`), which `copy_` cannot
    write into a buffer of the same strides, by the memory both address."""
    for arg in (torch.randn(4, 5), torch.randn(5, 4).t(), torch.randn(()).expand(4, 5),
                torch.randn(4, 1).expand(4, 5), torch.randn(10)[3:7, None].expand(4, 6)):
        buf = torch.empty_strided(arg.shape, arg.stride())
        copy_input(buf, arg)
        assert buf.stride() == arg.stride()
        torch.testing.assert_close(buf, arg)


def test_on_cpu_tensors_it_is_a_no_op_with_a_log_line(caplog: Any) -> None:
    x = torch.randn(4, 8)
    with caplog.at_level(logging.INFO, logger="inductor"):
        compiled = _compile(lambda v: (v * 2).sum(-1), [x])
    assert not isinstance(compiled.call, CudaGraphRunner)
    assert "graph runs without CUDA graphs: no CUDA tensors" in caplog.text
    torch.testing.assert_close(compiled(x)[0], (x * 2).sum(-1))


def test_what_cannot_be_replayed_is_named() -> None:
    assert unsupported_reason("", [torch.empty(2)], False) == "no CUDA tensors"
    if torch.cuda.is_available():
        cuda = torch.empty(2, device="cuda")
        assert unsupported_reason("", [cuda, torch.empty(2)], False) == \
            "an input is on the CPU"
        assert "CPU" in str(unsupported_reason("", [cuda], True))
        assert "reads a value back" in str(unsupported_reason("x.item()", [cuda], False))
        assert unsupported_reason("", [cuda], False) is None


def _attention(dropout_p: float, device: str = "cuda") -> ExternKernel:
    """An extern call of efficient attention: its RNG seed and offset are CPU outputs."""
    dev = torch.device(device)
    q = BufferView(ExternOutput("q", Layout.contiguous((1, 2, 4, 8), torch.float32, dev)),
                   Layout.contiguous((1, 2, 4, 8), torch.float32, dev))
    op = torch.ops.aten._scaled_dot_product_efficient_attention.default
    k = ExternKernel("c0", op, (q, q, q, None, False, dropout_p), {}, None)
    cpu = torch.device("cpu")
    k.outputs = [ExternOutput("o", Layout.contiguous((1, 2, 4, 8), torch.float32, dev)),
                 ExternOutput("s", Layout.contiguous((), torch.int64, cpu)),
                 ExternOutput("f", Layout.contiguous((), torch.int64, cpu))]
    return k


def test_a_gpu_ops_host_side_outputs_are_not_cpu_work() -> None:
    """Attention's seed and offset live on the CPU: without dropout, nothing a replay needs
    (GPT-2, T5, ViT ran without CUDA graphs for them); with dropout, or an op whose inputs
    are all on the CPU, the graph does CPU work."""
    assert not runs_on_cpu([_attention(0.0)])
    assert runs_on_cpu([_attention(0.1)])
    assert runs_on_cpu([_attention(0.0, "cpu")])


def test_inputs_written_in_place_are_found() -> None:
    def f(x: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        stats.mul_(0.5)
        return x + 1

    gm = trace_aten(f, [torch.randn(3), torch.randn(3)])
    mutated = mutated_inputs(gm)
    # NOTE: a functionalized graph copies back into the input (copy_); the tracer here may
    # keep the in-place op itself: either way position 1 and only it
    assert mutated == {1}, gm.code


def test_a_recordings_outputs_count_as_held_while_any_alias_lives() -> None:
    # NOTE: the rule that keeps replays from overwriting tensors the caller still holds;
    # storage use counts work the same on CPU tensors
    out = torch.randn(4, 4)
    rec = _Recording(None, {}, (out,), [(out, _use_count(out))], [])
    assert not rec.outputs_held()
    returned = out.detach()  # NOTE: what a replay hands out
    assert rec.outputs_held()
    row = returned[1]
    del returned
    assert rec.outputs_held()  # NOTE: a view keeps the memory in use
    del row
    assert not rec.outputs_held()

def test_a_recording_serves_calls_whose_in_place_inputs_did_not_move() -> None:
    def rec(in_place: dict[int, int], scalars: tuple[object, ...] = ()) -> _Recording:
        return _Recording(None, {}, (), [], [], in_place, scalars)

    many, one, none = rec({0: 5, 2: 7}), rec({1: 9}), rec({}, (3,))
    assert many.serves((5, 1, 7), ()) and many.serves((5, 2, 7), ())
    assert not many.serves((5, 1, 8), ()) and not many.serves((6, 1, 7), ())
    assert not many.serves((5, 1, 7), (1,))  # NOTE: scalars are part of what was recorded
    assert one.serves((0, 9), ()) and not one.serves((9, 0), ())
    assert none.serves((1, 2), (3,)) and not none.serves((1, 2), (4,))


def test_a_graph_loaded_from_disk_is_replayed_where_its_saved_state_allows(caplog: Any,
                                                                          ) -> None:
    """A warm process with `cudagraphs` on replays a loaded graph as a cold one would: the
    saved state says whether it can (and which inputs it writes). On CPU tensors it cannot,
    and says why; a state that allows it loads behind a runner."""
    from inductor.backend import InductorCompiler
    from inductor.runtime import graph_cache

    def f(x: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        stats.add_(1)
        return x * 2 + stats

    x, stats = torch.randn(4, 4), torch.zeros(4)
    gm = trace_aten(f, [x, stats])
    compiled = compile_aten(gm, [x, stats])
    state = InductorCompiler({}).save_compiled(compiled, gm)
    assert state["cudagraph_reason"] == "no CUDA tensors"
    assert state["cudagraph_mutated"] == [1]
    with config.patch(cudagraphs=True), caplog.at_level(logging.INFO, logger="inductor"):
        plain = graph_cache.load_compiled(state)
        assert not isinstance(plain.call, CudaGraphRunner)
        assert "without CUDA graphs: no CUDA tensors" in caplog.text
        runner = graph_cache.load_compiled({**state, "cudagraph_reason": None}).call
    assert isinstance(runner, CudaGraphRunner) and runner.mutated == {1}
    assert not isinstance(graph_cache.load_compiled({**state, "cudagraph_reason": None}).call,
                          CudaGraphRunner)  # NOTE: `cudagraphs` off in this process


@needs_gpu
def test_replays_match_eager_and_held_outputs_are_not_overwritten() -> None:
    w = torch.nn.Parameter(torch.randn(16, 8, device="cuda"))
    b = torch.randn(8, device="cuda")

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(F.gelu(x @ w + b), -1)

    xs = [torch.randn(4, 16, device="cuda") for _ in range(6)]
    compiled = _compile(f, [xs[0], w, b])
    runner = compiled.call
    assert isinstance(runner, CudaGraphRunner)
    with torch.no_grad():
        outs = [compiled(x, w, b)[0] for x in xs]  # NOTE: every output kept
        for x, got in zip(xs, outs):
            torch.testing.assert_close(got, f(x, w, b), atol=1e-5, rtol=1e-5)
    assert runner.replays >= 1 and runner.disabled is None
    assert len(runner.recordings) <= 2
    with torch.no_grad():  # NOTE: outputs dropped each time: one recording serves
        for x in xs:
            torch.testing.assert_close(compiled(x, w, b)[0], f(x, w, b), atol=1e-5,
                                       rtol=1e-5)


@needs_gpu
def test_a_static_input_that_moves_is_copied_from_then_on() -> None:
    def f(x: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        return x * 2 + stats

    x, stats = torch.randn(8, 4, device="cuda"), torch.ones(4, device="cuda")
    compiled = _compile(f, [x, stats])
    runner = compiled.call
    assert isinstance(runner, CudaGraphRunner)
    for i in range(3):
        stats.add_(1)  # NOTE: read in place: the replay sees the new values
        torch.testing.assert_close(compiled(x + i, stats)[0], f(x + i, stats))
    assert 1 in runner.static
    for i in range(3):
        moved = torch.full((4,), float(i), device="cuda")
        torch.testing.assert_close(compiled(x, moved)[0], f(x, moved))
    assert 1 not in runner.static and runner.disabled is None


_OUT_OF_BOUNDS = """
import torch, torch.nn.functional as F
from aten_trace import trace_aten
from inductor import compile_aten, config
w = torch.randn(10, 4, device="cuda")
f = lambda i, w: F.embedding(i, w) * 2
idx = torch.tensor([[1, 9], [0, 3]], device="cuda")
with config.patch(cudagraphs=True):
    compiled = compile_aten(trace_aten(f, [idx, w]), [idx, w])
for _ in range(3):
    torch.testing.assert_close(compiled(idx.clone(), w)[0], f(idx, w))
print("replayed", flush=True)
compiled(torch.tensor([[1, 10], [0, 3]], device="cuda"), w)[0].sum().item()
print("no error", flush=True)
"""


@needs_gpu
def test_an_index_out_of_bounds_in_a_replay_is_a_device_side_assert() -> None:
    """As in eager CUDA, the bounds check of a GPU kernel is a device-side assert: the bad
    call fails at its next synchronization (in a child process: the assert ends its CUDA
    context)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _OUT_OF_BOUNDS], check=False, capture_output=True,
                          text=True, env=env, cwd=os.path.dirname(__file__), timeout=300)
    assert "replayed" in done.stdout, done.stderr[-2000:]
    assert "no error" not in done.stdout and done.returncode != 0
    assert "device-side assert" in done.stderr or "out of bounds" in done.stderr, \
        done.stderr[-2000:]


@needs_gpu
def test_random_graphs_fall_back_with_a_log_line(caplog: Any) -> None:
    x = torch.ones(64, 64, device="cuda")
    with caplog.at_level(logging.INFO, logger="inductor"):
        compiled = _compile(lambda v: F.dropout(v, 0.5, training=True), [x])
    assert "graph runs without CUDA graphs" in caplog.text
    a, b = compiled(x)[0], compiled(x)[0]
    assert not torch.equal(a, b)  # NOTE: a fresh seed per call, as eager


@needs_gpu
def test_a_consumer_reads_a_recordings_outputs_in_place_and_stays_exact() -> None:
    """A backward-like graph reads a forward-like graph's outputs (its saved activations)
    where the forward's replays wrote them, not copied; whichever order the two are called
    in and whatever is held, values stay eager's."""
    w = torch.nn.Parameter(torch.randn(16, 16, device="cuda"))

    def fwd(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x @ w
        return h.relu(), torch.tanh(h)

    def bwd(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return a * 2 - t

    xs = [torch.randn(8, 16, device="cuda") for _ in range(8)]
    producer = _compile(fwd, [xs[0], w])
    a0, t0 = producer(xs[0], w)
    consumer = _compile(bwd, [a0, t0])
    runner = consumer.call
    assert isinstance(runner, CudaGraphRunner)
    for x in xs:  # NOTE: forward, then backward, outputs dropped: a training loop
        a, t = producer(x, w)
        torch.testing.assert_close(consumer(a, t)[0], bwd(*fwd(x, w)))
        del a, t
    assert runner.replays >= 4 and runner.recordings[-1].buffers == {}
    assert {0, 1} <= runner.static
    for x1, x2 in zip(xs[::2], xs[1::2]):  # NOTE: two forwards held, then two backwards
        first, second = producer(x1, w), producer(x2, w)
        got2, got1 = consumer(*second)[0].clone(), consumer(*first)[0].clone()
        torch.testing.assert_close(got1, bwd(*fwd(x1, w)))
        torch.testing.assert_close(got2, bwd(*fwd(x2, w)))
        del first, second
    assert runner.disabled is None


@needs_gpu
def test_outputs_that_are_inputs_come_back_over_the_callers_inputs() -> None:
    """A training forward returns inputs it saves for the backward: replayed, such an output
    is the caller's input (or the same view of it), never the recording's copy."""
    w = torch.nn.Parameter(torch.randn(16, 16, device="cuda"))

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x, x[2:], w, torch.relu(x @ w)

    compiled = _compile(f, [torch.randn(8, 16, device="cuda"), w])
    runner = compiled.call
    assert isinstance(runner, CudaGraphRunner)
    for _ in range(5):
        x = torch.randn(8, 16, device="cuda")
        got = compiled(x, w)
        assert got[0].data_ptr() == x.data_ptr() and got[2].data_ptr() == w.data_ptr()
        assert got[1].data_ptr() == x[2:].data_ptr() and got[1].shape == (6, 16)
        torch.testing.assert_close(got[3], torch.relu(x @ w))
    assert runner.replays >= 3 and runner.disabled is None


@needs_gpu
def test_reduce_overhead_training_matches_eager(caplog: Any) -> None:
    compiler = pytest.importorskip("compiler")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(),
                                torch.nn.LayerNorm(32), torch.nn.Linear(32, 5)).cuda()
    ref = copy.deepcopy(model)
    compiler.reset()
    compiled = compiler.compile(model, backend="inductor", mode="reduce-overhead")
    caplog.set_level(logging.INFO, logger="inductor")
    for _ in range(4):
        x = torch.randn(16, 12, device="cuda")
        target = torch.randint(0, 5, (16,), device="cuda")
        losses = []
        for m in (compiled, ref):
            for p in m.parameters():
                p.grad = None
            loss = F.cross_entropy(m(x), target)
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1], atol=1e-5, rtol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
        with torch.no_grad():
            for p in (*model.parameters(), *ref.parameters()):
                p -= 0.1 * p.grad  # NOTE: parameters change in place between steps
    # NOTE: the backward reads the forward's saved activations in place; only the step's
    # input (saved by the first linear) and the loss gradient are copied in
    recorded = re.findall(r"recorded \((\d+) static inputs, (\d+) copied\)", caplog.text)
    assert recorded and max(int(c) for _, c in recorded) <= 2, recorded
