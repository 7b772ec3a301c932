"""Targets: the device table that maps a device type to its code generator, its launcher
and its fusion-legality rules.

The IR, lowering and scheduler are target-neutral; the pipeline asks `target_for(device)`
for each fused group's target, the target generates the group's kernel, loads compiled
kernels, says how the wrapper launches one, and may refuse a fusion the shared scheduler
finds legal (a Triton kernel has one reduction range). Two targets: C++/OpenMP (`cpp`, the
CPU's default) and Triton (`triton`, CUDA; the CPU under `options={"cpu_backend":
"triton"}` through Triton's interpreter). Ops without a lowering stay extern ATen calls
whatever the target.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import torch

from inductor import config
from inductor.codegen.cpp import CppKernel, generate_kernel
from inductor.codegen.triton import TritonKernel
from inductor.codegen.triton_mm import generate_matmul_template, is_matmul_group, matmul_can_fuse
from inductor.codegen.triton_rules import triton_can_fuse
from inductor.codegen.triton_split import generate_triton_kernel
from inductor.ir.checks import ERR_PARAM
from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.runtime.cpp_build import load_kernels
from inductor.runtime.kernel_checks import triton_check
from inductor.runtime.triton_workers import prestart, start_in_workers
from inductor.scheduler.fusion import FusedGroup, is_row_epilogue
from inductor.scheduler.loop_merge import merged_loops

Kernel = CppKernel | TritonKernel


class Target(Protocol):
    """A code generator, its launcher and its fusion rules for one kind of device."""

    name: str
    matmul_templates: bool  # generates matmuls itself (`lowering/matmul.py`) under max_autotune
    unfuses_matmul_bias: bool  # adds an addmm's bias in its pointwise consumer (bias_unfuse.py)
    pads_matmuls: bool  # pads half-precision mm columns to 16-byte rows (mm_pad.py)

    def generate(self, group: FusedGroup, buffers: dict[str, Buffer]) -> Kernel:
        """The kernel of one fused group."""
        ...

    def load(self, kernels: Sequence[Kernel]) -> dict[str, Any]:
        """Kernel name -> what the wrapper calls (built or taken from the caches)."""
        ...

    def launch(self, kernel: Kernel, checks: str) -> list[str]:
        """The wrapper's lines that run `kernel` and raise what eager raises when one of its
        checks failed (`checks`: the wrapper's name for `kernel.checks`)."""
        ...

    def can_fuse(self, group: FusedGroup, node: ComputedBuffer,
                 outer: tuple[int, ...]) -> bool:
        """Whether this target can generate `group` with `node` added over `outer` loops
        (asked only after the scheduler found the fusion legal)."""
        ...


class CppTarget:
    """C++/OpenMP kernels built with the system compiler, called through ctypes."""

    name = "cpp"
    matmul_templates = False
    unfuses_matmul_bias = False
    pads_matmuls = False

    def generate(self, group: FusedGroup, buffers: dict[str, Buffer]) -> Kernel:
        """The group's `extern "C"` function (`codegen/cpp.py`)."""
        return generate_kernel(merged_loops(group), buffers, threads=config.options.threads,
                               parallel_threshold=config.options.parallel_threshold,
                               simd=config.options.simd)

    def load(self, kernels: Sequence[Kernel]) -> dict[str, Any]:
        """ctypes functions from the compiled (cached) libraries."""
        cpp = [k for k in kernels if isinstance(k, CppKernel)]
        return load_kernels(cpp) if cpp else {}

    def launch(self, kernel: Kernel, checks: str) -> list[str]:
        """`kernel(ptr, ...)` with raw data pointers; `err` is the call's error slots."""
        args = ", ".join("err" if p == ERR_PARAM else f"{p}.data_ptr()"
                         for p in kernel.params)
        lines = [f"{kernel.name}({args})"]
        if kernel.checks:
            lines.append(f"if err[0]: raise_kernel_error(err, {checks})")
        return lines

    def can_fuse(self, group: FusedGroup, node: ComputedBuffer,
                 outer: tuple[int, ...]) -> bool:
        """Every legal group but row epilogues (a pointwise node over the rows reading a
        reduction's result stays a kernel of its own, as before targets had a say)."""
        return not is_row_epilogue(group, node, outer)


class TritonTarget:
    """Triton kernels (`codegen/triton.py`) launched from Python (`runtime/triton_launch.py`);
    `interpret`: run by Triton's interpreter on CPU tensors."""

    def __init__(self, interpret: bool) -> None:
        self.interpret = interpret
        self.name = "triton-interpreter" if interpret else "triton"
        self.matmul_templates = True
        self.unfuses_matmul_bias = True
        self.pads_matmuls = True

    def generate(self, group: FusedGroup, buffers: dict[str, Buffer]) -> Kernel:
        """The group's `@triton.jit` kernel source and its launch configuration (two
        kernels in one module for a split reduction; a matmul template for a group that
        starts with a matmul, `codegen/triton_mm.py`)."""
        if is_matmul_group(group):
            kernel = generate_matmul_template(group, buffers, interpret=self.interpret)
        else:
            kernel = generate_triton_kernel(group, buffers, interpret=self.interpret)
        if self.interpret:
            return kernel
        prestart()  # NOTE: the compile workers start while the rest of the graph lowers
        return with_arg_types(kernel, buffers)

    def load(self, kernels: Sequence[Kernel]) -> dict[str, Any]:
        """Launchers of the kernels (modules written to the cache directory, imported)."""
        from inductor.runtime.triton_launch import load_triton_kernels
        from inductor.runtime.triton_mm_launch import load_matmul_kernels

        tk = [k for k in kernels if isinstance(k, TritonKernel) and k.matmul is None]
        mm = [k for k in kernels if isinstance(k, TritonKernel) and k.matmul is not None]
        if not tk and not mm:
            return {}
        # NOTE: the wrapper's check after a checking kernel (deferred while a CUDA graph
        # is recorded: runtime/kernel_checks.py)
        launchers = {**load_triton_kernels(tk), **load_matmul_kernels(mm)}
        warming = [(launcher, launcher.warm_jobs()) for launcher in launchers.values()]
        batch = start_in_workers([job for _, jobs in warming for job in jobs], self.interpret)
        if batch is not None:
            # NOTE: each launcher waits for the batch at its first launch, not here
            for launcher, jobs in warming:
                if jobs:
                    launcher.pending = batch
        return {**launchers, "triton_check": triton_check}

    def launch(self, kernel: Kernel, checks: str) -> list[str]:
        """`kernel(tensor, ...)`; a kernel with checks gets fresh error slots on its
        device and the wrapper raises what eager raises when one failed (`triton_check`)."""
        assert isinstance(kernel, TritonKernel)
        args = []
        for p in kernel.params:
            if p == ERR_PARAM:
                args.append("kerr")
            elif p in kernel.scalar_params:
                args.append(f"{p}.item()")
            else:
                args.append(p)
        args += kernel.sizes  # NOTE: size symbols, bound by the wrapper's prologue
        lines = []
        if kernel.checks:
            lines.append(f"kerr = new_error_slots({kernel.device!r})")
        lines.append(f"{kernel.name}({', '.join(args)})")
        if kernel.checks:
            lines.append(f"triton_check(kerr, {checks})")
        return lines

    def can_fuse(self, group: FusedGroup, node: ComputedBuffer,
                 outer: tuple[int, ...]) -> bool:
        """One Triton kernel has one reduction range (`triton_can_fuse`); a matmul starts
        its group, which then takes pointwise epilogues only (`matmul_can_fuse`)."""
        return triton_can_fuse(group, node, outer) and matmul_can_fuse(group, node, outer)


def with_arg_types(kernel: TritonKernel, buffers: dict[str, Buffer]) -> TritonKernel:
    """`kernel` with the argument types compile workers warm it up with (its epilogue's
    too): a buffer's dtype, int64 error slots, an example value of a CPU scalar's type, int
    sizes."""

    def typed(k: TritonKernel) -> TritonKernel:
        types: list[str | int | float] = []
        for p in k.params:
            if p == ERR_PARAM:
                types.append("int64")
                continue
            dtype = buffers[p].layout.dtype
            if p in k.scalar_params:
                types.append(_example_scalar(dtype))
            else:
                types.append(str(dtype).removeprefix("torch."))
        types += [1] * len(k.sizes)
        return replace(k, arg_types=tuple(types))

    plan = kernel.matmul
    if plan is not None and plan.epilogue is not None:
        kernel = replace(kernel, matmul=replace(plan, epilogue=typed(plan.epilogue)))
    return typed(kernel)


def _example_scalar(dtype: torch.dtype) -> int | float:
    """A value Triton compiles for as it would for most values of `dtype` read from a CPU
    scalar (kernels take those unspecialized, `TritonKernel.seeds`, but an int's width still
    follows its value): floats and bools as such; an int64 as a 64-bit value (the random
    seed, drawn from [0, 2**62), is the int64 scalar GPU graphs have), other ints 32-bit."""
    if dtype.is_floating_point:
        return 1.0
    if dtype == torch.bool:
        return True
    return 2**40 + 3 if dtype == torch.int64 else 3


def triton_available() -> bool:
    """Whether the `triton` package can be imported."""
    return importlib.util.find_spec("triton") is not None


def _need_triton(why: str) -> None:
    if not triton_available():
        raise RuntimeError(
            f"inductor: {why} needs Triton, which is not installed: `pip install triton` "
            "(or `pip install compiler-inductor[gpu]`)")


def target_for(device: torch.device) -> Target:
    """The device table: the target that generates kernels for tensors on `device`."""
    if device.type == "cpu":
        backend = config.options.cpu_backend
        if backend == "cpp":
            return CppTarget()
        if backend == "triton":
            _need_triton("options={'cpu_backend': 'triton'}")
            return TritonTarget(interpret=True)
        raise ValueError(f"inductor: unknown cpu_backend {backend!r}; one of 'cpp', 'triton'")
    if device.type == "cuda":
        _need_triton(f"generating kernels for {device}")
        return TritonTarget(interpret=False)
    raise NotImplementedError(f"inductor: no code generator for device {device}")


def has_target(device: torch.device) -> bool:
    """Whether kernels can be generated for `device` here (else its graphs run in ATen)."""
    if device.type == "cpu":
        return config.options.cpu_backend != "triton" or triton_available()
    return device.type == "cuda" and triton_available()
