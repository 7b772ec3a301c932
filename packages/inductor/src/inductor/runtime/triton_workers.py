"""Parallel compilation of one graph's Triton kernels (issue 12 point 4): before the first
launch, worker processes compile every kernel in each candidate configuration it may run
(`JITFunction.warmup` with the argument dtypes, no launch), so the main process's JIT then
finds each binary in Triton's on-disk cache and a cold compile takes about as long as its
slowest kernel instead of the sum.

A kernel warmed once has a `<name>.warm` marker beside its module: later processes (warm
starts) do not start workers for it. Only a GPU compiles anything: the interpreter's
kernels, and options with fewer than two `triton_compile_workers`, take the serial path
(each kernel compiled by the JIT at its first call, as before). Workers are started with
`spawn` (a forked CUDA context is unusable) for one graph's jobs and stopped after them (a
kept pool would hold a CUDA context per worker). A worker that fails only costs the time it
took: its kernel is compiled at its first call as without workers (logged).
"""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inductor import config

log = logging.getLogger("inductor")

MIN_COMPILES = 4  # NOTE: fewer compiles than this do not pay for starting the workers


@dataclass(frozen=True, slots=True)
class WarmJob:
    """Compile `name` from the module at `path` for `args` (a torch dtype name for a pointer,
    else an example int or float) under each `(grid, keyword arguments)` of `launches`."""

    path: str
    name: str
    args: tuple[str | int | float, ...]
    launches: tuple[tuple[tuple[int, ...], tuple[tuple[str, int], ...]], ...]


def warm(job: WarmJob) -> str | None:
    """Run in a worker: compile the job's kernel in each configuration; None, or the error."""
    try:
        import torch

        spec = importlib.util.spec_from_file_location(f"inductor_warm.{job.name}", job.path)
        if spec is None or spec.loader is None:
            return f"cannot load {job.path}"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, job.name)
        args = [getattr(torch, a) if isinstance(a, str) else a for a in job.args]
        for grid, kwargs in job.launches:
            fn.warmup(*args, grid=grid, **dict(kwargs))
        Path(job.path).with_suffix(".warm").touch()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which compiles serially
        return f"{type(e).__name__}: {e}"
    return None


def _executor(workers: int) -> Executor:
    # NOTE: spawned (a forked CUDA context is unusable) and shut down after each graph's
    # jobs: a kept pool would hold a CUDA context per worker on the device
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def compile_in_workers(jobs: Sequence[WarmJob], interpret: bool) -> bool:
    """Compile `jobs` in parallel worker processes; False when this takes the serial path
    (the interpreter, fewer than two workers or jobs, fewer than `MIN_COMPILES` kernel
    configurations, or the pool failed: each kernel is then compiled at its first call)."""
    workers = min(config.options.triton_compile_workers, len(jobs))
    compiles = sum(len(job.launches) for job in jobs)
    if interpret or workers < 2 or compiles < MIN_COMPILES:
        return False
    try:
        with _executor(workers) as pool:
            results: list[Any] = list(pool.map(warm, jobs))
    except Exception as e:  # noqa: BLE001 - a broken pool: compile serially, logged
        log.info("triton compile workers failed (%s: %s); compiling serially",
                 type(e).__name__, e)
        return False
    for job, error in zip(jobs, results):
        if error is not None:
            log.info("triton kernel %s not compiled in a worker (%s); compiled at its "
                     "first call", job.name, error)
    return True
