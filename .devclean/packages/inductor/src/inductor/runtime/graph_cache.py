"""The on-disk cache of compiled graphs: a warm process goes from capture straight to running.

aotgrad owns the entry format and the key (`aotgrad.disk`: the captured graph, the call
signature, compilers and options, the environment); this module stores the entries, in
the `graphs` folder of the kernel cache (`cache_dir`), with the crash-proof machinery of
`runtime/disk_cache.py` (atomic writes, a content hash checked before every read, a lock
per entry, least-recently-used eviction under `cache_size_limit_mb`), and saves inductor's
compiled graphs: the generated wrapper's source, the namespace it runs in, and its kernels
(their sources, which the kernel cache maps to built libraries: a warm cache loads them
without a compiler). A graph that runs op by op in ATen is saved as its code. A boxed
wrapper (a backward, `aotgrad.boxed`) is saved as such and runs boxed when loaded; a
backward that ran unboxed under CUDA graphs is saved unboxed and loads unboxed. A graph is
saved with whether it can be replayed as a CUDA graph (and which inputs it writes), so a
process with `cudagraphs` on (`mode="reduce-overhead"`) replays a loaded graph too.

`install()` makes this the disk layer of aotgrad's compiled-graph cache (for every backend
built on aotgrad: `inductor` and `aot_eager`); importing `inductor.backend` or `compiler`
installs it. The in-process switch `AOTGRAD_GRAPH_CACHE=0` turns the disk layer off too.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from aotgrad import cache as aot_cache
from aotgrad.runtime import example_inputs
from aotgrad.serialize import GraphCode, add_source_package
from torch import fx

import inductor
from inductor import config, pipeline
from inductor.codegen.cpp import CppKernel
from inductor.pipeline import CompiledGraph
from inductor.runtime import cpp_build
from inductor.runtime.cpp_build import load_kernels
from inductor.runtime.cudagraphs import (
    CudaGraphRunner,
    mutated_inputs,
    runs_on_cpu,
    unsupported_reason,
)
from inductor.runtime.disk_cache import DiskCache, resolve_dir

__all__ = ["GraphStore", "install", "install_kernel_libraries", "kernel_libraries",
           "load_compiled", "save_compiled", "store_directory"]

log = logging.getLogger("inductor.graph_cache")

_lock = threading.Lock()
_caches: dict[Path, DiskCache] = {}
_ATEN_ONLY = "# runs op by op in ATen"


def store_directory() -> Path:
    """The folder of compiled-graph entries: `graphs` in the configured `cache_dir`."""
    return resolve_dir(config.options.cache_dir) / "graphs"


def _cache() -> DiskCache:
    directory = store_directory()
    with _lock:
        cache = _caches.get(directory)
        if cache is None:
            cache = DiskCache(directory, "inductor graphs", log)
            _caches[directory] = cache
    return cache


def _name(key: str) -> str:
    return f"graph_{key[:40]}.bin"


class GraphStore:
    """aotgrad's `DiskStore` over the `graphs` folder (see the module doc)."""

    def get(self, key: str) -> bytes | None:
        """The verified bytes of entry `key`, or None (missing, damaged: removed)."""
        try:
            path = _cache().lookup(_name(key), key)
            return path.read_bytes() if path is not None else None
        except OSError as exc:
            log.warning("compiled-graph cache: cannot read entry %s: %s", key[:16], exc)
            return None

    def put(self, key: str, data: bytes) -> None:
        """Write entry `key` (atomically; a failure is logged, never raised)."""
        limit = int(config.options.cache_size_limit_mb) * (1 << 20)

        def produce(out: Path) -> None:
            out.write_bytes(data)

        try:
            _cache().store(_name(key), key, produce, limit)
        except OSError as exc:
            log.warning("compiled-graph cache: cannot write entry %s: %s", key[:16], exc)

    def discard(self, key: str, reason: str) -> None:
        """Remove entry `key`, which could not be used (one warning)."""
        cache = _cache()
        if not cache.writable:
            return
        try:
            with cache.lock(_name(key)):
                cache.discard(_name(key), reason)
        except OSError as exc:
            log.warning("compiled-graph cache: cannot remove entry %s: %s", key[:16], exc)


_store = GraphStore()


def install() -> None:
    """Make the compiled-graph folder aotgrad's disk layer (unless one is installed), and
    inductor's source part of the environment an entry depends on."""
    add_source_package(inductor)
    if aot_cache.disk_store() is None:
        aot_cache.set_disk_store(_store)


# --------------------------------------------------------------------------- inductor graphs


def save_compiled(compiled: Any, gm: fx.GraphModule) -> dict[str, Any]:
    """The serialisable state of `compile_aten(gm, ...)`'s result (`load_compiled` reads it);
    `aotgrad.cache.Uncacheable` when it has none."""
    if not isinstance(compiled, CompiledGraph):
        raise aot_cache.Uncacheable(f"a {type(compiled).__name__}, not a CompiledGraph")
    if compiled.wrapper_source.startswith(_ATEN_ONLY):
        return {"kind": "aten", "graph": GraphCode.of(gm), "note": compiled.wrapper_source,
                "extern_calls": dict(compiled.extern_calls)}
    # NOTE: the key of the graph planned, which passes (channels-last layouts) may have
    # rewritten from `gm`
    key = compiled.plan_key or pipeline.graph_key(gm, example_inputs(gm))
    planned = pipeline._plans.get(key) if key is not None else None
    if planned is None or planned.wrapper_source != compiled.wrapper_source:
        raise aot_cache.Uncacheable("the graph's plan is not in the plan cache")
    kernels = dict(planned.kernels)
    # NOTE: kernels' names are bound to None until their functions are loaded
    namespace = {name: value for name, value in planned.namespace.items() if value is not None}
    return {"kind": "wrapper", "source": planned.wrapper_source, "namespace": namespace,
            "kernels": kernels, "targets": dict(getattr(planned, "targets", {}) or {}),
            "extern_calls": dict(compiled.extern_calls), "boxed": planned.boxed,
            # NOTE: what a process with `cudagraphs` on needs to replay the loaded graph
            "cudagraph_reason": unsupported_reason(planned.wrapper_source, example_inputs(gm),
                                                   runs_on_cpu(planned.steps)),
            "cudagraph_mutated": sorted(mutated_inputs(gm))}


def _load_functions(state: dict[str, Any]) -> dict[str, Any]:
    kernels: dict[int, Any] = state["kernels"]
    targets: dict[int, Any] = state["targets"]
    if not targets:
        return load_kernels(list(kernels.values()))
    by_target: dict[str, tuple[Any, list[Any]]] = {}
    for pos, kernel in kernels.items():
        target = targets[pos]
        by_target.setdefault(target.name, (target, []))[1].append(kernel)
    functions: dict[str, Any] = {}
    for target, group in by_target.values():
        functions.update(target.load(group))
    return functions


def load_compiled(state: dict[str, Any]) -> CompiledGraph:
    """The compiled graph `save_compiled` described: kernels from the kernel cache (built
    if missing), the wrapper executed in its namespace; nothing is traced or planned."""
    if state["kind"] == "aten":
        run = state["graph"].load()
        return CompiledGraph(run, state["note"], [], [], state["extern_calls"])
    namespace = dict(state["namespace"])
    namespace.update(_load_functions(state))
    code = compile(state["source"], "<inductor wrapper>", "exec")
    exec(code, namespace)  # noqa: S102 - the wrapper is source we generated
    call = namespace["call"]
    boxed = bool(state.get("boxed"))
    if config.options.cudagraphs and not boxed:
        reason = state.get("cudagraph_reason", "saved before CUDA graphs were recorded")
        if reason is None:
            call = CudaGraphRunner(call, set(state["cudagraph_mutated"]))
        else:
            log.info("cudagraphs: graph runs without CUDA graphs: %s", reason)
    return CompiledGraph(call, state["source"], list(state["kernels"].values()),
                         [], state["extern_calls"], boxed_call=boxed)


# --------------------------------------------------------------------------- kernel libraries


def _compiled_graphs(entry: Any) -> list[Any]:
    runner = entry[0]
    found = [getattr(runner, name, None) for name in ("compiled", "_fw", "_bw")]
    return [c for c in found if isinstance(c, CompiledGraph)]


def kernel_libraries(entry: Any, compiler: Any) -> dict[str, Any]:
    """The built libraries (bytes, with their keys) of the C++ kernels of a compiled entry
    (aotgrad's (runner, out spec, flat) triple), their index records and the compiler
    records of the kernel cache: what `install_kernel_libraries` needs to run them on a
    machine where they were never built. Empty for graphs without C++ kernels."""
    del compiler
    kernels = [k for c in _compiled_graphs(entry) for k in c.kernels if isinstance(k, CppKernel)]
    if not kernels:
        return {}
    cache = cpp_build._cache()
    digest = cpp_build._flags_digest()
    libraries: dict[str, tuple[str, bytes]] = {}
    index: dict[str, str] = {}
    for kernel in kernels:
        record = f"{kernel.name}.{digest}"
        lib_name = cache.read_record("index", record)
        match = cpp_build._LIBRARY.match(lib_name or "")
        if lib_name is None or match is None:
            raise aot_cache.Uncacheable(f"kernel {kernel.name} has no library in the cache")
        index[record] = lib_name
        if lib_name not in libraries:
            path = cache.lookup(lib_name, match[1])
            if path is None:
                raise aot_cache.Uncacheable(f"library {lib_name} is not in the cache")
            libraries[lib_name] = (match[1], path.read_bytes())
    compilers = {name: cache.read_record("compilers", name)
                 for name in cache.records("compilers")}
    return {"libraries": libraries, "index": index,
            "compilers": {k: v for k, v in compilers.items() if v is not None}}


def install_kernel_libraries(state: dict[str, Any]) -> None:
    """Write the libraries and records `kernel_libraries` collected into the kernel cache
    (each entry verified by its hash when used, as any other)."""
    if not state:
        return
    cache = cpp_build._cache()
    for name, text in state["compilers"].items():
        if cache.read_record("compilers", name) is None:
            cache.write_record("compilers", name, text)
    limit = int(config.options.cache_size_limit_mb) * (1 << 20)
    for lib_name, (key, data) in state["libraries"].items():
        if cache.lookup(lib_name, key) is not None:
            continue

        def produce(out: Path, data: bytes = data) -> None:
            out.write_bytes(data)

        cache.store(lib_name, key, produce, limit)
    for record, lib_name in state["index"].items():
        if cache.read_record("index", record) != lib_name:
            cache.write_record("index", record, lib_name)
