"""Compiled Triton kernels found again without Triton's JIT: a warm start's launches.

The first launch of a kernel in a process goes through `@triton.jit`: it binds the
arguments, computes the kernel's cache key (its source and dependencies, the options, and
Triton's own key: a hash of Triton's sources and libraries, ~0.4-0.5 s once per process on
the GPU box) and then finds the binary in Triton's cache. A warm GPT-2 training start spent
0.63 s there for 23 kernels (tools/DEVICE_RUNS.md, session 25).

So the launch that compiled a kernel records, beside the kernel's module (`<name>.bin`),
what finds and launches its binary again: the key Triton filed it under, the name of its
metadata file, the kernel's signature and constants (what Triton's launcher is built from),
the configuration it ran in, and the arguments' specialization (dtypes, 16-byte alignment
of each tensor, the values of scalars). A later process whose first launch has the same
configuration and specialization builds the compiled kernel from Triton's cache directly
(`load`) and launches it through the fast path. Anything else is a miss and the JIT runs, as
before: another Triton version, another variant of the kernel (its debug launch options),
other `TRITON_*` settings in the environment (they change what Triton compiles: FP fusion,
debug), a cache entry gone, another alignment, a binary for another GPU, an error loading it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from inductor import config

log = logging.getLogger("inductor")

_FORMAT = 1


class _Source:
    """What Triton's launcher reads of a kernel's source: its signature (argument name ->
    type) and constants (argument path -> value)."""

    def __init__(self, name: str, signature: dict[str, str],
                 constants: dict[tuple[int, ...], Any]) -> None:
        self.name = name
        self.signature = signature
        self.constants = constants
        self.attrs: dict[Any, Any] = {}
        self.fn = None


def specialization(args: Sequence[Any]) -> list[list[Any]]:
    """Each argument as the JIT specializes on it: a tensor by dtype and 16-byte alignment,
    a scalar by its value."""
    out: list[list[Any]] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(["t", str(a.dtype), a.data_ptr() % 16 == 0])
        elif isinstance(a, (bool, int, float)) or a is None:
            out.append([type(a).__name__, a])
        else:
            out.append(["?", type(a).__name__])
    return out


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _triton_version() -> str | None:
    try:
        import triton  # type: ignore[import-untyped]  # NOTE: no type hints
    except ImportError:
        return None
    version: str = triton.__version__
    return version


def record(path: Path, compiled: Any, args: Sequence[Any], cfg: Sequence[int],
           variant: Sequence[Any] = ()) -> None:
    """Write `path`: how `load` finds `compiled` (the JIT's result for `args` in
    configuration `cfg`, of the kernel's `variant`: plain values) again. Best effort: a
    kernel whose source Triton describes otherwise, or a read-only cache, keeps none."""
    try:
        src = compiled.src
        signature = dict(src.signature)
        constants = [[list(k), v] for k, v in src.constants.items()]
        metadata = next(n for n in compiled.metadata_group if n.endswith(".json"))
        data = {"format": _FORMAT, "triton": _triton_version(), "hash": compiled.hash,
                "metadata": metadata, "name": src.name, "signature": signature,
                "constants": constants, "cfg": list(cfg), "variant": list(variant),
                "env": config.triton_compile_settings(), "spec": specialization(args)}
    except (AttributeError, StopIteration, TypeError):
        return
    if not (all(isinstance(v, str) for v in signature.values())
            and all(all(isinstance(i, int) for i in k) and _plain(v) for k, v in constants)
            and all(s[0] != "?" for s in data["spec"])):
        return
    tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass


def recorded_config(path: Path) -> tuple[int, ...] | None:
    """The configuration a record at `path` was launched in (None: no usable record)."""
    data = _read(path)
    return tuple(data["cfg"]) if data is not None else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT \
            or data.get("triton") != _triton_version():
        return None
    return data


def load(path: Path, args: Sequence[Any], cfg: Sequence[int],
         variant: Sequence[Any] = ()) -> Any:
    """The compiled kernel recorded at `path`, its binary loaded, when the record is for
    configuration `cfg`, the kernel's `variant`, this environment's Triton settings, `args`'
    specialization and this GPU; None otherwise (the JIT then runs)."""
    data = _read(path)
    if data is None or data["cfg"] != list(cfg) or data.get("variant") != list(variant) \
            or data.get("env") != config.triton_compile_settings() \
            or data["spec"] != specialization(args):
        return None
    try:
        from triton.compiler.compiler import CompiledKernel  # type: ignore[import-untyped]
        from triton.runtime.cache import get_cache_manager  # type: ignore[import-untyped]
        from triton.runtime.driver import driver  # type: ignore[import-untyped]

        group = get_cache_manager(data["hash"]).get_group(data["metadata"])
        if not group or data["metadata"] not in group:
            return None
        src = _Source(data["name"], data["signature"],
                      {tuple(k): v for k, v in data["constants"]})
        compiled = CompiledKernel(src, group, data["hash"])
        target = driver.active.get_current_target()
        if (compiled.metadata.target.backend, compiled.metadata.target.arch) != (
                target.backend, target.arch):
            return None  # NOTE: a cache folder carried to another GPU
        compiled._init_handles()
    except Exception as e:  # noqa: BLE001 - any failure is a miss: the JIT runs instead
        log.debug("triton binary %s not loaded: %s", path.name, e)
        return None
    return compiled
