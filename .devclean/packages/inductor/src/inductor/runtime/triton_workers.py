"""Parallel compilation of one graph's Triton kernels (issue 12 point 4): before the first
launch, worker processes compile every kernel in each candidate configuration it may run, so
the main process's JIT then finds each binary in Triton's on-disk cache and a cold compile
takes about as long as its slowest kernel instead of the sum.

How a compile reaches a worker: the main process runs the kernel's JIT up to the point where
it would call `triton.compile` (a throwaway copy of the kernel, warmed up with mock tensors of
the argument dtypes, its `compile` swapped for one that records its arguments), and sends
exactly those arguments (AST source's signature, constants, attributes; options; target)
to a worker, which calls `triton.compile` with them. The JIT's later call at the first launch
computes the same cache key, so it loads the binary instead of compiling it. Mock tensors
are 16-byte aligned, as the buffers we allocate are; an input that is not gets compiled by
the JIT at its launch, as without workers.

Workers (`runtime/triton_compile_worker.py`) are plain subprocesses that import only Triton
and the kernel modules: they never re-run the user's `__main__` (as `multiprocessing`'s spawn
would), never open a CUDA context, and are kept for the life of the process, so later graphs
(the backward, other graphs) find them started. They start with the first GPU kernel a graph
generates (`prestart`), overlapping their start with the rest of the compile.

A graph's batch of compiles does not hold up the rest of the compile: `start_in_workers`
queues it and returns; each launcher waits for its batch at its first launch, so the
forward's kernels compile while the backward is planned, and the backward's while the
forward runs (a cold training call otherwise waited for each graph's slowest kernel in
turn). One driver thread per worker takes requests from one shared queue.

A kernel warmed once has a `<name>.warm` marker beside its module: later processes (warm
starts) do not compile it again. Only a GPU compiles anything: the interpreter's kernels,
and options with fewer than two `triton_compile_workers`, take the serial path (each kernel
compiled by the JIT at its first call). A job that fails in the main process or in a worker
only costs the time it took: its kernel is compiled at its first call (logged).
"""

from __future__ import annotations

import atexit
import logging
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inductor import config
from inductor.runtime.triton_compile_worker import load_kernel

log = logging.getLogger("inductor")

MIN_COMPILES = 2  # NOTE: a single compile does not pay for the round trip
_WORKER = Path(__file__).with_name("triton_compile_worker.py")


@dataclass(frozen=True, slots=True)
class WarmJob:
    """Compile `name` from the module at `path` for `args` (a torch dtype name for a pointer,
    else an example int or float) under each `(grid, keyword arguments)` of `launches`."""

    path: str
    name: str
    args: tuple[str | int | float, ...]
    launches: tuple[tuple[tuple[int, ...], tuple[tuple[str, int], ...]], ...]


class _Worker:
    """One compile worker process and its pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(_WORKER)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=config.compile_worker_environment())
        self.driver: threading.Thread | None = None
        self.dead = False  # NOTE: set by its driver at once (a killed process polls alive a while)

    def ask(self, request: tuple[Any, ...]) -> str | None:
        """Send one compile request and wait for its answer."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        pickle.dump(request, stdin)
        stdin.flush()
        reply: str | None = pickle.load(stdout)
        return reply

    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:  # NOTE: a dead worker's pipe (a request left in its buffer)
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_lock = threading.Lock()
_workers: list[_Worker] = []


def _pool(size: int) -> list[_Worker]:
    """The kept workers, `size` of them (dead ones replaced)."""
    with _lock:
        _workers[:] = [w for w in _workers if w.alive()]
        while len(_workers) < size:
            if not _workers:
                atexit.register(stop_workers)
            worker = _Worker()
            _workers.append(worker)
            worker.driver = threading.Thread(target=_drive, args=(worker,), daemon=True)
            worker.driver.start()
        return _workers[:size]


def prestart() -> None:
    """Start the workers now (no wait), so they are ready when a graph's kernels are."""
    workers = config.options.triton_compile_workers
    # NOTE: called for every GPU kernel a graph generates: started ones are not polled here
    # (`compile_in_workers` replaces dead ones)
    if workers >= 2 and len(_workers) < workers:
        try:
            _pool(workers)
        except OSError as e:
            log.info("triton compile workers did not start (%s); compiling serially", e)


def stop_workers() -> None:
    """Stop the kept workers (at exit; tests)."""
    with _lock:
        workers = list(_workers)
        _workers.clear()
    for _ in workers:
        _queue.put(None)  # NOTE: a driver ends at one of these or when its worker is gone
    for w in workers:
        w.stop()
    for w in workers:
        if w.driver is not None:
            w.driver.join(timeout=10)
    _drain("the workers were stopped")


def _load(path: str, name: str, modules: dict[str, Any]) -> Any:
    with config.triton_interpreter(False):
        return load_kernel(path, name, modules)


def compile_requests(job: WarmJob, modules: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the JIT of `job`'s kernel would pass to `triton.compile` for each launch: run on a
    throwaway copy of the kernel whose `compile` records its arguments instead."""
    import torch
    from triton.runtime.driver import driver  # type: ignore[import-untyped]  # NOTE: untyped
    from triton.runtime.jit import MockTensor  # type: ignore[import-untyped]

    fn = _load(job.path, job.name, modules)
    fn.device_caches[driver.active.get_current_device()]  # NOTE: sets `fn.compile`
    seen: list[tuple[Any, ...]] = []

    def record(src: Any, target: Any = None, options: Any = None, **_: Any) -> object:
        seen.append((src.signature, src.constants, src.attrs, options, target))
        return _NOT_COMPILED

    fn.compile = record
    args = [MockTensor(getattr(torch, a)) if isinstance(a, str) else a for a in job.args]
    for grid, kwargs in job.launches:
        fn.warmup(*args, grid=grid, **dict(kwargs))
    if not seen:
        raise RuntimeError(f"the JIT of {job.name} asked for no compile")
    return [(job.path, job.name, *s) for s in seen]


_NOT_COMPILED = object()  # NOTE: what the throwaway kernel's JIT keeps instead of a binary


class Batch:
    """One graph's compile jobs in the workers; `wait()` returns once every request is
    answered (markers written, failures logged)."""

    def __init__(self, jobs: Sequence[WarmJob]) -> None:
        self.jobs = list(jobs)
        self.errors: dict[int, str] = {}
        self._left = 0
        self._lock = threading.Lock()
        self._done = threading.Event()

    def wait(self) -> None:
        """Block until the batch is compiled (or its failures are known)."""
        self._done.wait()

    def add(self, count: int) -> None:
        with self._lock:
            self._left += count

    def finish(self, index: int, error: str | None) -> None:
        """One request answered (`error`: why it failed, else None)."""
        with self._lock:
            if error is not None:
                self.errors.setdefault(index, error)
            self._left -= 1
            if self._left > 0:
                return
        self._close()

    def _close(self) -> None:
        for i, job in enumerate(self.jobs):
            if i in self.errors:
                log.info("triton kernel %s not compiled in a worker (%s); compiled at its "
                         "first call", job.name, self.errors[i])
            else:
                Path(job.path).with_suffix(".warm").touch()
        self._done.set()


def compile_in_workers(jobs: Sequence[WarmJob], interpret: bool) -> bool:
    """Compile `jobs` in the worker processes and wait; False when this takes the serial
    path (see `start_in_workers`)."""
    batch = start_in_workers(jobs, interpret)
    if batch is None:
        return False
    batch.wait()
    return True


def start_in_workers(jobs: Sequence[WarmJob], interpret: bool) -> Batch | None:
    """Queue `jobs` for the worker processes; None when this takes the serial path (the
    interpreter, fewer than two workers, fewer than `MIN_COMPILES` kernel configurations,
    or the workers did not start: each kernel is then compiled at its first call)."""
    size = config.options.triton_compile_workers
    compiles = sum(len(job.launches) for job in jobs)
    if interpret or size < 2 or compiles < MIN_COMPILES:
        return None
    try:
        _pool(size)
    except OSError as e:
        log.info("triton compile workers did not start (%s); compiling serially", e)
        return None
    batch = Batch(jobs)
    requests: list[tuple[int, tuple[Any, ...]]] = []
    modules: dict[str, Any] = {}
    for i, job in enumerate(jobs):
        try:
            for request in compile_requests(job, modules):
                signature = repr((request[2], sorted(request[3].items())))
                requests.append((i, (*request, signature not in _launchers)))
                _launchers.add(signature)
        except Exception as e:  # noqa: BLE001 - the JIT compiles it at its first call
            batch.errors[i] = f"{type(e).__name__}: {e}"
    batch.add(len(requests) + 1)
    for i, request in requests:
        _queue.put((batch, i, request))
    batch.finish(-1, None)  # NOTE: the count's extra one: a batch of no request closes here
    with _lock:
        if not any(w.alive() for w in _workers):
            _drain("no worker left")
    return batch


# NOTE: the C launcher of a signature is built by the first request that has it, once per
# process (workers share Triton's cache)
_launchers: set[str] = set()
_queue: queue.SimpleQueue[tuple[Batch, int, tuple[Any, ...]] | None] = queue.SimpleQueue()


def _drain(why: str) -> None:
    """Fail every queued request (no worker is left to take it)."""
    while True:
        try:
            item = _queue.get_nowait()
        except queue.Empty:
            return
        if item is not None:
            item[0].finish(item[1], why)


def _drive(worker: _Worker) -> None:
    """Feed one worker requests from the shared queue until it stops or dies (the others
    take the rest; the last one to die fails what is left)."""
    while True:
        item = _queue.get()
        if item is None:
            return
        batch, i, request = item
        try:
            error = worker.ask(request)
        except (OSError, EOFError, pickle.PickleError) as e:
            batch.finish(i, f"worker died: {type(e).__name__}: {e}")
            worker.proc.kill()
            with _lock:
                worker.dead = True
                if not any(w.alive() for w in _workers):
                    _drain("no worker left")
            return
        batch.finish(i, error)
