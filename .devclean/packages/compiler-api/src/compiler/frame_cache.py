"""The on-disk cache of whole compiled frames: a warm process skips capture too.

The compiled-graph cache (`aotgrad.disk`, stored by inductor's `graph_cache`) spares a warm
process tracing, partitioning and code generation, but capture still runs there: the
bytecode is interpreted with fake tensors (and torch's fake tensors import `torch._dynamo`,
1-2.5 s in a fresh process). This cache records what capture made of a frame, so that a
warm process installs it without capturing:

- the key: the frame's code (by content, `portable_guards.code_digest`), its module, the
  backend (`inductor` or `aot_eager`, as registered), the compile call's options, the option
  values in effect (capture, guards, aotgrad, the ATen-graph compiler's `cache_key()`), the
  decompositions, torch's global modes and the environment (Python, torch, machine, CPU,
  the source of our five packages);
- per key, up to `MAX_RECORDS` records (one entry each, in slots), each: the guard tree in portable form
  (`portable_guards`), the transformed code (`marshal`) with its compiled graphs left out,
  and each compiled graph as aotgrad's entry (`aotgrad.disk.save_entry`: ATen forward and
  backward graphs compiled, the runtime wrapper's bookkeeping) with its call signature and
  the captured torch-level graph as code.

A record is made only when everything in it is portable: a frame compiled without a graph
break, whose transformed code holds only immutable constants besides its graphs (each
graph as it is, or wrapped for an eager rerun when it raises, `capture.graph_errors`: a
frame with side effects to replay; the wrapper is rebuilt on load) and the globals of
modules it writes to (by module name), whose
guards `portable_guards.encode` can describe, and whose graphs take every tensor as an input
(no parameters held in the graph) with torch's or Python's own callables only. Anything else
is captured in every process, as before.

A warm process, on a frame's first miss, rebuilds each record's guard tree for this call
(`portable_guards.decode`: every object checked by identity must be the one recorded) and
runs it; the first record that passes is installed in the frame's cache like a fresh
compile, and later calls check its guards as usual. A call whose graph signature differs
in a way the guards do not check (an input's storage offset, a non-leaf input) runs the
recorded torch-level graph eagerly (logged once). A damaged or unreadable record is a miss;
the entry is discarded. On only when aotgrad's disk cache is (`AOTGRAD_DISK_CACHE`), with
capture's option `frame_disk_cache` (`CAPTURE_FRAME_DISK_CACHE=0` turns it off).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import marshal
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import aotgrad
import capture
import guards
import torch
from aotgrad import cache as aot_cache
from aotgrad import disk as aot_disk
from aotgrad import serialize
from aotgrad.api import AotCompiled
from aotgrad.backend import BackendCallable
from capture import frame_store
from capture.frame import CompiledFunction
from capture.graph_errors import GuardedGraph

from compiler import portable_guards
from compiler.precompile import _compilers

__all__ = ["MAX_RECORDS", "FrameDiskCache", "install"]

log = logging.getLogger("compiler.frame_cache")

FORMAT = "compiler-frame-v2"
#: Records kept per frame key (per code object, backend and options), each in its own slot.
MAX_RECORDS = 8
_BACKENDS = ("inductor", "aot_eager")
_PACKAGES = ("capture", "guards", "aotgrad", "inductor", "compiler")
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))


class _NotRecorded(Exception):
    """A loaded graph met a call signature it was not compiled for."""


class NotRecordable(Exception):
    """Part of a compiled frame has no form another process can use."""


# --------------------------------------------------------------------------- graphs


class _GraphFunction:
    """The captured torch-level graph as a function of its inputs (run when a call's
    signature was not recorded, and for double backward), with the facts of the graph that
    aotgrad's call key reads (`state_key`, `grad_switches`)."""

    def __init__(self, code: serialize.GraphCode, state: tuple[bool, ...],
                 grad_switches: tuple[bool, ...]) -> None:
        self._code = code
        self._fn: Callable[..., Any] | None = None
        self._state = state
        self.grad_switches = grad_switches

    def state_key(self) -> tuple[bool, ...]:
        return self._state

    def __call__(self, *args: Any) -> Any:
        if self._fn is None:
            self._fn = self._code.load()
        return self._fn(*args)


class _Recorded(AotCompiled):
    """An `AotCompiled` holding the recorded call signature; another runs the graph's code."""

    _warned = False

    def _compile(self, leaves: list[Any], in_spec: Any, training: bool, key: tuple[Any, ...],
                 ) -> Any:
        raise _NotRecorded

    def _call_slow(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                   fast_key: tuple[Any, ...] | None) -> Any:
        try:
            return super()._call_slow(args, kwargs, fast_key)
        except _NotRecorded:
            if not _Recorded._warned:
                _Recorded._warned = True
                log.info("frame cache: a graph loaded from disk was called with another "
                         "signature than recorded; running its captured code eagerly")
            return self.fn(*args, **kwargs)


class _LoadedGraph:
    """What the transformed code calls in place of a `BackendCallable`."""

    def __init__(self, compiled: AotCompiled) -> None:
        self.compiled = compiled

    @property
    def saved_bytes(self) -> Any:
        return self.compiled.saved_bytes

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*args)


def _all_tensors(key: tuple[Any, ...]) -> bool:
    """Whether an `AotCompiled` key's arguments are all tensors (flat, positional)."""
    count = key[1]
    if not isinstance(count, int) or count > len(key):
        return False
    leaves = key[len(key) - count:] if count else ()
    return all(isinstance(p, tuple) and p and isinstance(p[0], torch.dtype) for p in leaves)


def _graph_token(graph: BackendCallable, fw: Any) -> dict[str, Any]:
    compiled = graph.compiled
    if graph.lifted.names or compiled.symbolic is not None or len(compiled.cache) != 1:
        raise NotRecordable("a graph holding parameters, of symbolic sizes, or compiled for "
                            "several signatures")
    if compiled.partition_fn is not None:
        raise NotRecordable("a partitioner function")
    if (aot_cache.compiler_key(compiled.fw_compiler)[1] != aot_cache.compiler_key(fw)[1]
            or aot_cache.compiler_key(compiled.bw_compiler)[1] != aot_cache.compiler_key(fw)[1]):
        raise NotRecordable("the graph was compiled with other compiler options")
    compiled._graph_signature()  # NOTE: torch's and Python's own callables only
    (key, entry), = compiled.cache.items()
    if not _all_tensors(key):
        raise NotRecordable("a graph with non-tensor inputs")
    return {"key": key, "entry": aot_disk.save_entry(entry, compiled.fw_compiler,
                                                     compiled.bw_compiler),
            "graph": serialize.GraphCode.of(graph.gm),
            "state": tuple(graph.lifted.state_key()),
            "switches": tuple(graph.lifted.grad_switches)}


def _load_graph(token: dict[str, Any], fw: Any, decompositions: Any,
                aot_values: dict[str, Any]) -> _LoadedGraph:
    fn = _GraphFunction(token["graph"], tuple(token["state"]), tuple(token["switches"]))
    compiled = _Recorded(fn, fw, fw, None, decompositions, aot_values)
    compiled.cache[token["key"]] = aot_disk.load_entry(token["entry"], fn, compiled.saved_bytes,
                                                       fw, fw)
    aot_cache.stats().disk_hits += 1
    return _LoadedGraph(compiled)


# --------------------------------------------------------------------------- code


def _check_constant(value: Any) -> None:
    if isinstance(value, (tuple, frozenset)):
        for item in value:
            _check_constant(item)
    elif isinstance(value, types.CodeType):
        for item in value.co_consts:
            _check_constant(item)
    elif type(value) not in _IMMUTABLE:
        raise NotRecordable(f"a {type(value).__name__} constant in the transformed code")


def _module_named(value: Any) -> str | None:
    """The name of the module whose globals `value` is (the transformed code writes another
    module's global through its dict), else None."""
    name = value.get("__name__") if type(value) is dict else None
    module = sys.modules.get(name) if isinstance(name, str) else None
    return name if module is not None and vars(module) is value else None


def _strip(code: types.CodeType) -> tuple[bytes, dict[str, Any], list[BackendCallable]]:
    """The transformed code without its graphs and module globals (marshalled), where they
    were among its constants (`places`: "positions" of the graphs, per graph whether it was
    wrapped for an eager rerun on an exception (`GuardedGraph`: its `random` flag) or not
    (None), and the names of the modules whose globals sit at "modules"), and the graphs. A
    wrapped graph that copies inputs (one run as it is, never an aotgrad backend's) is not
    recordable."""
    consts = list(code.co_consts)
    positions: list[int] = []
    graphs: list[BackendCallable] = []
    guarded: list[bool | None] = []
    modules: list[tuple[int, str]] = []
    for i, value in enumerate(consts):
        inner = value.compiled if isinstance(value, GuardedGraph) and not value.copied else value
        if isinstance(inner, BackendCallable):
            positions.append(i)
            graphs.append(inner)
            guarded.append(value.random if inner is not value else None)
            consts[i] = None
        elif (module := _module_named(value)) is not None:
            modules.append((i, module))
            consts[i] = None
        else:
            _check_constant(value)
    places = {"positions": positions, "guarded": guarded, "modules": modules}
    return marshal.dumps(code.replace(co_consts=tuple(consts))), places, graphs


def _restore(data: bytes, places: dict[str, Any], graphs: Sequence[Any],
             frame: types.CodeType) -> types.CodeType:
    code = marshal.loads(data)  # NOTE: our own entry, verified by its content hash
    if not isinstance(code, types.CodeType):
        raise TypeError("not a code object")
    consts = list(code.co_consts)
    for position, graph, random in zip(places["positions"], graphs, places["guarded"],
                                       strict=True):
        if consts[position] is not None:
            raise ValueError("a graph's place holds a constant")
        consts[position] = graph if random is None else GuardedGraph(graph, random, (), frame)
    for position, module in places["modules"]:
        if consts[position] is not None:
            raise ValueError("a module's place holds a constant")
        consts[position] = vars(importlib.import_module(module))
    return code.replace(co_consts=tuple(consts))


# --------------------------------------------------------------------------- key


def _frame_key(cf: CompiledFunction, fw: Any, decompositions: Any) -> str:
    material = (
        FORMAT, portable_guards.code_digest(cf.code), str(cf.f_globals.get("__name__")),
        cf.backend_name, cf.fullgraph, cf.options.key,
        repr(sorted(capture.config.values().items())),
        repr(sorted(guards.config.values().items())),
        aot_cache.context_key(), aot_cache.compiler_key(fw)[1],
        aot_cache.decompositions_key(decompositions),
        tuple(sorted(serialize.environment(_PACKAGES).items())))
    return hashlib.sha256(serialize.stable_text(material).encode()).hexdigest()


def _slot_key(key: str, slot: int) -> str:
    return hashlib.sha256(f"{key}:{slot}".encode()).hexdigest()


class FrameDiskCache:
    """capture's `FrameStore` over aotgrad's disk store (see the module doc)."""

    def _setting(self, cf: CompiledFunction) -> tuple[Any, Any, Any, dict[str, Any]] | None:
        """(disk store, compiler, decompositions, aotgrad values), or None when off or
        the backend is not one whose graphs this cache can rebuild."""
        store = aot_cache.disk_store()
        if store is None or not aotgrad.config.options.disk_cache or (
                not aotgrad.config.options.graph_cache):
            return None
        if cf.backend_name not in _BACKENDS or cf.backend is not capture.lookup_backend(
                cf.backend_name):
            return None
        fw, decompositions, values = _compilers(cf.backend_name, cf.options.backend, None)
        return store, fw, decompositions, values

    def save(self, cf: CompiledFunction, tree: guards.GuardTree, code: types.CodeType,
             gm: torch.fx.GraphModule | None) -> None:
        """Record a fresh compile of `cf` (when every part of it is portable)."""
        setting = self._setting(cf)
        if setting is None:
            return
        store, fw, decompositions, _ = setting
        try:
            data, places, graphs = _strip(code)
            record = {"guards": portable_guards.encode(tree), "code": data, "places": places,
                      "graphs": [_graph_token(g, fw) for g in graphs]}
            key = _frame_key(cf, fw, decompositions)
            serialize.dumps(record)
        except (NotRecordable, portable_guards.NotPortable, aot_cache.Uncacheable,
                ValueError) as exc:
            log.debug("frame cache: %s not recorded: %s", cf.code.co_name, exc)
            return
        # NOTE: the store never replaces an entry (one build per name): each record has its
        # own slot under the frame's key; the first free slot takes a new record.
        free = None
        for slot in range(MAX_RECORDS):
            existing = self._record(store, _slot_key(key, slot))
            if existing is None:
                free = slot if free is None else free
            elif existing["guards"] == record["guards"]:
                return
        if free is None:
            log.debug("frame cache: %s has %d records; this one is not kept", cf.code.co_name,
                      MAX_RECORDS)
            return
        store.put(_slot_key(key, free), serialize.dumps({"format": FORMAT, "record": record}))

    def _record(self, store: Any, key: str) -> dict[str, Any] | None:
        data = store.get(key)
        if data is None:
            return None
        try:
            state = serialize.loads(data)
            if not isinstance(state, dict) or state.get("format") != FORMAT:
                raise ValueError("not a frame record")
            record = state["record"]
            if not isinstance(record, dict):
                raise TypeError("not a frame record")
        except Exception as exc:  # noqa: BLE001 - an entry that cannot be read is a miss
            store.discard(key, f"cannot be read ({type(exc).__name__}: {exc})")
            return None
        return record

    def load(self, cf: CompiledFunction, L: dict[str, object],
             ) -> tuple[guards.GuardTree, types.CodeType] | None:
        """The first record of `cf` whose guards pass for this call, rebuilt."""
        setting = self._setting(cf)
        if setting is None:
            return None
        store, fw, decompositions, values = setting
        try:
            key = _frame_key(cf, fw, decompositions)
        except aot_cache.Uncacheable:
            return None
        for slot in range(MAX_RECORDS):
            record = self._record(store, _slot_key(key, slot))
            if record is None:
                continue
            try:
                tree = portable_guards.decode(record["guards"], L, cf.f_globals)
            except Exception as exc:  # noqa: BLE001 - another record, or a miss
                log.debug("frame cache: record of %s does not apply: %s", cf.code.co_name,
                          exc)
                continue
            if guards.interpret(tree, L, cf.f_globals) is not None:
                continue
            try:
                graphs = [_load_graph(t, fw, decompositions, values) for t in record["graphs"]]
                return tree, _restore(record["code"], record["places"], graphs, cf.code)
            except Exception as exc:  # noqa: BLE001 - a damaged record: a miss
                store.discard(_slot_key(key, slot),
                              f"cannot be loaded ({type(exc).__name__}: {exc})")
                return None
        return None


_cache = FrameDiskCache()


def install() -> None:
    """Make this capture's frame store (importing `compiler` does)."""
    if frame_store.frame_store() is None:
        frame_store.set_frame_store(_cache)
