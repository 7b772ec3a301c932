"""Buffer planning: when each buffer is allocated, reused and freed.

In: the scheduled steps, the graph's buffers, inputs and outputs. Out: a `MemoryPlan` that
says, per step, which buffers the wrapper allocates before it (fresh, or taking over a
freed buffer of the same dtype and extent of memory, in its own sizes and strides) and
which it frees or returns to the pool after it (only those a later allocation takes over:
the others are freed). Freed outputs of matmuls (`FRESH_OUTPUT_OPS`) are pooled too. The
wrapper only renders the plan; targets never see it.

A boxed wrapper (`free_inputs`: it holds the only references to its inputs, `aotgrad.boxed`)
frees its inputs too: each after its last use, one that no step reads before the first
step. An input is never pooled (its storage is the caller's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from inductor.ir.layout import Layout
from inductor.ir.nodes import Buffer, BufferView, ConstantBuffer, ExternKernel, InputBuffer
from inductor.scheduler.fusion import FusedGroup, Step


@dataclass(frozen=True, slots=True)
class Allocation:
    """`name` is allocated before its step: fresh when `reuse` is None, else it takes over
    the storage of the freed buffer `reuse` (same size, strides, dtype and device)."""

    name: str
    reuse: str | None


@dataclass
class StepMemory:
    allocate: list[Allocation] = field(default_factory=list)
    free: list[str] = field(default_factory=list)  # deleted after the step
    pool: list[str] = field(default_factory=list)  # kept for reuse after the step


@dataclass
class MemoryPlan:
    steps: list[StepMemory]
    allocated: set[str]  # buffers the wrapper allocates (storage offset 0)
    #: inputs deleted before the first step (no step reads them, no output is one)
    free_first: list[str] = field(default_factory=list)


#: Extern ops whose one output is a fresh tensor in its meta layout (row-major; the wrapper
#: checks none of them): a freed output of theirs is pooled like a buffer the wrapper
#: allocated. (A convolution's output may come in another memory format than its meta.)
FRESH_OUTPUT_OPS: frozenset[object] = frozenset(
    getattr(torch.ops.aten, name).default for name in ("mm", "addmm", "bmm", "baddbmm"))


def layout_key(lay: Layout) -> tuple[Any, ...]:
    """Buffers with equal keys can share storage: the same dtype and device and, where sizes
    and strides are numbers, the same extent of memory (the wrapper reinterprets the storage
    with the new sizes and strides: a `[32, 64, 56, 56]` buffer takes over a freed
    `[32, 256, 28, 28]` one); with symbolic sizes, the same layout."""
    dims = (*lay.size, *lay.stride)
    if all(isinstance(d, int) for d in dims):
        extent = (1 + sum((n - 1) * st for n, st in zip(lay.size, lay.stride))
                  if all(n > 0 for n in lay.size) else 0)
        return ("extent", extent, lay.dtype, lay.device)
    return (lay.size, lay.stride, lay.dtype, lay.device)


def last_uses(steps: list[Step], outputs: list[object]) -> tuple[dict[str, int], set[str]]:
    """(buffer -> position of its last step, buffers that must outlive the call)."""
    last: dict[str, int] = {}
    forever: set[str] = set()
    for pos, step in enumerate(steps):
        if isinstance(step, FusedGroup):
            names = (step.reads() | step.writes()) - step.local
        else:
            names = set(step.reads) | {o.name for o in step.outputs}
        for n in names:
            last[n] = pos
    for out in outputs:
        if isinstance(out, BufferView):
            forever.add(out.buffer.name)
    # NOTE: an extern output may alias its inputs (views returned by ATen): keep the
    # inputs alive as long as the output.
    for step in reversed(steps):
        if isinstance(step, ExternKernel) and step.aliases_inputs:
            end = max((last.get(o.name, -1) for o in step.outputs), default=-1)
            live = any(o.name in forever for o in step.outputs)
            for r in step.reads:
                if live:
                    forever.add(r)
                last[r] = max(last.get(r, -1), end)
    return last, forever


def plan_memory(steps: list[Step], buffers: dict[str, Buffer], input_names: list[str],
                outputs: list[object], free_inputs: bool = False) -> MemoryPlan:
    """Allocate each kernel-written buffer before its group, free every buffer after its
    last use; a freed buffer the wrapper allocated goes to a pool (`layout_key`) and is
    taken over by the next allocation of the same dtype and extent of memory. `free_inputs`:
    the inputs too (never pooled), except those an output is or views (`forever`)."""
    last, forever = last_uses(steps, outputs)
    inputs = set(input_names)
    # NOTE: a non-tensor input (a size) is no buffer: nothing to free
    kept = ({n for n in input_names if not isinstance(buffers.get(n), InputBuffer)}
            if free_inputs else inputs)
    pool: dict[tuple[Any, ...], list[str]] = {}
    allocated: set[str] = set()
    fresh: set[str] = set()  # NOTE: outputs of FRESH_OUTPUT_OPS: pooled once dead
    plan: list[StepMemory] = []
    for pos, step in enumerate(steps):
        mem = StepMemory()
        if isinstance(step, FusedGroup):
            for n in step.nodes:
                if n.name in step.local:
                    continue
                free = pool.get(layout_key(n.layout))
                mem.allocate.append(Allocation(n.name, free.pop() if free else None))
                allocated.add(n.name)
        elif (step.op in FRESH_OUTPUT_OPS and len(step.outputs) == 1
              and step.outputs[0].path == () and not step.aliases_inputs):
            fresh.add(step.outputs[0].name)
        for name in sorted(n for n, p in last.items() if p == pos):
            if name in forever or name in kept:
                continue
            buf = buffers.get(name)
            if isinstance(buf, ConstantBuffer):
                continue
            if (name in allocated or name in fresh) and buf is not None \
                    and name not in inputs:
                pool.setdefault(layout_key(buf.layout), []).append(name)
                mem.pool.append(name)
            else:
                mem.free.append(name)
        plan.append(mem)
    # NOTE: a pooled buffer that no later allocation takes over is freed where it was
    # pooled, not held to the end of the call (a backward's recomputed activations held
    # every one of them at once)
    taken = {a.reuse for mem in plan for a in mem.allocate if a.reuse is not None}
    for mem in plan:
        idle = [n for n in mem.pool if n not in taken]
        if idle:
            mem.pool = [n for n in mem.pool if n in taken]
            mem.free = sorted(mem.free + idle)
    free_first = [n for n in input_names if n not in kept and n not in last and n not in forever]
    return MemoryPlan(plan, allocated, free_first)
