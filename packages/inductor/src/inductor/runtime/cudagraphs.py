"""CUDA graphs for `mode="reduce-overhead"` (option `cudagraphs`): a compiled graph's GPU
work recorded once and replayed, so a call costs one launch instead of one per kernel.

How a call runs (`CudaGraphRunner`):

- The first call runs the wrapper as usual (Triton compiles and tunes its kernels then;
  neither may happen inside a capture) and notes each tensor input's address.
- The second call records the graph. **Static inputs** keep their addresses and are read
  in place: parameters, and every input whose address did not change between the first two
  calls (buffers, tensors marked static, anything the caller keeps in place). Other inputs
  are copied into static buffers of the graph before each replay; inputs the graph mutates
  (batch norm's running statistics) are copied back after it.
- Later calls check that every static input is where it was (else the input is treated as
  copied from then on and the graph recorded again, at most `MAX_RECORDINGS` times), copy
  the other inputs in, and replay.

**Returned tensors** live in the graph's own memory and a replay writes them again. A
replay never overwrites a tensor that is still referenced: before each replay the runner
checks whether anything outside it (the caller, autograd's saved tensors, a view) still
holds the outputs of its recording; if so it replays a second recording with its own
memory, and if both are held, the call runs the wrapper without a graph (fresh outputs).
So a returned tensor stays valid as long as it is referenced; the cost of holding on to
outputs (`out = f(x)` kept across the next call) is a second recording's memory.

Bounds checks of GPU kernels are device-side asserts, as in eager CUDA kernels: a replay
that indexes out of bounds fails at the next synchronization. A kernel that reports through
error slots instead has them read after each replay (`runtime/kernel_checks.py`: one sync
per replay) and raises eager's error.

Graphs that cannot be replayed faithfully run without CUDA graphs, logged once on the
`inductor` logger with the reason: inputs or work on the CPU (values read into the
recording once; a GPU op's host-side outputs, attention's empty RNG seed and offset without
dropout, are not work), random ops (the seed is drawn on the CPU per call), an output sharing
memory with an input, and any graph whose capture raises. On CPU tensors the option does
nothing but log that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from inductor.ir.nodes import ExternKernel
from inductor.runtime.kernel_checks import Pending, deferred_checks, raise_deferred

log = logging.getLogger("inductor")

MAX_RECORDINGS = 4
Call = Callable[..., Any]


def _mutated_inputs(gm: torch.fx.GraphModule) -> set[int]:
    """Positions of the graph inputs an op writes in place."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    out: set[int] = set()
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for arg, value in zip(schema.arguments, node.args):
            if arg.alias_info is not None and arg.alias_info.is_write and value in index:
                out.add(index[value])
        for name, value in node.kwargs.items():
            arg = next((a for a in schema.arguments if a.name == name), None)
            if arg is not None and arg.alias_info is not None and arg.alias_info.is_write \
                    and value in index:
                out.add(index[value])
    return out


def runs_on_cpu(steps: Sequence[object]) -> bool:
    """Whether a planned graph's steps (fused groups, extern calls) do work on the CPU.
    A GPU op's host-side outputs (attention's RNG seed and offset, empty without dropout)
    are not: a replay needs nothing from them, unless the op draws random numbers."""
    for step in steps:
        if isinstance(step, ExternKernel):
            if _extern_on_cpu(step):
                return True
            continue
        nodes = getattr(step, "nodes", None) or []
        if any(n.layout.device.type == "cpu" for n in nodes):
            return True
    return False


def _extern_on_cpu(k: ExternKernel) -> bool:
    if not any(o.layout.device.type == "cpu" for o in k.outputs):
        return False
    leaves = [a for arg in (*k.args, *k.kwargs.values())
              for a in (arg if isinstance(arg, (list, tuple)) else (arg,))]
    if not any(getattr(getattr(a, "device", None), "type", None) == "cuda" for a in leaves):
        return True
    schema = getattr(k.op, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "dropout_p" in names:
        pos = names.index("dropout_p")
        p = k.kwargs.get("dropout_p", k.args[pos] if pos < len(k.args) else 0.0)
        return not isinstance(p, (int, float)) or p != 0
    return False


def unsupported_reason(wrapper_source: str, example_inputs: Sequence[object],
                       cpu_work: bool) -> str | None:
    """Why this compiled graph cannot be replayed as a CUDA graph, or None."""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if not any(t.is_cuda for t in tensors):
        return "no CUDA tensors"
    if any(not t.is_cuda for t in tensors):
        return "an input is on the CPU"
    if cpu_work:
        return "part of the graph runs on the CPU (random seeds, CPU tensors)"
    if ".item()" in wrapper_source:
        return "the wrapper reads a value back to the CPU"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    return None


def cudagraph_call(call: Call, gm: torch.fx.GraphModule, wrapper_source: str,
                   example_inputs: Sequence[object], cpu_work: bool) -> Call:
    """`call` replayed as a CUDA graph where it can be (see the module docstring); else
    `call` itself, with one log line saying why."""
    reason = unsupported_reason(wrapper_source, example_inputs, cpu_work)
    if reason is not None:
        log.info("cudagraphs: graph runs without CUDA graphs: %s", reason)
        return call
    return CudaGraphRunner(call, _mutated_inputs(gm))


class _Recording:
    """One captured graph: its static input buffers and outputs."""

    def __init__(self, graph: Any, buffers: dict[int, torch.Tensor], outputs: Any,
                 baseline: list[tuple[torch.Tensor, int]], checks: Pending) -> None:
        self.graph = graph
        self.checks = checks  # NOTE: error slots of checking kernels, read after replays
        self.buffers = buffers
        self.outputs = outputs
        self.baseline = baseline  # NOTE: (output, storage use count held by us alone)

    def outputs_held(self) -> bool:
        """Whether anything outside the runner still references an output's memory."""
        return any(_use_count(t) > n for t, n in self.baseline)


def _use_count(t: torch.Tensor) -> int:
    return int(torch._C._storage_Use_Count(t.untyped_storage()._cdata))


class CudaGraphRunner:
    """Calls a compiled graph through CUDA graph replays (see the module docstring)."""

    def __init__(self, call: Call, mutated: set[int]) -> None:
        self.call = call
        self.mutated = mutated
        self.calls = 0
        self.first_ptrs: tuple[int, ...] | None = None
        self.static: set[int] = set()
        self.static_ptrs: dict[int, int] = {}
        self.scalars: tuple[object, ...] = ()
        self.recordings: list[_Recording] = []
        self.recorded = 0
        self.disabled: str | None = None
        self.replays = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.disabled is not None:
            return self.call(*args)
        ptrs = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else 0 for a in args)
        if self.first_ptrs is None:
            self.first_ptrs = ptrs
            return self.call(*args)
        if not self.recordings:
            self.static = {i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and (
                isinstance(a, torch.nn.Parameter) or ptrs[i] == self.first_ptrs[i])}
        elif not self._still_valid(args, ptrs):
            self.recordings.clear()
        rec = next((r for r in self.recordings if not r.outputs_held()), None)
        if rec is None and len(self.recordings) < 2:
            rec = self._record(args, ptrs)
            if rec is None:
                return self.call(*args)
        if rec is None:  # NOTE: both recordings' outputs are still referenced
            return self.call(*args)
        for i, buf in rec.buffers.items():
            buf.copy_(args[i])
        rec.graph.replay()
        self.replays += 1
        raise_deferred(rec.checks)
        for i in self.mutated:
            if i in rec.buffers:
                args[i].copy_(rec.buffers[i])
        # NOTE: new tensors over the outputs' memory: while the caller holds one, its
        # storage has one user more than the recording's own (`outputs_held`)
        return tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in rec.outputs)

    def _still_valid(self, args: Sequence[Any], ptrs: tuple[int, ...]) -> bool:
        scalars = tuple(a for a in args if not isinstance(a, torch.Tensor))
        moved = {i for i in self.static if ptrs[i] != self.static_ptrs[i]}
        if scalars == self.scalars and not moved:
            return True
        # NOTE: an input that moved is copied from now on (a parameter is re-read in place)
        self.static -= {i for i in moved if not isinstance(args[i], torch.nn.Parameter)}
        log.info("cudagraphs: static inputs %s moved or scalars changed; recording again",
                 sorted(moved))
        return False

    def _record(self, args: Sequence[Any], ptrs: tuple[int, ...]) -> _Recording | None:
        if self.recorded >= MAX_RECORDINGS:
            self._disable(f"recorded {MAX_RECORDINGS} times (inputs keep moving)")
            return None
        self.recorded += 1
        self.static_ptrs = {i: ptrs[i] for i in self.static}
        self.scalars = tuple(a for a in args if not isinstance(a, torch.Tensor))
        buffers = {i: torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                   for i, a in enumerate(args)
                   if isinstance(a, torch.Tensor) and i not in self.static}
        for i, buf in buffers.items():
            buf.copy_(args[i])
        static_args = [buffers.get(i, a) for i, a in enumerate(args)]
        try:
            if not self.mutated:
                # NOTE: a warm-up on a side stream first, as CUDA graph capture expects
                # (not with mutated inputs: a warm-up would update running statistics twice)
                stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    self.call(*static_args)
                torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with deferred_checks() as pending, torch.cuda.graph(graph):
                outputs = self.call(*static_args)
        except Exception as e:  # noqa: BLE001 - any capture failure falls back, logged
            torch.cuda.synchronize()
            self._disable(f"capture failed: {type(e).__name__}: {e}")
            return None
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        inputs |= {b.untyped_storage().data_ptr() for b in buffers.values()}
        outs = [o for o in outputs if isinstance(o, torch.Tensor)]
        if any(o.untyped_storage().data_ptr() in inputs for o in outs):
            self._disable("an output shares memory with an input")
            return None
        baseline = [(o, _use_count(o)) for o in outs]
        rec = _Recording(graph, buffers, outputs, baseline, pending)
        self.recordings.append(rec)
        log.info("cudagraphs: recorded (%d static inputs, %d copied)", len(self.static),
                 len(buffers))
        return rec

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.recordings.clear()
        log.info("cudagraphs: graph runs without CUDA graphs from now on: %s", reason)
