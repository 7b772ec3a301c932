"""The in-process cache of compiled graphs, shared by every `AotCompiled`.

A captured graph compiled again (after `capture.reset()` / `compiler.reset()`, or the same
program captured by another wrapper) skips tracing, functionalization, the joint graph and
partitioning: the compiled runner of the first compile is reused (a training runner is
rebound to the new caller's saved-bytes counter).

The key is a sound description of everything the compile reads:
- the torch-level `fx.GraphModule`, node by node (op, target, arguments with nodes as
  positions, Python constants by type and `repr`, the checkpointed region it belongs to);
  targets must be torch's or Python's own callables (ops, builtins, functions defined in
  `torch`), held in the key itself so they compare by identity; a tensor attribute (not
  a parameter or buffer) by its metadata and a hash of its bytes; a graph with
  `call_module` nodes, other attributes or user-defined callables is not cached;
- the call signature (`AotCompiled._key`: tensor metadata, requires_grad when training, grad
  mode, module train flags, Python constants);
- both ATen-graph compilers (only those with a `cache_key()` method: the key includes what it
  returns, e.g. inductor's options) and the partitioner (a name) and the decomposition table
  (its items);
- aotgrad's options, torch's version, the default dtype, autocast and deterministic modes.

Only plain `fx.GraphModule`s are cached: a Python function or module may read any state.

A package with a disk cache installs a `DiskStore` (`set_disk_store`): a compile this cache
misses is then looked up on disk, and what is compiled is written there (`aotgrad.disk` owns
the format and the on-disk key).
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch
from torch import fx

from aotgrad import config as _config

__all__ = ["CacheStats", "DiskStore", "clear", "compiler_key", "context_key", "disk_store",
           "graph_signature", "lookup", "set_disk_store", "stats", "store"]

MAX_ENTRIES = 512


class Uncacheable(Exception):
    """The graph (or compile setting) has a part the key cannot describe soundly."""


class CacheStats:
    """Hits, misses and stores since the last `clear()`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Every counter back to 0."""
        self.hits = 0
        self.misses = 0
        self.uncacheable = 0
        #: On disk (`set_disk_store`): entries read back, not found, written, and entries
        #: that were found but could not be used (discarded) or not written (why: `log`).
        self.disk_hits = 0
        self.disk_misses = 0
        self.disk_stores = 0
        self.disk_errors = 0
        self.disk_uncacheable = 0

    def __repr__(self) -> str:
        return (f"CacheStats(hits={self.hits}, misses={self.misses}, "
                f"uncacheable={self.uncacheable}, disk_hits={self.disk_hits}, "
                f"disk_misses={self.disk_misses}, disk_stores={self.disk_stores}, "
                f"disk_errors={self.disk_errors}, disk_uncacheable={self.disk_uncacheable})")


class DiskStore(Protocol):
    """Where compiled entries persist: bytes under a text key (a sha256 hex digest)."""

    def get(self, key: str) -> bytes | None:
        """The verified bytes stored under `key`, or None."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` (errors are the store's to handle: never raise)."""

    def discard(self, key: str, reason: str) -> None:
        """Remove the entry under `key`: it could not be used (`reason`)."""


_disk: list[DiskStore] = []


def set_disk_store(store: DiskStore | None) -> None:
    """Install `store` as the on-disk layer of this cache (None: no disk layer)."""
    _disk.clear()
    if store is not None:
        _disk.append(store)


def disk_store() -> DiskStore | None:
    """The installed on-disk layer, if any."""
    return _disk[0] if _disk else None


_entries: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_stats = CacheStats()


def clear() -> None:
    """Drop every cached compile (and reset the statistics)."""
    _entries.clear()
    _stats.reset()


def stats() -> CacheStats:
    """The cache's hit/miss counters."""
    return _stats


def lookup(key: Any) -> Any | None:
    """The cached value under `key`, or None (counted as a hit or a miss)."""
    value = _entries.get(key)
    if value is None:
        _stats.misses += 1
        return None
    _entries.move_to_end(key)
    _stats.hits += 1
    return value


def store(key: Any, value: Any) -> None:
    """Remember `value` under `key` (the least recently used entries go past MAX_ENTRIES)."""
    _entries[key] = value
    _entries.move_to_end(key)
    while len(_entries) > MAX_ENTRIES:
        _entries.popitem(last=False)


def note_uncacheable() -> None:
    _stats.uncacheable += 1


# --------------------------------------------------------------------------- keys


def _trusted_module(name: str | None) -> bool:
    return name is not None and (name == "torch" or name.startswith("torch.") or
                                 name in ("operator", "math", "builtins", "_operator"))


_members: dict[Any, bool] = {}


def _library_member(target: Any) -> bool:
    """Whether `target` is an attribute of a torch / operator / math / builtins module."""
    known = _members.get(target)
    if known is not None:
        return known
    name = getattr(target, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) and _trusted_module(name) else None
    if module is None:
        return False
    value: Any = module
    for part in str(getattr(target, "__qualname__", "")).split("."):
        value = getattr(value, part, None)
    found = value is target or any(v is target for v in vars(module).values())
    _members[target] = found  # NOTE: only objects that claim a library module are kept
    return found


def _target(target: Any) -> Any:
    """A target callable held as itself (compared by identity), if torch's or Python's own."""
    if isinstance(target, str):
        return target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return target
    if isinstance(target, types.BuiltinFunctionType):
        # NOTE: C functions of torch's or Python's modules (torch._C._nn.linear, operator.add,
        # math.sqrt); not methods bound to an object (a tensor's, a list's), whose state may
        # change, nor other extensions' functions.
        owner = getattr(target, "__self__", None)
        if owner is None or (isinstance(owner, types.ModuleType) and
                             _trusted_module(owner.__name__)):
            return target
        raise Uncacheable(f"target {target!r} is not a function of torch's or Python's modules")
    # NOTE: library code (torch.nn.functional.*, torch.Size), found in its module: a user's
    # function (one made with functools.wraps of a torch function too) may read state that
    # changes between compiles.
    if isinstance(target, (types.FunctionType, type)) and _library_member(target):
        return target
    raise Uncacheable(f"target {target!r} is not one of torch's or Python's own callables")


def tensor_value_key(t: torch.Tensor) -> tuple[Any, ...]:
    """Metadata and a hash of the bytes of a (dense) constant tensor."""
    if t.is_sparse or t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        raise Uncacheable("a non-dense tensor constant")
    data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    # NOTE: read through ctypes, not `.numpy()`: numpy is not a dependency of aotgrad.
    raw = ctypes.string_at(data.data_ptr(), data.numel()) if data.numel() else b""
    digest = hashlib.sha256(raw).hexdigest()
    return ("tensor", t.dtype, str(t.device), tuple(t.shape), t.stride(), t.storage_offset(),
            t.requires_grad, type(t), digest)


def _value(value: Any, index: Mapping[fx.Node, int]) -> Any:
    if isinstance(value, fx.Node):
        return ("node", index[value])
    kind = type(value)
    if value is None or kind in (bool, int, str, bytes):
        return (kind, value)
    if kind in (float, complex):
        return (kind, repr(value))  # NOTE: tells -0.0 from 0.0; nan equals nan
    if value is Ellipsis:
        return ("...",)
    if isinstance(value, (tuple, list)):  # torch.Size, fx's immutable_list too
        return (kind.__name__, tuple(_value(v, index) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _value(v, index)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", _value(value.start, index), _value(value.stop, index),
                _value(value.step, index))
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return (kind, str(value))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, torch.Tensor):
        return tensor_value_key(value)
    return ("target", _target(value))


def graph_signature(gm: fx.GraphModule, inputs: Mapping[str, int]) -> tuple[Any, ...]:
    """A key describing everything tracing `gm` reads; raises `Uncacheable`.

    `inputs` maps the names of parameters and buffers that are lifted to inputs (their
    values are call arguments, described by the call signature) to their input position.
    """
    # NOTE: every GraphModule instance has its own class (named as its `class_name`) below
    # the class it was made from, which must be GraphModule itself.
    base = next((c for c in type(gm).__mro__
                 if c.__qualname__.split(".")[-1] != "GraphModuleImpl"), None)
    if base is not fx.GraphModule:
        raise Uncacheable(f"a {type(gm).__name__}, not a plain GraphModule")
    index: dict[fx.Node, int] = {}
    regions: dict[object, int] = {}
    parts: list[Any] = [type(gm.graph._codegen)]
    for position, node in enumerate(gm.graph.nodes):
        index[node] = position
        if node.op == "call_module":
            raise Uncacheable("a call_module node")
        if node.op == "get_attr":
            name = str(node.target)
            if name in inputs:
                target: Any = ("input", inputs[name])
            else:
                value = _fetch(gm, name)
                if not isinstance(value, torch.Tensor):
                    raise Uncacheable(f"attribute {name} is not a tensor")
                target = tensor_value_key(value)
        elif node.op in ("call_function", "call_method"):
            target = _target(node.target)
        else:  # placeholder, output
            target = str(node.target) if node.op == "placeholder" else None
        parts.append((node.op, target, _value(node.args, index), _value(node.kwargs, index),
                      _region(node, regions)))
    return tuple(parts)


def _region(node: fx.Node, regions: dict[object, int]) -> int | None:
    """The node's checkpointed region (`meta["checkpoint"]`), numbered in order of first
    appearance: the partitioners recompute a region's values instead of saving them."""
    region = node.meta.get("checkpoint")
    if region is None:
        return None
    return regions.setdefault(region, len(regions))


def _fetch(gm: fx.GraphModule, name: str) -> Any:
    value: Any = gm
    for part in name.split("."):
        value = getattr(value, part)
    return value


def compiler_key(compiler: Callable[..., Any]) -> tuple[Any, ...]:
    """The compiler itself and what its `cache_key()` says now; raises `Uncacheable` for a
    compiler without one (it may keep state between compiles)."""
    key_fn = getattr(compiler, "cache_key", None)
    if key_fn is None:
        raise Uncacheable("an ATen-graph compiler without cache_key()")
    return (compiler, key_fn())


def decompositions_key(decompositions: Any) -> Any:
    if decompositions is None or isinstance(decompositions, str):
        return decompositions
    if callable(getattr(decompositions, "cache_key", None)):
        # NOTE: a named table (inductor's) is described without building it.
        return (type(decompositions), decompositions.cache_key())
    return tuple(decompositions.items())


def partitioner_key(partition_fn: Any) -> Any:
    if partition_fn is None or isinstance(partition_fn, str):
        return partition_fn
    raise Uncacheable("a partitioner function")


def context_key() -> tuple[Any, ...]:
    """The global state a trace reads: torch's version, default dtype, autocast,
    deterministic and inference modes, aotgrad's options."""
    autocast: list[tuple[bool, torch.dtype] | None] = []
    for device in ("cpu", "cuda"):
        try:
            autocast.append((torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)))
        except (RuntimeError, TypeError, AttributeError):
            autocast.append(None)
    return (torch.__version__, torch.get_default_dtype(), tuple(autocast),
            torch.are_deterministic_algorithms_enabled(), torch.is_inference_mode_enabled(),
            _config.options)
