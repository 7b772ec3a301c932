"""The public entry points: `aot_function`, `aot_module`, and the compiled-callable object
they return (one compiled artifact per call signature, made lazily on first use).

IR in: a Python callable or module. IR out: a callable with the same signature that runs
compiled ATen graphs (`aotgrad.pipeline` lists the passes in order).
"""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from aotgrad import cache as _cache
from aotgrad import config as _config
from aotgrad import disk as _disk
from aotgrad.dynamic import SymbolicSignature
from aotgrad.pipeline import PartitionFnLike, compile_inference, compile_training
from aotgrad.runtime import Compiler, InferenceRunner, SavedBytesCounter, TrainingRunner
from aotgrad.trace import AtenTracer, run_with_meta

log = logging.getLogger("aotgrad")

__all__ = ["AotCompiled", "LiftedModule", "aot_function", "aot_module"]

Runner = InferenceRunner | TrainingRunner
# (runner, tensor positions or None for all arguments, check input storages, out spec, flat)
FastEntry = tuple[Runner, list[int] | None, bool, Any, bool]


_FLAT_LEAF_TYPES = (int, float, bool)
_NOT_FLAT = object()

#: `GraphModule.meta` key: per placeholder, whether the caller checks that input's tensor
#: metadata before every call (capture's guards: a TensorMatch of exact class, dtype, device,
#: layout, requires_grad, static sizes, strides where a size is not 1 and not 0).
GUARDED_INPUTS = "guarded_inputs"
#: A `GUARDED_INPUTS` mark (instead of True): the guards also pin that input's placement
#: (every stride, storage offset, leafness: capture does so for module parameters and
#: buffers), so nothing of it is read per call.
PINNED = "pinned"


class GuardedInputs:
    """Which flat arguments `_fast_key` reads in full, and which only in what the caller's
    guards leave unchecked: the storage offset, leafness where the tensor requires grad,
    strides where a size is 1 or 0."""

    __slots__ = ("full", "leaf", "offset", "size", "strides")

    def __init__(self, size: int, full: list[int], offset: list[int], leaf: list[int],
                 strides: list[int]) -> None:
        self.size = size
        self.full = full
        self.offset = offset
        self.leaf = leaf
        self.strides = strides

    @staticmethod
    def of(gm: torch.nn.Module, lifted: int) -> GuardedInputs | None:
        """For a graph whose `meta[GUARDED_INPUTS]` marks its placeholders, called with
        `lifted` module tensors first (never guarded); None without marks."""
        marks = getattr(gm, "meta", {}).get(GUARDED_INPUTS) if isinstance(
            gm, fx.GraphModule) else None
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"] if isinstance(
            gm, fx.GraphModule) else []
        if not isinstance(marks, tuple) or len(marks) != len(placeholders) or not any(marks):
            return None
        full = list(range(lifted))
        offset: list[int] = []
        leaf: list[int] = []
        strides: list[int] = []
        for i, (mark, node) in enumerate(zip(marks, placeholders), start=lifted):
            example = node.meta.get("example_value")
            if mark not in (True, PINNED) or not isinstance(example, torch.Tensor) or not all(
                    type(s) is int for s in (*example.shape, *example.stride())):
                full.append(i)
                continue
            if mark == PINNED:
                continue
            offset.append(i)
            if example.requires_grad:
                leaf.append(i)
            if 1 in example.shape or 0 in example.shape:
                strides.append(i)  # NOTE: the strides the guards do not compare
        return GuardedInputs(lifted + len(placeholders), full, offset, leaf, strides)


def _tensor_key(t: torch.Tensor, training: bool) -> tuple[Any, ...]:
    # NOTE: leafness matters to training: an in-place write to a leaf that requires grad
    # raises, to any other input it is recorded (`aotgrad.joint.fresh_primals`).
    grad = training and t.requires_grad
    return (t.dtype, t.device, t.shape, t.stride(), t.storage_offset(), grad,
            grad and t.is_leaf, type(t))


def _closure_values(fn: Any) -> tuple[Any, ...]:
    """The closure cells' contents of a plain Python function (else ()).

    NOTE: tensors a function closes over are inputs of its graphs, as capture lifts free
    tensors: they get gradients and are read anew on every call.
    """
    if not isinstance(fn, types.FunctionType) or not fn.__closure__:
        return ()
    try:
        return tuple(cell.cell_contents for cell in fn.__closure__)
    except ValueError:  # an empty cell: leave the closure alone
        return ()


def _with_closure(fn: Any, cells: tuple[Any, ...]) -> Any:
    """`fn` with its closure cells holding `cells` (fn itself when it has none)."""
    if not cells:
        return fn
    closure = tuple(types.CellType(value) for value in cells)
    clone = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                               closure)
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone


def _storages_overlap(tensors: Sequence[Any]) -> bool:
    seen: set[int] = set()
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue  # NOTE: a symbolic int argument (`aotgrad.dynamic`)
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen and t.numel() > 0:
            return True
        seen.add(ptr)
    return False


def _restore_sizes(value: Any, spec: Any) -> Any:
    """torch.Size values: torch's pytree rebuilds them as tuples."""
    if spec.type is torch.Size:
        return torch.Size(value)
    if spec.type in (tuple, list) and any(c.type is torch.Size for c in spec.children()):
        items = [_restore_sizes(v, c) for v, c in zip(value, spec.children())]
        return spec.type(items)
    return value


def _output(outs: Sequence[Any], out_spec: Any) -> Any:
    """The user's output structure from the flat outputs."""
    if out_spec.is_leaf():
        return outs[0]
    return _restore_sizes(tree_unflatten(list(outs), out_spec), out_spec)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class AotCompiled:
    """A compiled callable: `self(*args)` flattens the arguments, compiles once per signature
    (tensor metadata, which inputs require grad, grad mode), and runs the compiled graphs.

    `saved_bytes` counts the bytes of the tensors saved for backward by each training call.
    """

    def __init__(self, fn: Callable[..., Any], fw_compiler: Compiler,
                 bw_compiler: Compiler | None = None,
                 partition_fn: PartitionFnLike | None = None,
                 decompositions: str | Mapping[Any, Callable[..., Any]] | None = None,
                 options: Mapping[str, object] | None = None,
                 ) -> None:
        self.fn = fn
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.partition_fn = partition_fn
        self.decompositions = decompositions
        #: aotgrad option values (`aotgrad.config` names) in effect while this compiles.
        self.options = dict(options or {})
        _config.replace(self.options)  # checks names and types now
        self._preparing = False
        self.saved_bytes = SavedBytesCounter()
        self.cache: dict[tuple[Any, ...], tuple[Runner, Any, bool]] = {}
        # NOTE: the hot path: flat-argument calls map straight to a runner, its tensor
        # positions (None: all arguments) and whether input storages must be checked.
        self.fast_cache: dict[tuple[Any, ...], FastEntry] = {}
        self._plain_fn = not isinstance(fn, types.FunctionType) or not fn.__closure__
        self._state_key: Callable[[], Any] | None = getattr(fn, "state_key", None)
        self._signature: tuple[Any, ...] | None = None  # of a captured graph, for the cache
        #: Set by the backend for a captured graph with symbolic sizes (`aotgrad.dynamic`).
        self.symbolic: SymbolicSignature | None = None
        # NOTE: the grad modes a captured graph switches to, in order (`LiftedModule`): the
        # graph starts in the caller's grad mode and leaves the last one set.
        self._grad_switches: tuple[bool, ...] = getattr(fn, "grad_switches", ())
        #: Inputs whose metadata the caller guards before every call (`GuardedInputs`).
        self._guarded: GuardedInputs | None = getattr(fn, "guarded", None)

    def _key(self, leaves: Sequence[Any], training: bool, structure: Any) -> tuple[Any, ...]:
        parts: list[Any] = [training, structure]
        if self._grad_switches:
            parts.append(torch.is_grad_enabled())
        state_key = getattr(self.fn, "state_key", None)
        if state_key is not None:
            parts.append(state_key())
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                parts.append(_tensor_key(leaf, training))
            elif isinstance(leaf, float):
                parts.append((float, repr(leaf)))  # NOTE: tells -0.0 from 0.0
            else:
                parts.append((type(leaf), _hashable(leaf)))
        return tuple(parts)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._grad_switches:
            result = self._call(args, kwargs)
            # NOTE: the graph's `torch.set_grad_enabled(...)` calls are not ATen ops: the
            # compiled graphs do not make them; the mode the program leaves is set here.
            torch._C._set_grad_enabled(self._grad_switches[-1])
            return result
        return self._call(args, kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        key = self._fast_key(args) if not kwargs and self._plain_fn else None
        if key is not None:
            entry = self.fast_cache.get(key)
            if entry is not None:
                runner, positions, check_overlap, out_spec, flat_output = entry
                tensors = args if positions is None else [args[i] for i in positions]
                if not check_overlap or not _storages_overlap(tensors):
                    outs = runner(tensors)
                    if flat_output:
                        return tuple(outs)
                    return _output(outs, out_spec)
        return self._call_slow(args, kwargs, key)

    def prepare(self, *args: Any) -> None:
        """Compile for the call signature of `args` now, without running anything, so that
        a compile error surfaces here (capture's backend call), not on the first call."""
        self._preparing = True
        try:
            self._call_slow(args, {}, None)
        finally:
            self._preparing = False

    def _fast_key(self, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """A key for flat positional tensors and numbers (the backend's calls), else None.

        NOTE: finer than `_key` (raw requires_grad flags and grad mode), and cheap: it maps to
        an entry of `cache` found by the full lookup on its first use.
        """
        tensor = torch.Tensor
        guarded = self._guarded
        try:
            if guarded is not None and len(args) == guarded.size:
                # NOTE: capture's guards checked the other facts of these inputs just now.
                checked: list[Any] = [args[i] for i in guarded.full]
                parts = [(type(a), a.dtype, a.device, a.shape, a.stride(), a.storage_offset(),
                          a.requires_grad, a.is_leaf) if isinstance(a, tensor) else
                         (((float, repr(a)) if type(a) is float else (type(a), a))
                          if type(a) in _FLAT_LEAF_TYPES else _NOT_FLAT)
                         for a in checked]
                parts.append(tuple([args[i].storage_offset() for i in guarded.offset]))
                parts.append(tuple([args[i].is_leaf for i in guarded.leaf]))
                parts.append(tuple([args[i].stride() for i in guarded.strides]))
            else:
                parts = [(type(a), a.dtype, a.device, a.shape, a.stride(), a.storage_offset(),
                          a.requires_grad, a.is_leaf) if isinstance(a, tensor) else
                         (((float, repr(a)) if type(a) is float else (type(a), a))
                          if type(a) in _FLAT_LEAF_TYPES else _NOT_FLAT)
                         for a in args]
        except TypeError:  # an unhashable value in a tensor subclass' metadata
            return None
        if _NOT_FLAT in parts:
            return None
        state_key = self._state_key
        return (torch.is_grad_enabled(), state_key() if state_key is not None else None,
                *parts)

    def _call_slow(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                   fast_key: tuple[Any, ...] | None) -> Any:
        closure = _closure_values(self.fn)
        if not kwargs and not closure and all(type(a) in _FLAT_LEAF_TYPES or
                                              isinstance(a, torch.Tensor) for a in args):
            # NOTE: flat positional tensors and numbers.
            leaves: list[Any] = list(args)
            structure: Any = len(args)
        else:
            leaves, in_spec = tree_flatten((args, kwargs, closure))
            structure = repr(in_spec)
        tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
        # NOTE: a graph that turns grad mode on itself trains under the caller's no_grad.
        training = (torch.is_grad_enabled() or True in self._grad_switches) and any(
            t.requires_grad for t in tensors)
        key = self._key(leaves, training, structure)
        entry = self.cache.get(key)
        if entry is None and self.symbolic is not None:
            entry = self._symbolic_entry(args, key, leaves, training)
        if entry is None:
            leaves, in_spec = tree_flatten((args, kwargs, closure))
            with _config.patch(self.options) if self.options else contextlib.nullcontext():
                entry = self._compile(leaves, in_spec, training, key)
            self.cache[key] = entry
        if self._preparing:
            return None
        runner, out_spec, flat_output = entry
        check_overlap = bool(runner.forward.mutated_inputs)
        inputs: Sequence[Any] = tensors
        if runner.leaf_inputs is not None:
            # NOTE: graphs traced with symbolic int arguments take them as inputs too; such
            # an entry serves flat positional calls only (`SymbolicSignature.key`).
            inputs = [args[i] for i in runner.leaf_inputs]
        if fast_key is not None:
            positions = runner.leaf_inputs if runner.leaf_inputs is not None else (
                None if len(tensors) == len(args) else [
                    i for i, a in enumerate(args) if isinstance(a, torch.Tensor)])
            self.fast_cache[fast_key] = (runner, positions, check_overlap, out_spec, flat_output)
        if check_overlap and _storages_overlap(tensors):
            # NOTE: the graphs assume distinct input storages; a write through one of two
            # aliased inputs must show in the other, as only eager gets right.
            return self.fn(*args, **kwargs)
        outs = runner(inputs)
        if flat_output:
            return tuple(outs)
        return _output(outs, out_spec)

    def _symbolic_entry(self, args: tuple[Any, ...], key: tuple[Any, ...], leaves: list[Any],
                        training: bool) -> tuple[Runner, Any, bool] | None:
        """The runner traced for symbolic sizes that serves this call (traced now when the
        backend prepares it, `aotgrad.dynamic`), or None."""
        assert self.symbolic is not None
        symbolic_key = self.symbolic.key(key, leaves)
        if symbolic_key is None:
            return None
        entry = self.cache.get(symbolic_key)
        if entry is not None or not self._preparing:
            return entry
        _, in_spec = tree_flatten((args, {}, ()))
        inputs = self.symbolic.inputs(leaves)
        try:
            with _config.patch(self.options) if self.options else contextlib.nullcontext():
                runner, out_spec = self._compile_runner(self.symbolic.fakes(leaves), in_spec,
                                                        training, inputs)
        except Exception as error:  # noqa: BLE001  # concrete sizes then, as before
            log.info("aotgrad: tracing with symbolic sizes failed (%s: %s); compiling for "
                     "the concrete sizes of each call", type(error).__name__, error)
            self.symbolic = None
            return None
        if self.symbolic.ints:
            runner.leaf_inputs = inputs
        flat_output = out_spec.type is tuple and all(c.is_leaf() for c in out_spec.children())
        entry = (runner, out_spec, flat_output)
        self.cache[symbolic_key] = entry
        return entry

    def _compile(self, leaves: list[Any], in_spec: Any, training: bool, key: tuple[Any, ...],
                 ) -> tuple[Runner, Any, bool]:
        shared_key = self._shared_key(leaves, training, key)
        if shared_key is not None:
            hit = _cache.lookup(shared_key)
            if hit is None:
                hit = _disk_lookup(shared_key, self, self._flat_fn(leaves, in_spec))
            if hit is not None:
                runner, out_spec, flat_output = hit
                if isinstance(runner, TrainingRunner):
                    runner = runner.rebind(self.saved_bytes)
                return runner, out_spec, flat_output
        runner, out_spec = self._compile_runner(leaves, in_spec, training)
        flat_output = out_spec.type is tuple and all(c.is_leaf() for c in out_spec.children())
        if shared_key is not None:
            _cache.store(shared_key, (runner, out_spec, flat_output))
            _disk_store(shared_key, self, (runner, out_spec, flat_output))
        return runner, out_spec, flat_output

    def _shared_key(self, leaves: list[Any], training: bool,
                    key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The key of the shared compiled-graph cache (`aotgrad.cache`), or None when the
        function or a compile setting cannot be described soundly."""
        if not _config.options.graph_cache:
            return None
        try:
            if self._signature is None:
                self._signature = self._graph_signature()
            tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
            storages = [t.untyped_storage().data_ptr() for t in tensors]
            aliasing = tuple(storages.index(p) for p in storages)
            return (self._signature, key, aliasing, training, _cache.context_key(),
                    _cache.compiler_key(self.fw_compiler),
                    _cache.compiler_key(self.bw_compiler) if training else None,
                    _cache.partitioner_key(self.partition_fn),
                    _cache.decompositions_key(self.decompositions))
        except _cache.Uncacheable:
            _cache.note_uncacheable()
            return None

    def _graph_signature(self) -> tuple[Any, ...]:
        fn = self.fn
        if not isinstance(fn, LiftedModule) or not isinstance(fn.module, fx.GraphModule):
            raise _cache.Uncacheable("only captured graphs (GraphModules) are cached")
        inputs = dict(zip(fn.swap_names, fn.swap_inputs))
        return _cache.graph_signature(fn.module, inputs)

    def _flat_fn(self, leaves: list[Any], in_spec: Any,
                 inputs: list[int] | None = None) -> Callable[..., Any]:
        """The function of the tensor leaves (or of the leaves at the positions `inputs`:
        tensors and symbolic ints) that the compiled graphs compute."""
        positions = inputs if inputs is not None else [
            i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        constants = list(leaves)
        fn = self.fn

        def flat_fn(*tensors: Any) -> Any:
            values = list(constants)
            for position, tensor in zip(positions, tensors):
                values[position] = tensor
            args, kwargs, cells = tree_unflatten(values, in_spec)
            return _with_closure(fn, cells)(*args, **kwargs)

        flat_fn.run_traced = (  # type: ignore[attr-defined]
            _traced_caller(fn, positions, constants, in_spec))
        return flat_fn

    def _compile_runner(self, leaves: list[Any], in_spec: Any, training: bool,
                        inputs: list[int] | None = None) -> tuple[Runner, Any]:
        flat_fn = self._flat_fn(leaves, in_spec, inputs)
        tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)] if (
            inputs is None) else [leaves[i] for i in inputs]
        decomps = self.decompositions
        if decomps is None:
            decomps = _config.options.decompositions
        if training:
            return compile_training(flat_fn, tensors, self.fw_compiler, self.bw_compiler,
                                    self.partition_fn, decomps, self.saved_bytes,
                                    entry_grad_mode=torch.is_grad_enabled())
        return compile_inference(flat_fn, tensors, self.fw_compiler, decomps)


def _disk_lookup(shared_key: tuple[Any, ...], compiled: AotCompiled,
                 flat_fn: Callable[..., Any]) -> tuple[Runner, Any, bool] | None:
    """The entry of `shared_key` on disk (`aotgrad.disk`), kept in the in-process cache."""
    store = _cache.disk_store()
    if store is None or not _config.options.disk_cache:
        return None
    try:
        key = _disk.disk_key(shared_key, (compiled.fw_compiler, compiled.bw_compiler))
    except _cache.Uncacheable as exc:
        _cache.stats().disk_uncacheable += 1
        _disk.log.debug("compiled graph not cacheable on disk: %s", exc)
        return None
    data = store.get(key)
    if data is None:
        _cache.stats().disk_misses += 1
        return None
    try:
        entry = _disk.load_entry(data, flat_fn, compiled.saved_bytes, compiled.fw_compiler,
                                 compiled.bw_compiler)
    except Exception as exc:  # noqa: BLE001 - an entry that cannot be used is a miss
        _cache.stats().disk_errors += 1
        store.discard(key, f"cannot be loaded ({type(exc).__name__}: {exc})")
        return None
    _cache.stats().disk_hits += 1
    _cache.store(shared_key, entry)
    return entry


def _disk_store(shared_key: tuple[Any, ...], compiled: AotCompiled,
                entry: tuple[Runner, Any, bool]) -> None:
    """Write a fresh compile to disk, if a store is installed and the entry can be."""
    store = _cache.disk_store()
    if store is None or not _config.options.disk_cache:
        return
    try:
        key = _disk.disk_key(shared_key, (compiled.fw_compiler, compiled.bw_compiler))
        data = _disk.save_entry(entry, compiled.fw_compiler, compiled.bw_compiler)
    except _cache.Uncacheable as exc:
        _cache.stats().disk_uncacheable += 1
        _disk.log.debug("compiled graph not written to disk: %s", exc)
        return
    except Exception as exc:  # noqa: BLE001 - writing the cache must never fail a compile
        # NOTE: e.g. the backward's compile (done here, ahead of its first use) failing:
        # it fails again, where it did before, when the backward runs
        _cache.stats().disk_uncacheable += 1
        _disk.log.warning("compiled graph not written to disk: %s: %s", type(exc).__name__,
                          exc)
        return
    store.put(key, data)
    _cache.stats().disk_stores += 1


def _traced_caller(fn: Callable[..., Any], positions: list[int], constants: list[Any],
                   in_spec: Any) -> Callable[[Sequence[Any], AtenTracer], Any]:
    def run_traced(tensors: Sequence[Any], tracer: AtenTracer) -> Any:
        values = list(constants)
        for position, tensor in zip(positions, tensors):
            values[position] = tensor
        args, kwargs, cells = tree_unflatten(values, in_spec)
        if kwargs or cells:
            return _with_closure(fn, cells)(*args, **kwargs)
        return run_with_meta(fn, args, tracer)

    return run_traced


def aot_function(fn: Callable[..., Any], fw_compiler: Compiler,
                 bw_compiler: Compiler | None = None,
                 partition_fn: PartitionFnLike | None = None,
                 decompositions: str | Mapping[Any, Callable[..., Any]] | None = None,
                 ) -> AotCompiled:
    """Compile `fn` ahead of autograd: trace to ATen, functionalize, build the joint graph
    when an input requires grad, partition it and compile both halves.

    `partition_fn` is a partitioner name ("default", "min_cut", "memory_budget") or a
    function `partition(joint, *, num_fwd_outputs, config) -> (fw, bw)`; default: the config's.
    `decompositions` is "core", "none" or a table {OpOverload: fn}; default: the config's.
    """
    return AotCompiled(fn, fw_compiler, bw_compiler, partition_fn, decompositions)


# --------------------------------------------------------------------------- modules


@contextlib.contextmanager
def _swapped(module: torch.nn.Module, names: Sequence[str],
             values: Sequence[Any]) -> Iterator[None]:
    """Temporarily replace the named parameters/buffers of `module` by `values`."""
    saved: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for name, value in zip(names, values):
            owner_path, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_path) if owner_path else module
            table = owner._parameters if attr in owner._parameters else owner._buffers
            saved.append((table, attr, table[attr]))
            table[attr] = value
        yield
    finally:
        for table, attr, old in reversed(saved):
            table[attr] = old


def _grad_switches(module: torch.nn.Module) -> tuple[bool, ...]:
    """The grad modes a captured graph sets (`torch._C._set_grad_enabled` nodes), in order."""
    if not isinstance(module, fx.GraphModule):
        return ()
    return tuple(bool(n.args[0]) for n in module.graph.nodes
                 if n.op == "call_function" and n.target is torch._C._set_grad_enabled)


class LiftedModule:
    """`module` as a function of its parameters and buffers: `(*params, *buffers, *args)`."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.param_names = [n for n, _ in module.named_parameters()]
        self.buffer_names = [n for n, _ in module.named_buffers()]
        self.names = self.param_names + self.buffer_names
        params = set(self.param_names)
        # NOTE: `state` walks `_modules` along these paths (as `named_parameters` does) rather
        # than enumerating every member on each call.
        self._paths = [(tuple(n.split(".")[:-1]), n.rpartition(".")[2], n in params)
                       for n in self.names]
        # NOTE: a tensor registered under several names (tied weights) is one input; every
        # name it is registered under is swapped for that input while tracing.
        index = {id(t): i for i, t in enumerate(self.state())}
        everything = [*module.named_parameters(remove_duplicate=False),
                      *module.named_buffers(remove_duplicate=False)]
        self.swap_names = [n for n, _ in everything]
        self.swap_inputs = [index[id(t)] for _, t in everything]
        self.grad_switches = _grad_switches(module)
        #: Inputs whose metadata the caller guards (`GuardedInputs`), or None.
        self.guarded = GuardedInputs.of(module, len(self.names))

    def state_key(self) -> tuple[bool, ...]:
        """The modules' train/eval flags: a traced graph depends on them."""
        # NOTE: a flat walk of `_modules` (every call reads the tree as it is now); cheaper
        # than `modules()`'s recursive generators on the hot path.
        module = self.module
        if not module._modules:
            return (module.training,)
        flags: list[bool] = []
        stack: list[torch.nn.Module | None] = [module]
        while stack:
            current = stack.pop()
            if current is not None:
                flags.append(current.training)
                stack.extend(current._modules.values())
        return tuple(flags)

    def state(self) -> list[torch.Tensor]:
        """The parameters and buffers, read anew (they may have been reassigned)."""
        if not self.names:
            return []
        result: list[torch.Tensor] = []
        for path, attr, is_param in self._paths:
            owner = self.module
            for part in path:
                owner = owner._modules[part]  # type: ignore[assignment]  # a module
            table = owner._parameters if is_param else owner._buffers
            result.append(table[attr])  # type: ignore[arg-type]  # named members: not None
        return result

    def _swap(self, args: Sequence[Any]) -> contextlib.AbstractContextManager[None]:
        return _swapped(self.module, self.swap_names, [args[i] for i in self.swap_inputs])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._swap(args):
            return self.module(*args[len(self.names):], **kwargs)

    def run_traced(self, args: Sequence[Any], tracer: AtenTracer) -> Any:
        with self._swap(args):
            return run_with_meta(self.module, list(args[len(self.names):]), tracer)


class AotModule(torch.nn.Module):
    """An `nn.Module` whose forward runs a compiled `LiftedModule`."""

    def __init__(self, module: torch.nn.Module, compiled: AotCompiled,
                 lifted: LiftedModule) -> None:
        super().__init__()
        self.orig_module = module
        self._compiled = compiled
        self._lifted = lifted

    @property
    def saved_bytes(self) -> SavedBytesCounter:
        return self._compiled.saved_bytes

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*self._lifted.state(), *args, **kwargs)


def aot_module(module: torch.nn.Module, fw_compiler: Compiler,
               bw_compiler: Compiler | None = None,
               partition_fn: PartitionFnLike | None = None,
               decompositions: str | Mapping[Any, Callable[..., Any]] | None = None,
               ) -> AotModule:
    """`aot_function` for a module: its parameters and buffers become graph inputs (so they
    get gradients, and buffer updates such as BatchNorm running stats are written back)."""
    lifted = LiftedModule(module)
    compiled = AotCompiled(lifted, fw_compiler, bw_compiler, partition_fn, decompositions)
    return AotModule(module, compiled, lifted)
