"""Serialisable forms of what aotgrad compiles, for the on-disk cache of compiled graphs.

- `dumps` / `loads`: pickle, with ATen ops (which do not pickle) held by their names and
  modules by their import names; symbolic values and fake tensors refuse (`Uncacheable`).
- `GraphCode`: an FX graph as its generated Python code, the globals that code reads and the
  tensors its `get_attr` nodes fetch: loading it is one `exec`, no FX graph is rebuilt.
- `stable_text`: a deterministic text of an in-process cache key (`aotgrad.cache`), where
  ops, functions and classes are named instead of compared by identity; `Uncacheable` for
  a part without a stable name (a lambda, a local function, an object without `cache_key`).
- `environment`: what a compiled artifact depends on besides its key: Python, torch, the
  machine and CPU features, and a hash of the source of aotgrad and of the packages whose
  compilers made it (`package_of(compiler)`: inductor's for the inductor backend).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import io
import pickle
import platform
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import fx

from aotgrad.cache import Uncacheable

__all__ = ["GraphCode", "add_source_package", "device_text", "dumps", "environment", "loads",
           "package_of", "stable_text"]

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _op(namespace: str, name: str, overload: str) -> Any:
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _packet(namespace: str, name: str) -> Any:
    return getattr(getattr(torch.ops, namespace), name)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch._ops.OpOverload):
            return _op, (obj.namespace, obj._opname, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, _, name = obj._qualified_op_name.partition("::")
            return _packet, (namespace, name)
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, _SYMBOLIC):
            raise Uncacheable(f"a symbolic value ({obj})")
        if isinstance(obj, torch._subclasses.fake_tensor.FakeTensor):
            raise Uncacheable("a fake tensor")
        if isinstance(obj, type):
            return _by_alias(obj)
        if isinstance(obj, types.FunctionType) and "<" in obj.__qualname__:
            held = _held_as(obj)
            return NotImplemented if held is None else (_module_attr, held)
        return NotImplemented


def _module_attr(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _held_as(fn: Any) -> tuple[str, str] | None:
    """(module, name) when a function made inside another (its qualified name has
    `<locals>`) is its module's attribute under its own `__name__`: torch's
    `F.max_pool2d` is `boolean_dispatch.<locals>.fn` renamed. Else None."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if not (isinstance(module, str) and isinstance(name, str)):
        return None
    owner = sys.modules.get(module)
    if owner is None or getattr(owner, name, None) is not fn:
        return None
    return module, name


def _by_alias(cls: type) -> Any:
    """A class its module holds under another name than its own (`ErrorSlots = c_int64 * 2`):
    pickled as that module attribute; NotImplemented for the others (pickled by name)."""
    module = sys.modules.get(cls.__module__)
    if module is None or getattr(module, cls.__qualname__, None) is cls:
        return NotImplemented
    for name, value in vars(module).items():
        if value is cls:
            return _module_attr, (cls.__module__, name)
    return NotImplemented


def dumps(value: Any) -> bytes:
    """`value` pickled (ops by name); `Uncacheable` if a part cannot be."""
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Uncacheable:
        raise
    except Exception as exc:  # NOTE: any pickling failure: not cacheable on disk
        raise Uncacheable(f"not serialisable: {type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """The value `dumps` wrote (raises whatever unpickling raises)."""
    # NOTE: entries are our own, verified by their hash before this; torch's pytree specs
    # warn about a deprecated class while they are rebuilt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pickle.loads(data)


# --------------------------------------------------------------------------- graphs as code


@dataclasses.dataclass
class GraphCode:
    """An FX graph as code: `load()` gives a function of the graph's inputs."""

    source: str
    globals: dict[str, Any]
    attributes: dict[str, Any]

    @classmethod
    def of(cls, gm: fx.GraphModule) -> GraphCode:
        """The code of `gm`; `Uncacheable` for a graph that calls submodules or reads
        attributes other than tensors."""
        attributes: dict[str, Any] = {}
        for node in gm.graph.nodes:
            if node.op == "call_module":
                raise Uncacheable("a call_module node")
            if node.op == "get_attr":
                value: Any = gm
                for part in str(node.target).split("."):
                    value = getattr(value, part)
                if not isinstance(value, torch.Tensor):
                    raise Uncacheable(f"attribute {node.target} is not a tensor")
                attributes[str(node.target)] = value
        code = gm.graph.python_code(root_module="self")
        names = {k: v for k, v in code.globals.items() if k != "__builtins__"}
        return cls(code.src, names, attributes)

    def load(self) -> Callable[..., Any]:
        """The graph's `forward`, bound to an object holding its attributes."""
        namespace = dict(self.globals)
        exec(compile(self.source, "<cached fx graph>", "exec"), namespace)  # noqa: S102
        owner = _Attributes()
        for name, value in self.attributes.items():
            target: Any = owner
            *path, last = name.split(".")
            for part in path:
                if not hasattr(target, part):
                    setattr(target, part, _Attributes())
                target = getattr(target, part)
            setattr(target, last, value)
        return functools.partial(namespace["forward"], owner)


class _Attributes:
    """The `self` of a loaded graph's code: its `get_attr` tensors as attributes."""


# --------------------------------------------------------------------------- stable key text


def _name(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(obj, types.BuiltinFunctionType):
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, types.ModuleType):
            module = owner.__name__
        elif isinstance(owner, type):
            module = f"{owner.__module__}.{owner.__qualname__}"
        qualname = obj.__name__
    if qualname and "<" in qualname and (held := _held_as(obj)) is not None:
        module, qualname = held
    if not module or not qualname or "<" in qualname:
        raise Uncacheable(f"{obj!r} has no stable name")
    return f"{module}.{qualname}"


def stable_text(value: Any) -> str:
    """A deterministic text of a cache key made of plain values, ops, functions, classes,
    dataclasses and objects with a `cache_key()` method."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, out: list[str]) -> None:
    kind = type(value)
    if value is None or isinstance(value, (bool, int, str, bytes, float, complex)):
        out.append(f"{kind.__name__}:{value!r};")  # NOTE: torch.__version__ is a str
    elif isinstance(value, (tuple, list)):
        out.append(f"{kind.__name__}(")
        for item in value:
            _write(item, out)
        out.append(")")
    elif isinstance(value, dict):
        out.append("dict(")
        for k, v in value.items():
            _write(k, out)
            _write(v, out)
        out.append(")")
    elif isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        out.append(f"{kind.__name__}:{value};")
    elif isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        out.append(f"op:{value};")
    elif isinstance(value, _SYMBOLIC):
        raise Uncacheable(f"a symbolic value ({value})")
    elif isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        out.append(f"callable:{_name(value)};")
    elif isinstance(value, slice):
        _write(("slice", value.start, value.stop, value.step), out)
    elif value is Ellipsis:
        out.append("...;")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"dataclass:{_name(kind)}(")
        for f in dataclasses.fields(value):
            _write(f.name, out)
            _write(getattr(value, f.name), out)
        out.append(")")
    elif callable(getattr(value, "cache_key", None)):
        # NOTE: a compiler or a decomposition table: its class names what it is, its
        # `cache_key()` what it does now (written beside it in the key as well).
        out.append(f"object:{_name(kind)}(")
        _write(value.cache_key(), out)
        out.append(")")
    else:
        raise Uncacheable(f"a {kind.__name__} in the key has no stable text")


# --------------------------------------------------------------------------- environment

_source_packages: dict[str, Path] = {}


def add_source_package(module: types.ModuleType) -> None:
    """Let `environment(packages=[name])` find package `module`'s source (a package whose
    code generates what the disk cache keeps registers itself)."""
    path = getattr(module, "__file__", None)
    if path:
        _source_packages[module.__name__] = Path(path).parent


@functools.cache
def _source_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        try:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:16]


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.partition(":")[2].split()))
    except OSError:
        pass
    return ""


@functools.cache
def _base_environment() -> tuple[tuple[str, str], ...]:
    return (("python", sys.version), ("torch", torch.__version__),
            ("torch_git", str(getattr(torch.version, "git_version", ""))),
            ("machine", f"{platform.system()} {platform.machine()}"),
            ("cpu", hashlib.sha256(_cpu_flags().encode()).hexdigest()[:16]))


def _package_root(name: str) -> Path | None:
    if name in _source_packages:
        return _source_packages[name]
    path = getattr(sys.modules.get(name), "__file__", None)
    return Path(path).parent if path else None


def package_of(obj: Any) -> str:
    """The top-level package of `obj`'s class (of a compiler: whose source it runs)."""
    return str(type(obj).__module__).split(".")[0]


def environment(packages: Iterable[str] = ()) -> dict[str, str]:
    """What compiled artifacts depend on besides their key, by name: Python, torch (version
    and commit), operating system and machine, the CPU's feature flags (hashed), and the
    source (hashed) of aotgrad and of `packages` (those whose code compiled the artifact,
    e.g. `inductor`; torch's own version stands for torch)."""
    items = dict(_base_environment())
    for name in sorted({"aotgrad", *packages} - {"torch"}):
        root = _package_root(name)
        if root is not None:
            items[f"source:{name}"] = _source_digest(root)
    return items


def device_text(devices: set[str]) -> str:
    """The GPU architecture of each CUDA device in `devices` (empty for CPU only)."""
    parts = []
    for device in sorted(devices):
        if device.startswith("cuda"):
            index = torch.device(device).index or 0
            parts.append(f"{device}:{torch.cuda.get_device_name(index)}:"
                         f"{torch.cuda.get_device_capability(index)}")
    return ",".join(parts)
