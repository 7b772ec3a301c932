"""Frame interception in pure Python: the compiled wrapper, its guard cache, compiling a
frame on a miss, recompile logging and the eager fallbacks.

Hot path per call: bind arguments to a dict (a generated binder per code object,
`frame_binder`), run the cache's compiled guard functions, call the transformed function.
A miss traces the frame (`frame_trace`: trace, emit bytecode, replay side effects with
`replay`, call the backend with `backend_call`); `frame_state` holds whether a frame is
being compiled and the records compiles leave.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import time
import types
import warnings
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import guards
import torch

from capture import config, frame_store, graph_errors, logs, resume
from capture.bytecode.instructions import format_code
from capture.contexts import AutocastState
from capture.frame_binder import make_binder
from capture.frame_state import CompileRecord, announce, is_compiling, recording, thread_state
from capture.frame_trace import trace_and_codegen
from capture.graph_break import BackendCompilerFailed, GraphBreakKind, Unsupported, unsupported
from capture.guard_builder import build_tree
from capture.interp.lookup_guards import defaults_changed
from capture.output_graph import OutputGraph
from capture.shape_guards import ConstraintViolation, shape_guards
from capture.shapes import forget_shapes, shapes_for

# NOTE: CompileRecord, is_compiling, recording and make_binder live in frame_state and
# frame_binder; they are named here too, where callers have always imported them.
__all__ = ["CompileOptions", "CompileRecord", "CompiledFunction", "is_compiling", "make_binder",
           "recording", "reset_all", "run_disabled"]

log = logging.getLogger("capture")


_frame_ids = itertools.count()
_all_wrappers: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()
_state = thread_state  # NOTE: read on every call (the hot path): one global lookup
_no_patch = contextlib.nullcontext()


# NOTE: caches are per code object (keyed by identity: equal code objects of different
# functions keep apart) and per (backend, fullgraph), so two wrappers of one function with
# one backend share their entries, and one function compiled with two backends does not.
# NOTE: a compile call's options are part of the key: two wrappers with other options
# (another cache size limit, other backend options) keep apart.
_code_caches: dict[
    tuple[int, int, bool, str],
    tuple[types.CodeType, guards.GuardCache[Callable[..., Any]], int, object],
] = {}


def _shared_cache(
    code: types.CodeType, backend: object, fullgraph: bool, options: CompileOptions
) -> tuple[guards.GuardCache[Callable[..., Any]], int]:
    key = (id(code), id(backend), fullgraph, options.key)
    entry = _code_caches.get(key)
    if entry is None or entry[0] is not code or entry[3] is not backend:
        limit = options.guards.get("cache_size_limit")
        cache: guards.GuardCache[Callable[..., Any]] = guards.GuardCache(
            limit if isinstance(limit, int) else None)
        entry = (code, cache, next(_frame_ids), backend)
        _code_caches[key] = entry
    return entry[1], entry[2]


@dataclass(frozen=True)
class CompileOptions:
    """One compile call's option values, split by owner: capture's and guards' options apply
    to the wrapper; every other name is passed to the backend (`backend(gm, example_inputs,
    options=...)`). Names may be qualified (`guards.cache_size_limit`, `inductor.fusion`);
    the backend gets them without their package."""

    capture: Mapping[str, object] = field(default_factory=dict)
    guards: Mapping[str, object] = field(default_factory=dict)
    backend: Mapping[str, object] = field(default_factory=dict)
    #: `dynamic=`: None automatic dynamic shapes, True all sizes symbolic, False static.
    dynamic: bool | None = None

    @staticmethod
    def split(options: Mapping[str, object] | None,
              dynamic: bool | None = None) -> CompileOptions:
        """Sort `options` by owner, checking capture's and guards' names and types."""
        own: dict[str, object] = {}
        guard: dict[str, object] = {}
        rest: dict[str, object] = {}
        for name, value in (options or {}).items():
            package, dot, short = name.rpartition(".")
            if package in ("", "capture") and short in config.declared:
                own[short] = value
            elif package in ("", "guards") and short in guards.config.declared:
                guard[short] = value
            else:
                rest[short if dot else name] = value
        config.replace(own)
        guards.config.replace(guard)
        return CompileOptions(own, guard, rest, dynamic)

    @property
    def key(self) -> str:
        return repr((sorted(self.capture.items()), sorted(self.guards.items()),
                     sorted(self.backend.items()), self.dynamic))


class CompiledFunction:
    """The wrapper returned by `capture.optimize` for a function."""

    def __init__(
        self,
        fn: types.FunctionType,
        backend: Callable[..., Any],
        backend_name: str,
        fullgraph: bool,
        self_obj: object | None = None,
        options: CompileOptions | None = None,
    ) -> None:
        self.fn = fn
        self.code = fn.__code__
        self.f_globals = fn.__globals__
        self.backend = backend
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.self_obj = self_obj
        self.options = options or CompileOptions()
        self.cache, self.frame_id = _shared_cache(self.code, backend, fullgraph, self.options)
        self.compiles: list[CompileRecord] = []
        self._binder = make_binder(fn)
        self._logged_fallback = False
        self._warned_limit = False
        self.entry_grad_mode = True
        self._entry_autocast = AutocastState.current()
        self._no_break: Unsupported | None = None  # why the last graph break was not taken
        _all_wrappers.add(self)
        functools.update_wrapper(self, fn)

    def option(self, name: str) -> Any:
        """A capture option's value for this wrapper: its compile call's, else the global."""
        return self.options.capture.get(name, getattr(config.options, name))

    @property
    def limit(self) -> int:
        return self.cache.limit

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.self_obj is not None:
            args = (self.self_obj, *args)
        if getattr(_state, "compiling", False) or getattr(_state, "disabled", 0):
            return self.fn(*args, **kwargs)
        L = self._binder(*args, **kwargs)
        G = self.f_globals
        for entry in self.cache._entries:
            if entry.check(L, G):
                try:
                    return entry.value(*args, **kwargs)
                except Exception as error:
                    if not graph_errors.claim(error, self.code):
                        raise
                # NOTE: outside the except block: eager's exception is not chained to it
                return self.fn(*args, **kwargs)
        return self._miss(args, kwargs, L)

    def _run_entry(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        """Call an entry's function; its graph's run-time exception runs the function
        eagerly instead when `graph_errors` says so."""
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            if not graph_errors.claim(error, self.code):
                raise
        return self.fn(*args, **kwargs)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return types.MethodType(self, obj)

    # -- misses ----------------------------------------------------------------------------
    def _miss(self, args: tuple[Any, ...], kwargs: dict[str, Any], L: dict[str, object]) -> Any:
        G = self.f_globals
        if defaults_changed(self._binder, self.fn):
            # NOTE: `fn.__defaults__ = ...` since the binder was made (guarded, so we are here)
            self._binder = make_binder(self.fn)
            L = self._binder(*args, **kwargs)
        cache = self.cache
        if len(cache):
            hit = cache.lookup(L, G)
            if hit is not None:
                return self._run_entry(hit, args, kwargs)
            reasons = [guards.explain(e.tree, L, G) or "?" for e in cache.entries]
            if len(cache) >= self.limit:
                if not self._warned_limit:
                    self._warned_limit = True
                    warnings.warn(
                        f"capture: cache_size_limit ({self.limit}) reached for "
                        f"{self.code.co_name} ({self.code.co_filename}:{self.code.co_firstlineno}); "
                        f"running it eagerly from now on. Last failure: {reasons[0]}. "
                        "To keep more compiled entries per function, raise the limit: "
                        "compiler.compile(..., options={'cache_size_limit': N}), "
                        "compiler.config.patch(cache_size_limit=N) or env "
                        "GUARDS_CACHE_SIZE_LIMIT=N",
                        stacklevel=3,
                    )
                return self.fn(*args, **kwargs)
            if self.option("log_recompiles"):
                # NOTE: INFO, not a warning: a recompile after `model.eval()` or a grad-mode
                # toggle is expected; enable the 'capture.recompiles' logger to see them.
                logs.recompile_log.info(
                    "[%d/%d] recompiling %s (%s:%d): %s",
                    self.frame_id,
                    len(cache),
                    self.code.co_name,
                    self.code.co_filename,
                    self.code.co_firstlineno,
                    reasons[0],
                )
        with guards.config.patch(self.options.guards) if self.options.guards else _no_patch:
            entry_fn = self._from_disk(L) or self._compile(L)
        return self._run_entry(entry_fn, args, kwargs)

    def _from_disk(self, L: dict[str, object]) -> Callable[..., Any] | None:
        """An entry recorded on disk by an earlier process whose guards pass for this call
        (`capture.frame_store`), installed in the cache; None when there is none."""
        start = time.perf_counter()
        found = frame_store.load(self, L)
        if found is None:
            return None
        tree, fn = found
        self._record(CompileRecord(None, tree, fn.__code__, time.perf_counter() - start,
                                   extra={"from_disk": True}))
        self._add_entry(tree, fn)
        return fn

    def _compile(self, L: dict[str, object]) -> Callable[..., Any]:
        marker = f"{self.frame_id}/{len(self.cache)}"
        start = time.perf_counter()
        global_state = guards.GlobalStateMatch.current()
        output = OutputGraph(self.f_globals, self.code.co_name, self._shapes())
        grad_mode = torch.is_grad_enabled()
        self.entry_grad_mode = grad_mode
        # NOTE: tracing enters autocast blocks for real; a trace stopped inside one leaves it.
        autocast_state = self._entry_autocast = AutocastState.current()
        _state.compiling = True
        graph_break: Unsupported | None = None
        try:
            try:
                new_code, gm = trace_and_codegen(self, output, L, marker)
            except Unsupported as first:
                retry = self._trace_with_break(first, L, marker)
                if retry is None:
                    raise
                output, new_code, gm = retry
                graph_break = first
        except Unsupported as e:
            tree = build_tree(output.guards.values(), global_state)
            self._record(CompileRecord(None, tree, None, time.perf_counter() - start, e))
            if e.kind is GraphBreakKind.EXCEPTION:
                return self._user_error_probe(e, tree, marker)
            if self.fullgraph:
                raise
            self._fall_back(e, tree, marker)
            return self.fn
        except (BackendCompilerFailed, ConstraintViolation):
            raise
        except Exception as error:  # noqa: BLE001  # never let it pass for the program's own
            # NOTE: an exception escaped the translator (a Python error of the program met at
            # an operation capture performs for real, or a capture bug): the function runs
            # eagerly, so the user gets eager's exception with every side effect before it,
            # or, if eager raises nothing, the frame falls back to eager.
            reason = unsupported(
                GraphBreakKind.EXCEPTION,
                f"{type(error).__name__} while tracing: {error}",
            )
            tree = build_tree(output.guards.values(), global_state)
            self._record(CompileRecord(None, tree, None, time.perf_counter() - start, reason))
            return self._user_error_probe(reason, tree, marker)
        finally:
            _state.compiling = False
            torch._C._set_grad_enabled(grad_mode)
            autocast_state.restore()
        tree = build_tree(output.guards.values(), global_state,
                          shape_guards(output.symbolic, output.shape_env))
        fn = types.FunctionType(
            new_code, self.f_globals, self.fn.__name__, self.fn.__defaults__, self.fn.__closure__
        )
        fn.__kwdefaults__ = self.fn.__kwdefaults__
        record = CompileRecord(gm, tree, new_code, time.perf_counter() - start)
        if graph_break is not None:
            record.extra["graph_break"] = graph_break
        self._record(record)
        if graph_break is None:
            frame_store.save(self, tree, new_code, gm)
        if self.option("verbose") or logs.guards_log.isEnabledFor(logging.DEBUG):
            logs.verbose_print("guards", marker, tree.render())
            logs.verbose_print("bytecode", marker, "original:\n" + format_code(self.code)
                               + "\ntransformed:\n" + format_code(new_code))
        self._add_entry(tree, fn)
        return fn

    def _fall_back(self, error: Unsupported, tree: guards.GuardTree, marker: str) -> None:
        """Run this code eagerly for inputs passing `tree` (the reason is logged once)."""
        if not self._logged_fallback:
            self._logged_fallback = True
            # NOTE: with why the frame could not break where it stopped (a generator-based
            # context manager left open there, say), if it tried.
            again = self._no_break
            log.warning("[%s] capture could not compile %s; running it eagerly. Reason: %s%s",
                        marker, self.code.co_name, error,
                        "" if again is None else f"\n  no graph break there: {again.explanation}")
        self._add_entry(tree, self.fn)

    def _user_error_probe(
        self, error: Unsupported, tree: guards.GuardTree, marker: str
    ) -> Callable[..., Any]:
        """The call to make when tracing met an exception (`x @ y` of mismatched shapes, a
        missing dict key, a failed assert): run the function eagerly, so that the user gets
        eager's own exception, raised from their line. If eager raises nothing, capture could
        not follow the program: fall back to eager (or, under fullgraph, raise `error`)."""

        def probe(*args: Any, **kwargs: Any) -> Any:
            try:
                result = self.fn(*args, **kwargs)
            except Exception as user_error:
                log.info("[%s] %s raised %s (eagerly too): %s", marker, self.code.co_name,
                         type(user_error).__name__, user_error)
                raise
            if self.fullgraph:
                error.hints.append(
                    "The function ran eagerly once to check whether this exception is the "
                    "program's own: it raised nothing, so capture could not follow it.")
                raise error
            self._fall_back(error, tree, marker)
            return result

        return probe

    def _record(self, record: CompileRecord) -> None:
        self.compiles.append(record)
        announce(record)

    def _trace_with_break(
        self, error: Unsupported, L: dict[str, object], marker: str
    ) -> tuple[OutputGraph, types.CodeType, torch.fx.GraphModule | None] | None:
        """Trace again up to where `error` stopped the root frame and break the graph there
        (None when the frame cannot break there and must run eagerly as a whole)."""
        self._no_break = None
        stop = None if self.fullgraph else resume.break_point(self.code, error)
        if stop is None:
            return None
        output = OutputGraph(self.f_globals, self.code.co_name, self._shapes())
        # NOTE: the failed trace may have stopped inside a grad-mode or autocast block.
        torch._C._set_grad_enabled(self.entry_grad_mode)
        self._entry_autocast.restore()
        try:
            new_code, gm = trace_and_codegen(self, output, L, marker, stop)
        except Unsupported as again:
            log.debug("[%s] no graph break in %s: %s", marker, self.code.co_name, again)
            self._no_break = again
            return None
        frame = error.where[0] if error.where else None
        logs.graph_break_log.info(
            "[%s] graph break in %s at %s: %s", marker, self.code.co_name,
            f"{frame.filename}:{frame.lineno}" if frame else "?", error.explanation,
        )
        return output, new_code, gm

    def _shapes(self) -> Any:
        """What earlier compiles of this code saw of its input sizes (`capture.shapes`)."""
        return shapes_for(self.cache, self.options.dynamic)

    def resume_function(self, code: types.CodeType) -> CompiledFunction:
        """A resume function of this frame: compiled on its first call, like any frame."""
        fn = types.FunctionType(code, self.f_globals, code.co_name, None, self.fn.__closure__)
        return CompiledFunction(
            fn, self.backend, self.backend_name, False, options=self.options
        )

    def compiled_callee(self, fn: types.FunctionType) -> CompiledFunction:
        """The function a graph break calls, compiled with this frame's backend."""
        return CompiledFunction(fn, self.backend, self.backend_name, False, options=self.options)

    def _add_entry(self, tree: guards.GuardTree, value: Callable[..., Any]) -> None:
        try:
            self.cache.add(tree, value)
        except guards.CacheLimitReached:
            pass

    def reset(self) -> None:
        self.cache.clear()
        forget_shapes(self.cache)
        self.compiles.clear()
        self._warned_limit = False
        self._logged_fallback = False


def reset_all() -> None:
    """Forget every compiled entry of every wrapper."""
    for wrapper in list(_all_wrappers):
        wrapper.reset()
    for _, cache, _, _ in list(_code_caches.values()):
        cache.clear()
    forget_shapes()
    guards.clear_all_caches()


class _Disabled:
    """Context: wrappers called inside run their original function."""

    def __enter__(self) -> None:
        _state.disabled = getattr(_state, "disabled", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _state.disabled -= 1


def run_disabled(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        with _Disabled():
            return fn(*args, **kwargs)

    return inner
