"""CUDA graphs for `mode="reduce-overhead"` (option `cudagraphs`): a compiled graph's GPU
work recorded once and replayed, so a call costs one launch instead of one per kernel.

How a call runs (`CudaGraphRunner`):

- The first call runs the wrapper as usual (Triton compiles and tunes its kernels then;
  neither may happen inside a capture) and notes each tensor input's address.
- Later calls replay a **recording** made for their inputs, recording one when none serves
  them. A recording reads some inputs **in place**, at the addresses it was made with:
  parameters, the outputs of live recordings (a forward graph's saved activations, read by
  its backward: they stay where the forward's replays write them), and every input whose
  address has not changed from one call to the next (buffers, tensors marked static,
  anything the caller keeps in place). Other inputs are copied into static buffers of the
  recording before each replay; inputs the graph mutates (batch norm's running statistics)
  are copied back after it when they were copied in.
- A recording serves a call when every input it reads in place is at its recorded address
  (an input that moves is copied by the recordings made from then on). Up to `MAX_LIVE`
  recordings live at once, the least recently used idle one making room for a new one; after
  `MAX_RECORDINGS` recordings the graph runs without CUDA graphs.

**Returned tensors** live in the graph's own memory and a replay writes them again. A
replay never overwrites a tensor that is still referenced: before each replay the runner
checks whether anything outside it (the caller, autograd's saved tensors, a view) still
holds the outputs of its recording; if so it replays a second recording for the same inputs,
with its own memory, and if both are held, the call runs the wrapper without a graph (fresh
outputs). So a returned tensor stays valid as long as it is referenced; the cost of holding
on to outputs (`out = f(x)` kept across the next call) is a second recording's memory. A
training step under CUDA graphs keeps the forward's outputs held until its backward ran, so
forward and backward each have one or two recordings and the backward reads the saved
activations in place.

Bounds checks of GPU kernels are device-side asserts, as in eager CUDA kernels: a replay
that indexes out of bounds fails at the next synchronization. A kernel that reports through
error slots instead has them read after each replay (`runtime/kernel_checks.py`: one sync
per replay) and raises eager's error.

Graphs that cannot be replayed faithfully run without CUDA graphs, logged once on the
`inductor` logger with the reason: inputs or work on the CPU (values read into the
recording once; a GPU op's host-side outputs, attention's empty RNG seed and offset without
dropout, are not work), random ops (the seed is drawn on the CPU per call), and any graph
whose capture raises. On CPU tensors the option does nothing but log that.

An output that is an input or a view of one (a training forward returns inputs it saves
for the backward) is returned over the caller's input at each replay, as the wrapper would.
"""

from __future__ import annotations

import logging
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from inductor.ir.nodes import ExternKernel
from inductor.runtime.kernel_checks import Pending, deferred_checks, raise_deferred

log = logging.getLogger("inductor")

MAX_RECORDINGS = 8
MAX_LIVE = 4
Call = Callable[..., Any]


def mutated_inputs(gm: torch.fx.GraphModule) -> set[int]:
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
    return CudaGraphRunner(call, mutated_inputs(gm))


class _Recording:
    """One captured graph: the inputs it reads in place (position -> address), its static
    buffers for the others, and its outputs."""

    def __init__(self, graph: Any, buffers: dict[int, torch.Tensor], outputs: Any,
                 baseline: list[tuple[torch.Tensor, int]], checks: Pending,
                 in_place: dict[int, int] | None = None,
                 scalars: tuple[object, ...] = ()) -> None:
        self.graph = graph
        self.checks = checks  # NOTE: error slots of checking kernels, read after replays
        self.buffers = buffers
        self.outputs = outputs
        self.baseline = baseline  # NOTE: (output, storage use count held by us alone)
        self.in_place = in_place or {}
        # NOTE: the in-place addresses picked out of a call's in one C call (`serves`)
        positions = sorted(self.in_place)
        self._pick = operator.itemgetter(*positions) if len(positions) > 1 else None
        self._key: Any = (tuple(self.in_place[i] for i in positions) if len(positions) > 1
                          else tuple(self.in_place.items()))
        self.scalars = scalars
        self.last_use = 0
        #: outputs that are views of inputs: position -> (input, size, stride, offset from
        #: the input's own storage offset); a replay returns them over the caller's input
        self.aliases: dict[int, tuple[int, torch.Size, tuple[int, ...], int]] = {}

    def outputs_held(self) -> bool:
        """Whether anything outside the runner still references an output's memory."""
        return any(_use_count(t) > n for t, n in self.baseline)

    def serves(self, ptrs: tuple[int, ...], scalars: tuple[object, ...]) -> bool:
        """Whether a call with these input addresses and scalars can replay this recording:
        every input it reads in place is at the address it was recorded with."""
        if scalars != self.scalars:
            return False
        if self._pick is not None:
            return bool(self._pick(ptrs) == self._key)
        return all(ptrs[i] == p for i, p in self._key)


def copy_input(buf: torch.Tensor, arg: torch.Tensor) -> None:
    """Copy the call's input `arg` into its static buffer `buf` (same sizes and strides).

    NOTE: an input whose elements share memory (an expanded tensor: a stride 0) cannot be
    written element by element (`copy_` refuses such a destination); the memory span both
    address is copied instead, which gives `buf` the same element mapping."""
    if 0 not in arg.stride() or arg.numel() <= 1:
        buf.copy_(arg)
        return
    span = 1 + sum((n - 1) * st for n, st in zip(arg.shape, arg.stride()))
    buf.as_strided((span,), (1,), buf.storage_offset()).copy_(
        arg.as_strided((span,), (1,), arg.storage_offset()))


def _use_count(t: torch.Tensor) -> int:
    return int(torch._C._storage_Use_Count(t.untyped_storage()._cdata))


_DATA_PTR = torch.Tensor.data_ptr

#: The memory of every live recording's outputs (storage address -> recording): an input
#: found here is read in place by a new recording, as its address is stable across replays.
_GRAPH_MEMORY: weakref.WeakValueDictionary[int, _Recording] = weakref.WeakValueDictionary()


def _graph_memory(t: torch.Tensor) -> bool:
    return t.untyped_storage().data_ptr() in _GRAPH_MEMORY


class CudaGraphRunner:
    """Calls a compiled graph through CUDA graph replays (see the module docstring)."""

    def __init__(self, call: Call, mutated: set[int]) -> None:
        self.call = call
        self.mutated = mutated
        self.calls = 0
        self.prev_ptrs: tuple[int, ...] | None = None
        self.all_tensors = False  # NOTE: whether every argument is a tensor (first call)
        #: inputs seen at a new address from one call to the next: always copied
        self.moving: set[int] = set()
        self.recordings: list[_Recording] = []
        self.recorded = 0
        self.disabled: str | None = None
        self.replays = 0

    @property
    def static(self) -> set[int]:
        """The inputs the latest recording reads in place."""
        return set(self.recordings[-1].in_place) if self.recordings else set()

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.disabled is not None:
            return self.call(*args)
        if self.all_tensors:  # NOTE: the common case, without a Python loop
            ptrs: tuple[int, ...] = tuple(map(_DATA_PTR, args))
            scalars: tuple[object, ...] = ()
        else:
            ptrs = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else 0 for a in args)
            scalars = tuple(a for a in args if not isinstance(a, torch.Tensor))
        prev, self.prev_ptrs = self.prev_ptrs, ptrs
        if prev is None:
            self.all_tensors = all(isinstance(a, torch.Tensor) for a in args)
            return self.call(*args)
        if ptrs != prev:
            self.moving |= {i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                            and ptrs[i] != prev[i] and not _stable(a)}
        rec = next((r for r in self.recordings
                    if r.serves(ptrs, scalars) and not r.outputs_held()), None)
        if rec is None:
            rec = self._record(args, ptrs, scalars)
            if rec is None:  # NOTE: no recording free for these inputs; fresh outputs
                return self.call(*args)
        rec.last_use = self.calls
        for i, buf in rec.buffers.items():
            copy_input(buf, args[i])
        rec.graph.replay()
        self.replays += 1
        raise_deferred(rec.checks)
        for i in self.mutated:
            if i in rec.buffers:
                args[i].copy_(rec.buffers[i])
        # NOTE: new tensors over the outputs' memory: while the caller holds one, its
        # storage has one user more than the recording's own (`outputs_held`)
        out = [o.detach() if isinstance(o, torch.Tensor) else o for o in rec.outputs]
        for k, (i, size, stride, offset) in rec.aliases.items():
            a = args[i]  # NOTE: an output that is (a view of) an input: the caller's input
            same = (a.size(), a.stride(), 0) == (size, stride, offset)
            out[k] = a if same else a.as_strided(size, stride, a.storage_offset() + offset)
        return tuple(out)

    def _record(self, args: Sequence[Any], ptrs: tuple[int, ...],
                scalars: tuple[object, ...]) -> _Recording | None:
        in_place = {i: ptrs[i] for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                    and (i not in self.moving or _stable(a))}
        if sum(r.in_place == in_place for r in self.recordings) >= 2:
            return None  # NOTE: two recordings for these inputs, both outputs still held
        if len(self.recordings) >= MAX_LIVE:
            idle = [r for r in self.recordings if not r.outputs_held()]
            if not idle:
                return None
            self.recordings.remove(min(idle, key=lambda r: r.last_use))
        if self.recorded >= MAX_RECORDINGS:
            self._disable(f"recorded {MAX_RECORDINGS} times (inputs keep moving)")
            return None
        self.recorded += 1
        buffers = {i: torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                   for i, a in enumerate(args)
                   if isinstance(a, torch.Tensor) and i not in in_place}
        for i, buf in buffers.items():
            copy_input(buf, args[i])
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
        aliases = _input_aliases(outputs, static_args)
        outs = [o for k, o in enumerate(outputs)
                if isinstance(o, torch.Tensor) and k not in aliases]
        baseline = [(o, _use_count(o)) for o in outs]
        rec = _Recording(graph, buffers, outputs, baseline, pending, in_place, scalars)
        rec.aliases = aliases
        for o in outs:
            _GRAPH_MEMORY[o.untyped_storage().data_ptr()] = rec
        self.recordings.append(rec)
        log.info("cudagraphs: recorded (%d static inputs, %d copied)", len(in_place),
                 len(buffers))
        return rec

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.recordings.clear()
        log.info("cudagraphs: graph runs without CUDA graphs from now on: %s", reason)


def _input_aliases(outputs: Sequence[Any], inputs: Sequence[Any],
                   ) -> dict[int, tuple[int, torch.Size, tuple[int, ...], int]]:
    """The outputs of a recording that share memory with one of its inputs (a training
    forward returns inputs it saves for the backward): position -> (input position, size,
    stride, storage offset relative to the input's)."""
    storages: dict[int, list[int]] = {}
    for i, a in enumerate(inputs):
        if isinstance(a, torch.Tensor):
            storages.setdefault(a.untyped_storage().data_ptr(), []).append(i)
    out: dict[int, tuple[int, torch.Size, tuple[int, ...], int]] = {}
    for k, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            continue
        cands = storages.get(o.untyped_storage().data_ptr())
        if cands:
            i = next((c for c in cands if inputs[c].data_ptr() == o.data_ptr()), cands[0])
            out[k] = (i, o.size(), o.stride(), o.storage_offset() - inputs[i].storage_offset())
    return out


def _stable(t: torch.Tensor) -> bool:
    """Whether an input's address is stable across calls: a parameter, or memory of a live
    recording's outputs (a forward graph's saved activations read by its backward)."""
    return isinstance(t, torch.nn.Parameter) or _graph_memory(t)
