"""Inductor options: each declared once, typed, with its environment variable and help.

Environment variables are read here only. `options.<name>` reads the current value;
`patch(**values)` overrides values inside a `with` block; `list_options()` and
`list_mode_options()` feed `compiler.list_options()` / `compiler.list_mode_options()`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    default: bool | int | str
    env: str
    help: str
    affects_codegen: bool = True

    def from_env(self) -> bool | int | str:
        raw = os.environ.get(self.env)
        if raw is None:
            return self.default
        if isinstance(self.default, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(self.default, int):
            return int(raw)
        return raw


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under `taskset`)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "compiler-inductor")


_DECLARED: tuple[Option, ...] = (
    Option("fusion", True, "INDUCTOR_FUSION",
           "fuse producers into consumers and reductions with their epilogues"),
    Option("simd", True, "INDUCTOR_SIMD",
           "emit `#pragma omp simd` on innermost loops (with reduction clauses)"),
    Option("threads", _usable_cpus(), "INDUCTOR_THREADS",
           "OpenMP threads that generated kernels may use (1 disables `omp parallel`)"),
    Option("parallel_threshold", 32768, "INDUCTOR_PARALLEL_THRESHOLD",
           "minimum elements a kernel handles before its outer loop runs in parallel"),
    Option("realize_opcount_threshold", 30, "INDUCTOR_REALIZE_OPCOUNT",
           "store (not recompute) a shared pointwise value with more ops than this"),
    Option("realize_reads_threshold", 4, "INDUCTOR_REALIZE_READS",
           "store (not recompute) a shared pointwise value reading more buffers than this"),
    Option("cxx", "g++", "INDUCTOR_CXX", "the C++ compiler used to build kernels"),
    Option("opt_level", "-O3", "INDUCTOR_OPT_LEVEL", "optimization flag passed to the compiler"),
    Option("march_native", True, "INDUCTOR_MARCH_NATIVE",
           "compile with -march=native (kernels use this CPU's vector units)"),
    Option("cache_dir", _default_cache_dir(), "INDUCTOR_CACHE_DIR",
           "directory of the on-disk cache of compiled kernel libraries",
           affects_codegen=False),
    Option("compile_threads", max(2, _usable_cpus()), "INDUCTOR_COMPILE_THREADS",
           "compiler processes run in parallel to build one graph's kernels",
           affects_codegen=False),
    Option("kernels_per_library", 8, "INDUCTOR_KERNELS_PER_LIBRARY",
           "kernels compiled together into one shared library", affects_codegen=False),
    Option("fallback_random", False, "INDUCTOR_FALLBACK_RANDOM",
           "run random ops through ATen instead of the generated counter-based RNG"),
    Option("verify_ir", False, "INDUCTOR_VERIFY_IR",
           "run the IR verifier on every graph (always on in tests)", affects_codegen=False),
    Option("max_autotune", False, "INDUCTOR_MAX_AUTOTUNE",
           "spend more compile time for faster kernels (CPU: more aggressive inlining)"),
    Option("cudagraphs", False, "INDUCTOR_CUDAGRAPHS",
           "replay GPU work with CUDA graphs (no effect on CPU)"),
    Option("debug", False, "INDUCTOR_DEBUG",
           "log the generated wrapper and C++ (the `inductor.output_code` logger)",
           affects_codegen=False),
)

OPTIONS: dict[str, Option] = {o.name: o for o in _DECLARED}


class _Values:
    """Current option values; attribute access by option name."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {o.name: o.from_env() for o in _DECLARED}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"unknown inductor option {name!r}") from None

    def snapshot(self) -> dict[str, Any]:
        return dict(self._values)

    def set(self, name: str, value: Any) -> None:
        if name not in OPTIONS:
            raise KeyError(f"unknown inductor option {name!r}; see list_options()")
        expected = type(OPTIONS[name].default)
        if expected is int and isinstance(value, bool):
            raise TypeError(f"option {name!r} expects int, got {value!r}")
        if not isinstance(value, expected):
            raise TypeError(f"option {name!r} expects {expected.__name__}, got {value!r}")
        self._values[name] = value


options = _Values()


@contextlib.contextmanager
def patch(values: Mapping[str, Any] | None = None, **kwargs: Any) -> Iterator[None]:
    """Override options inside a `with` block: `with patch(fusion=False): ...`."""
    updates = dict(values or {}, **kwargs)
    saved = options.snapshot()
    try:
        for k, v in updates.items():
            options.set(k, v)
        yield
    finally:
        options._values = saved


def list_options() -> dict[str, str]:
    """Option name -> one-line help."""
    return {o.name: o.help for o in _DECLARED}


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
    return tuple(sorted((o.name, options._values[o.name]) for o in _DECLARED
                        if o.affects_codegen))
