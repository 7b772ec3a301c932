"""Frame interception in pure Python: the compiled wrapper, its guard cache, compiling a
frame on a miss, recompile logging and the eager fallbacks.

Hot path per call: bind arguments to a dict (a generated binder per code object), run the
cache's compiled guard functions, call the transformed function.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import keyword
import logging
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import guards
import torch
from guards.sources import LocalSource, Source

from capture import backends, config, frame_store, graph_errors, logs, resume, runtime_checks
from capture.bytecode import codegen, versions
from capture.bytecode.instructions import format_code
from capture.contexts import AutocastState
from capture.graph_break import BackendCompilerFailed, GraphBreakKind, Unsupported, unsupported
from capture.guard_builder import build_tree
from capture.interp.lookup_guards import defaults_changed, guard_own_defaults
from capture.output_graph import OutputGraph
from capture.shape_guards import ConstraintViolation, check_marked, shape_guards
from capture.shapes import forget_shapes, shapes_for
from capture.values import CellValue, Value
from capture.values.wrap import wrap

log = logging.getLogger("capture")


class _QuietMetaFailures(logging.Filter):
    """Drops fake-tensor's "failed while attempting to run meta" traceback while capture
    traces: the op's error reaches the user from eager (`_user_error_probe`) instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (is_compiling() and str(record.msg).startswith("failed while attempting"))


logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QuietMetaFailures())

_frame_ids = itertools.count()
_all_wrappers: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()
_state = threading.local()
_no_patch = contextlib.nullcontext()


_recorders: list[list[CompileRecord]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[CompileRecord]]:
    """Collect the `CompileRecord` of every frame compiled inside the block (resume
    functions and compiled callees of graph breaks included), in compile order."""
    records: list[CompileRecord] = []
    _recorders.append(records)
    try:
        yield records
    finally:
        _recorders.remove(records)


def is_compiling() -> bool:
    """True while capture is tracing a frame."""
    return bool(getattr(_state, "compiling", False))


@dataclass
class CompileRecord:
    """What one compile produced (kept for tests, `explain`-style tools and the demo)."""

    graph: torch.fx.GraphModule | None
    guard_tree: guards.GuardTree
    code: types.CodeType | None
    capture_seconds: float
    unsupported: Unsupported | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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


def make_binder(fn: types.FunctionType) -> Callable[..., dict[str, object]]:
    """A function with `fn`'s signature that returns its arguments (and free variables) by name."""
    code = fn.__code__
    nargs = code.co_argcount
    nposonly = code.co_posonlyargcount
    nkwonly = code.co_kwonlyargcount
    # NOTE: a resume function's arguments carry the frame's locals, whose names need not be
    # identifiers (pytest's assertion rewriting binds `@py_assert0`): those get stand-ins.
    spelled = {
        name: name if name.isidentifier() and not keyword.iskeyword(name) else f"_arg{i}"
        for i, name in enumerate(code.co_varnames)
    }
    names = list(code.co_varnames[: nargs + nkwonly])
    params = []
    for i, name in enumerate(names[:nargs]):
        params.append(spelled[name])
        if i + 1 == nposonly:
            params.append("/")
    index = nargs + nkwonly
    extra: list[str] = []
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + spelled[code.co_varnames[index]])
        extra.append(code.co_varnames[index])
        index += 1
    elif nkwonly:
        params.append("*")
    params.extend(spelled[name] for name in names[nargs:])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + spelled[code.co_varnames[index]])
        extra.append(code.co_varnames[index])
    entries = [f"{n!r}: {spelled[n]}" for n in names + extra]
    for i, free in enumerate(code.co_freevars):
        entries.append(f"{free!r}: _cell{i}.cell_contents")
    src = f"def _bind({', '.join(params)}):\n    return {{{', '.join(entries)}}}\n"
    namespace: dict[str, Any] = {}
    for i, cell in enumerate(fn.__closure__ or ()):
        namespace[f"_cell{i}"] = cell
    exec(compile(src, f"<capture binder {code.co_name}>", "exec"), namespace)  # noqa: S102
    binder: Any = namespace["_bind"]
    # NOTE: a call with wrong arguments raises the TypeError eager raises, naming the
    # user's function ("f() takes 1 positional argument but 2 were given").
    binder.__name__ = fn.__name__
    binder.__qualname__ = fn.__qualname__
    binder.__defaults__ = fn.__defaults__
    binder.__kwdefaults__ = fn.__kwdefaults__
    return binder  # type: ignore[no-any-return]  # built by exec


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
        self._entry_grad_mode = True
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
        self._entry_grad_mode = grad_mode
        # NOTE: tracing enters autocast blocks for real; a trace stopped inside one leaves it.
        autocast_state = self._entry_autocast = AutocastState.current()
        _state.compiling = True
        graph_break: Unsupported | None = None
        try:
            try:
                new_code, gm = _trace_and_codegen(self, output, L, marker)
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
        for records in _recorders:
            records.append(record)

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
        torch._C._set_grad_enabled(self._entry_grad_mode)
        self._entry_autocast.restore()
        try:
            new_code, gm = _trace_and_codegen(self, output, L, marker, stop)
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

    def _resume_function(self, code: types.CodeType) -> CompiledFunction:
        """A resume function of this frame: compiled on its first call, like any frame."""
        fn = types.FunctionType(code, self.f_globals, code.co_name, None, self.fn.__closure__)
        return CompiledFunction(
            fn, self.backend, self.backend_name, False, options=self.options
        )

    def _compiled_callee(self, fn: types.FunctionType) -> CompiledFunction:
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


def _trace_and_codegen(
    cf: CompiledFunction,
    output: OutputGraph,
    L: dict[str, object],
    marker: str,
    stop: resume.BreakPoint | None = None,
) -> tuple[types.CodeType, torch.fx.GraphModule | None]:
    from capture.interp import load_handlers
    from capture.interp.translator import Translator

    load_handlers()
    code = cf.code
    guard_own_defaults(output, cf.fn)
    f_locals: dict[str, Value] = {}
    cells: dict[str, CellValue] = {}
    for name, value in L.items():
        wrapped = wrap(output, value, LocalSource(name))
        if name in code.co_freevars:
            cells[name] = CellValue(wrapped, LocalSource(name))
        else:
            f_locals[name] = wrapped
    tx = Translator(output, code, cf.f_globals, f_locals, cells)
    cg = codegen.CodeBuilder(code)
    if stop is None:
        result = tx.run()
        output.current_tx = None
        cg.reconstruct(result)
        cg.store_fast(codegen.RETURN_TMP)
        _replay_side_effects(cg, output)
        cg.load_fast(codegen.RETURN_TMP)
        cg.instrs.append(codegen.Instr("RETURN_VALUE"))
    else:
        if not tx.run_to((stop.index, stop.visit)):
            raise unsupported(GraphBreakKind.UNSUPPORTED_OBJECT, "the break point was not reached")
        output.current_tx = None
        resume.emit_break(
            cg, tx, lambda: _replay_side_effects(cg, output), cf._resume_function,
            cf._compiled_callee, stop.in_callee,
        )
    body = cg.instrs
    gm: torch.fx.GraphModule | None = None
    has_calls = any(n.op != "placeholder" for n in output.graph.nodes)
    check_marked(output.symbolic, output.shape_env)
    if has_calls or cg.graph_outputs:
        runtime_checks.add_runtime_checks(output.graph, output.fake_mode.shape_env)
        output.graph.output(tuple(v.node for v in cg.graph_outputs))
        gm = torch.fx.GraphModule(torch.nn.Module(), output.graph, "CapturedGraph")
        if cf.option("verbose") or logs.graph_log.isEnabledFor(logging.DEBUG):
            logs.verbose_print("graph", marker, gm.print_readable(print_output=False))
        example_inputs = [example for _, example, _ in output.inputs]
        replays = not output.side_effects.is_empty()
        compiled = _call_backend(cf, gm, example_inputs, replays)
        if graph_errors.needs_guard(gm, replays):
            compiled = graph_errors.guard_graph(compiled, gm, code)
        pre = codegen.CodeBuilder(code)
        pre.load_callable(compiled)
        for source, _, _ in output.inputs:
            pre.load_source(source)
        pre.call_function(len(output.inputs))
        pre.store_fast(codegen.GRAPH_OUT)
        body = pre.instrs + body
    return codegen.assemble(code, body), gm


#: Autograd's error for a tensor saved for backward and changed in place afterwards.
_SAVED_TENSOR_CHANGED = "needed for gradient computation has been modified by an inplace operation"


def _call_backend(
    cf: CompiledFunction, gm: torch.fx.GraphModule, example_inputs: list[Any],
    replays_effects: bool = False,
) -> Callable[..., Any]:
    """The backend's compiled callable for `gm`; a backend failure (it raises, or returns no
    callable) is logged and the graph runs eagerly under `suppress_errors`, else it raises
    `BackendCompilerFailed` naming the backend. A failure that is the program's own error
    (eager raises it too) in a frame with side effects to replay (`replays_effects`) makes
    the whole function run eagerly: a graph run eagerly could change an input in place before
    it raises, and the effects before the error would be lost."""
    _state.compiling = False
    grad_mode = torch.is_grad_enabled()
    # NOTE: the graph is called first thing in the transformed code, so in the caller's grad
    # mode: a backend that compiles for its example inputs' signature then gets the right one.
    torch._C._set_grad_enabled(cf._entry_grad_mode)
    try:
        if cf.options.backend:
            compiled = cf.backend(gm, example_inputs, options=dict(cf.options.backend))
        else:
            compiled = cf.backend(gm, example_inputs)
        if not callable(compiled):
            raise TypeError(f"the backend returned {compiled!r:.60}, not a callable")
        return compiled  # type: ignore[no-any-return]
    except Exception as e:
        if cf.option("suppress_errors"):
            log.warning("capture: backend %r failed on a graph of %s (%s: %s); running that "
                        "graph eagerly (suppress_errors)", cf.backend_name, cf.code.co_name,
                        type(e).__name__, e)
            return backends.eager(gm, example_inputs)
        if isinstance(e, RuntimeError) and _SAVED_TENSOR_CHANGED in str(e):
            # NOTE: the program changes in place a tensor an earlier op saved for backward:
            # eager raises only if that backward runs, while a joint trace differentiates
            # every output now. The graph runs eagerly (the error, if any, comes as eager's).
            log.info("[%d] %s: a tensor saved for backward is changed in place; running the "
                     "graph eagerly", cf.frame_id, cf.code.co_name)
            return backends.eager(gm, example_inputs)
        if _raises_eagerly(gm, example_inputs, type(e)):
            if replays_effects:
                raise unsupported(
                    GraphBreakKind.EXCEPTION,
                    f"the graph raises {type(e).__name__} for its example inputs: {e}",
                ) from e
            # NOTE: the program's own error (an in-place write to a leaf that requires grad,
            # say), found by a backend that traces with autograd: eager raises it too, so the
            # graph runs eagerly and raises it for real on each call.
            log.info("[%d] %s: the graph raises %s eagerly too; running it eagerly",
                     cf.frame_id, cf.code.co_name, type(e).__name__)
            return backends.eager(gm, example_inputs)
        raise BackendCompilerFailed(cf.backend_name, e) from e
    finally:
        torch._C._set_grad_enabled(grad_mode)
        _state.compiling = True


def _raises_eagerly(
    gm: torch.fx.GraphModule, example_inputs: list[Any], error: type[BaseException]
) -> bool:
    """Whether running `gm` eagerly on copies of its inputs raises an `error` (the RNG state is
    restored, the inputs are untouched)."""
    copies = [_copy(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    rng = torch.random.get_rng_state()
    try:
        gm.forward(*copies)
    except error:
        return True
    except Exception:  # noqa: BLE001 - another error: the backend's failure stands
        return False
    finally:
        torch.random.set_rng_state(rng)
    return False


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with `t`'s autograd role (a leaf stays a leaf, requiring grad as `t` does) and
    its layout in a copy of its storage: strides, offset and overlap (an expanded input
    written in place raises eagerly only while its elements share memory)."""
    try:
        storage = t.untyped_storage().clone()  # type: ignore[no-untyped-call]  # torch's storage API is untyped
        same = torch.empty(0, dtype=t.dtype, device=t.device)
        same.set_(storage, t.storage_offset(), t.size(), t.stride())
    except (RuntimeError, NotImplementedError, TypeError):
        same = t.detach().clone()
    if t.is_leaf:
        return same.requires_grad_(t.requires_grad)
    if not t.requires_grad:
        return same
    # NOTE: a non-leaf: a view of a clone of the whole storage made a leaf, so in-place
    # writes are allowed as on `t` itself.
    numel = same.untyped_storage().nbytes() // max(t.element_size(), 1)
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(same.untyped_storage(), 0, (numel,), (1,))
    return flat.requires_grad_(True).clone().as_strided(t.size(), t.stride(), same.storage_offset())


def _replay_side_effects(cg: codegen.CodeBuilder, output: OutputGraph) -> None:
    """Emit the recorded mutations, in two phases.

    Every object a mutation targets and every value it stores is loaded first (into
    temporaries), while the state is still the one the sources describe; the mutations are
    applied after. So replaying one mutation never changes what another reads (`A.append(B[0]);
    B.pop(0)` appends B's old first item), whatever order they are emitted in."""
    from capture.side_effects import DELETED
    from capture.values import DictValue, ListValue, SetValue

    effects = output.side_effects
    apply: list[Callable[[], None]] = []

    def keep(value: Value | None = None, source: Source | None = None) -> str:
        if source is not None:
            cg.load_source(source)
        else:
            assert value is not None
            cg.reconstruct(value)
        name = cg.new_temp()
        cg.store_fast(name)
        return name

    def call_helper(helper: object, *temps: str) -> Callable[[], None]:
        def emit() -> None:
            cg.load_callable(helper)
            for temp in temps:
                cg.load_fast(temp)
            cg.call_function(len(temps))
            cg.instrs.append(codegen.Instr("POP_TOP"))

        return emit

    for value in effects.containers.values():
        assert value.source is not None
        if isinstance(value, ListValue) and not value.is_loaded:
            target = keep(source=value.source)
            for item in value.appended:
                cg.reconstruct(item)
            cg.build_tuple(len(value.appended))
            items = cg.new_temp()
            cg.store_fast(items)
            apply.append(call_helper(codegen.extend_list, target, items))
            continue
        if isinstance(value, SetValue) and not value.is_loaded:
            target = keep(source=value.source)
            for _, item in value.added:
                cg.reconstruct(item)
            cg.build_tuple(len(value.added))
            items = cg.new_temp()
            cg.store_fast(items)
            apply.append(call_helper(codegen.update_set, target, items))
            continue
        if isinstance(value, DictValue) and not value.is_loaded:
            target = keep(source=value.source)
            stored = DictValue(dict(value.stored))
            items = keep(stored)
            apply.append(call_helper(codegen.update_dict, target, items))
            continue
        helper: object
        if isinstance(value, ListValue):
            helper = codegen.replace_list
        elif isinstance(value, DictValue):
            helper = codegen.replace_dict
        elif isinstance(value, SetValue):
            helper = codegen.replace_set
        else:
            continue
        target = keep(source=value.source)
        source = value.source
        value.source = None
        try:
            items = keep(value)
        finally:
            value.source = source
        apply.append(call_helper(helper, target, items))

    def store_attr(owner_tmp: str, name: str, value_tmp: str | None) -> Callable[[], None]:
        def emit() -> None:
            if value_tmp is None:
                cg.load_fast(owner_tmp)
                cg.instrs.append(codegen.Instr("DELETE_ATTR", name))
                return
            cg.load_fast(value_tmp)
            cg.load_fast(owner_tmp)
            cg.instrs.append(codegen.Instr("STORE_ATTR", name))

        return emit

    for owner, attrs in effects.attr_writes.values():
        owner_tmp = keep(owner)
        for name, attr_value in attrs.items():
            value_tmp = None if attr_value is DELETED else keep(attr_value)
            apply.append(store_attr(owner_tmp, name, value_tmp))

    for cell, contents in effects.cell_writes.values():
        contents_tmp = keep(contents)
        cell_source = cell.source
        if isinstance(cell_source, LocalSource):
            def store_deref(tmp: str = contents_tmp, local: str = cell_source.local) -> None:
                cg.load_fast(tmp)
                cg.instrs.append(codegen.Instr("STORE_DEREF", codegen.FreeVar(local)))

            apply.append(store_deref)
        else:
            assert isinstance(cell_source, guards.ClosureSource)
            cg.load_source(cell_source.source)
            cg.emit(versions.load_attr("__closure__"))
            cg.load_const(cell_source.index)
            cg.instrs.append(codegen.Instr("BINARY_SUBSCR"))
            cell_tmp = cg.new_temp()
            cg.store_fast(cell_tmp)
            apply.append(store_attr(cell_tmp, "cell_contents", contents_tmp))

    for f_globals, name, gvalue in effects.global_writes.values():
        value_tmp = keep(gvalue)

        def store_global(tmp: str = value_tmp, g: dict[str, object] = f_globals,
                         key: str = name) -> None:
            cg.load_fast(tmp)
            if g is output.root_globals:
                cg.instrs.append(codegen.Instr("STORE_GLOBAL", key))
            else:
                cg.load_object(g)
                cg.load_const(key)
                cg.instrs.append(codegen.Instr("STORE_SUBSCR"))

        apply.append(store_global)

    for emit in apply:
        emit()



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
