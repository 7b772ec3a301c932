"""Inductor options, declared with `aotgrad.optionset` (the same pattern as every package's
`config.py`): name, type, default, environment variable and help each.

Environment variables are read here only, once at import. `options` holds the values in
effect (read it as `config.options.<name>`); `patch(...)` overrides options within a block;
`list_options()` and `list_mode_options()` feed `compiler.list_options()` /
`compiler.list_mode_options()`. A compile call's options reach the backend as an argument
(`inductor.backend.inductor(gm, example_inputs, options=...)`), not through `patch`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aotgrad.optionset import OptionSet, option

__all__ = ["InductorConfig", "codegen_key", "compile_worker_environment", "declared",
           "list_mode_options", "list_options", "load", "options", "patch", "replace",
           "triton_interpreter", "values"]


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under `taskset`)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _default_cache_dir() -> str:
    """`$COMPILER_CACHE_DIR/inductor`, else `$XDG_CACHE_HOME/compiler/inductor`, else
    `~/.cache/compiler/inductor` (the cache root shared with the other packages)."""
    root = os.environ.get("COMPILER_CACHE_DIR")
    if root:
        return os.path.join(os.path.abspath(os.path.expanduser(root)), "inductor")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # NOTE: the XDG spec says a relative XDG_CACHE_HOME is invalid and is ignored
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "compiler", "inductor")


def _path(text: str) -> str:
    """A directory option: `~` expanded, a relative path made absolute."""
    return os.path.abspath(os.path.expanduser(text))


@dataclass(frozen=True, slots=True)
class InductorConfig:
    """The inductor options (see `list_options()` for help and env vars)."""

    fusion: bool = option(
        True, env="INDUCTOR_FUSION", affects_codegen=True,
        help="fuse producers into consumers and reductions with their epilogues")
    simd: bool = option(
        True, env="INDUCTOR_SIMD", affects_codegen=True,
        help="emit `#pragma omp simd` on innermost loops (with reduction clauses)")
    threads: int = option(
        _usable_cpus(), env="INDUCTOR_THREADS", affects_codegen=True,
        help="OpenMP threads that generated kernels may use (1 disables `omp parallel`)")
    parallel_threshold: int = option(
        32768, env="INDUCTOR_PARALLEL_THRESHOLD", affects_codegen=True,
        help="minimum elements a kernel handles before its outer loop runs in parallel")
    realize_opcount_threshold: int = option(
        30, env="INDUCTOR_REALIZE_OPCOUNT", affects_codegen=True,
        help="store (not recompute) a shared pointwise value with more ops than this")
    realize_reads_threshold: int = option(
        4, env="INDUCTOR_REALIZE_READS", affects_codegen=True,
        help="store (not recompute) a shared pointwise value reading more buffers than this")
    cxx: str = option("g++", env="INDUCTOR_CXX", affects_codegen=True,
                      help="the C++ compiler used to build kernels")
    opt_level: str = option("-O3", env="INDUCTOR_OPT_LEVEL", affects_codegen=True,
                            help="optimization flag passed to the compiler")
    march_native: bool = option(
        True, env="INDUCTOR_MARCH_NATIVE", affects_codegen=True,
        help="compile with -march=native (kernels use this CPU's vector units)")
    cache_dir: str = option(
        _default_cache_dir(), env="INDUCTOR_CACHE_DIR", parse=_path,
        help="directory of the on-disk cache of compiled kernel libraries")
    cache_size_limit_mb: int = option(
        2048, env="INDUCTOR_CACHE_SIZE_LIMIT_MB",
        help="size of the kernel cache beyond which least-recently-used libraries are "
             "removed (0: no limit)")
    compile_threads: int = option(
        max(2, _usable_cpus()), env="INDUCTOR_COMPILE_THREADS",
        help="compiler processes run in parallel to build one graph's kernels")
    kernels_per_library: int = option(
        8, env="INDUCTOR_KERNELS_PER_LIBRARY",
        help="kernels compiled together into one shared library")
    fallback_random: bool = option(
        False, env="INDUCTOR_FALLBACK_RANDOM", affects_codegen=True,
        help="run random ops through ATen instead of the generated counter-based RNG")
    verify_ir: bool = option(False, env="INDUCTOR_VERIFY_IR",
                             help="run the IR verifier on every graph (always on in tests)")
    max_autotune: bool = option(
        False, env="INDUCTOR_MAX_AUTOTUNE", affects_codegen=True,
        help="spend more compile time for faster kernels (CPU: more aggressive inlining)")
    mm_template: str = option(
        "auto", env="INDUCTOR_MM_TEMPLATE", affects_codegen=True,
        help="max_autotune on the Triton target: 'auto' generates Triton matmul templates "
             "(epilogues fused) and times them against ATen's call on a GPU (ATen's call "
             "under the interpreter), 'always' runs the template, 'never' keeps ATen's call")
    cudagraphs: bool = option(False, env="INDUCTOR_CUDAGRAPHS", affects_codegen=True,
                              help="replay GPU work with CUDA graphs (no effect on CPU)")
    cpu_backend: str = option(
        "cpp", env="INDUCTOR_CPU_BACKEND", affects_codegen=True,
        help="code generator for CPU tensors: 'cpp' (C++/OpenMP) or 'triton' (Triton kernels "
             "run by Triton's interpreter, TRITON_INTERPRET=1: slow, for tests without a GPU)")
    triton_autotune: bool = option(
        True, env="INDUCTOR_TRITON_AUTOTUNE", affects_codegen=True,
        help="GPU: time a few block sizes of each Triton kernel on its first call, keep the "
             "fastest")
    triton_compile_workers: int = option(
        min(32, max(2, _usable_cpus())), env="INDUCTOR_TRITON_COMPILE_WORKERS",
        help="GPU: worker processes that compile a graph's Triton kernels (each candidate "
             "configuration) in parallel before their first launch; below 2, each kernel "
             "is compiled at its first call")
    debug: bool = option(
        False, env="INDUCTOR_DEBUG",
        help="log the generated wrapper and C++ (the `inductor.output_code` logger)")


_set = OptionSet("inductor", InductorConfig, os.environ, globals())
#: The values in effect (`patch` rebinds this name).
options: InductorConfig = _set.current

patch = _set.patch
list_options = _set.list_options
values = _set.values
declared = _set.declared
load = _set.load
replace = _set.replace


def list_mode_options() -> dict[str, dict[str, object]]:
    """Mode name -> the option values that mode sets (the same mode names torch.compile accepts)."""
    return {
        "default": {},
        "reduce-overhead": {"cudagraphs": True},
        "max-autotune": {"max_autotune": True, "cudagraphs": True},
        "max-autotune-no-cudagraphs": {"max_autotune": True},
    }


def codegen_key() -> tuple[tuple[str, Any], ...]:
    """Values of the options that change generated code (part of cache keys)."""
    return tuple(sorted((name, getattr(options, name)) for name, o in declared.items()
                        if o.affects_codegen))




@contextlib.contextmanager
def triton_interpreter(on: bool) -> Iterator[None]:
    """Within this block `@triton.jit` builds interpreted kernels (`on`: `TRITON_INTERPRET=1`)
    or compiled ones (`TRITON_INTERPRET=0`); Triton reads the variable when a function is
    decorated and while the interpreter runs one, so interpreted kernels are imported and run
    inside `triton_interpreter(True)`, GPU kernels imported inside `triton_interpreter(False)`
    (a process may have both: a GPU kernel built as an interpreted one would read device
    pointers as host memory). The previous value is restored after."""
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = before


def compile_worker_environment() -> dict[str, str]:
    """The environment of Triton compile workers (`runtime/triton_workers.py`): this
    process's, with Triton's interpreter off (workers compile for the GPU)."""
    return {**os.environ, "TRITON_INTERPRET": "0"}


def triton_compile_settings() -> dict[str, str]:
    """The `TRITON_*` environment settings that may change what Triton compiles for the GPU
    (FP fusion, debug, ...): not the folders it reads or writes, nor the interpreter switch
    (`runtime/triton_binary.py` keys its records on them)."""
    return {k: v for k, v in os.environ.items() if k.startswith("TRITON_")
            and not k.endswith("_DIR") and k not in ("TRITON_HOME", "TRITON_INTERPRET")}
