"""Precompiled modules and portable caches: `precompile`, `load_precompiled`,
`save_cache_artifacts`, `load_cache_artifacts`.

A precompiled module is one compiled call signature of a module, saved to a file: the
compiled forward and backward graphs (inductor's wrapper and its kernel libraries, or
aot_eager's ATen graphs as code) with what the runtime wrapper needs, and its guards: the
call signature (tensor metadata of the parameters, buffers and inputs, which require grad,
grad mode, train/eval flags, Python constants), a fingerprint of the module (its classes,
their `forward` code, parameter names, plain attributes) and the environment it was built
in (Python, torch, machine, CPU features, our packages' source). A fresh process loads it
and runs the module without capture, tracing or compiling; a call that does not match the
guards raises `PrecompiledGuardError`, and an artifact from another environment is refused
when loaded: it is never run.

The module's forward is traced to ATen directly (as `torch.export` does, not through
capture): Python control flow is fixed for the example inputs' signature, and a forward
that changes the module's plain attributes is refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aotgrad
import torch
from aotgrad import cache as aot_cache
from aotgrad import disk as aot_disk
from aotgrad import serialize
from aotgrad.api import AotCompiled, LiftedModule
from aotgrad.backend import run_graph_as_is
from inductor import config as inductor_config
from inductor.backend import make_compiler, resolve_options
from inductor.decompositions import decomposition_table
from inductor.runtime import graph_cache
from inductor.runtime.disk_cache import resolve_dir

__all__ = ["PrecompiledGuardError", "PrecompiledModule", "load_cache_artifacts",
           "load_precompiled", "precompile", "save_cache_artifacts"]

graph_cache.install()  # NOTE: every backend built on aotgrad keeps compiled graphs on disk

_FORMAT = "compiler-precompiled-v1"
_ARTIFACTS_FORMAT = "compiler-cache-artifacts-v1"


def _artifacts_environment() -> dict[str, str]:
    return serialize.environment(["inductor"])


class PrecompiledGuardError(RuntimeError):
    """A precompiled module was called in a way its artifact was not compiled for, or the
    artifact does not match this environment or module."""


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _code_digest(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()[:16]


def module_fingerprint(module: torch.nn.Module) -> list[tuple[str, str, str, str]]:
    """Per submodule: its path, class, the digest of its class' forward and of its plain
    (bool/int/float/str/None) attributes."""
    result = []
    for name, sub in module.named_modules():
        cls = type(sub)
        plain = sorted((k, repr(v)) for k, v in vars(sub).items()
                       if not k.startswith("_") and k != "training" and _plain(v))
        result.append((name, f"{cls.__module__}.{cls.__qualname__}",
                       _code_digest(getattr(cls, "forward", None)),
                       hashlib.sha256(repr(plain).encode()).hexdigest()[:16]))
    return result


def _compilers(backend: str, options: Mapping[str, Any] | None, mode: str | None,
               ) -> tuple[Any, Any, dict[str, Any]]:
    """(ATen-graph compiler, decompositions, aotgrad option values) of a backend name."""
    if backend == "aot_eager":
        if mode is not None:
            raise ValueError("mode applies to the inductor backend only")
        values = dict(options or {})
        aotgrad.config.replace(values)  # checks names and types
        return run_graph_as_is, "none", values
    if backend != "inductor":
        raise ValueError(f"precompile supports the 'inductor' and 'aot_eager' backends, "
                         f"not {backend!r}")
    values = resolve_options(options, mode)
    ours = {k: v for k, v in values.items() if k in inductor_config.declared}
    rest = {k: v for k, v in values.items() if k not in inductor_config.declared}
    return make_compiler(ours), decomposition_table(), rest


class PrecompiledModule:
    """A precompiled call signature of a module (`precompile`); `save(path)` writes it,
    `load_precompiled(path, module)` runs it in another process."""

    def __init__(self, header: dict[str, Any], entry: bytes) -> None:
        self.header = header
        self.entry = entry

    def to_bytes(self) -> bytes:
        """The artifact as bytes (what `save` writes)."""
        return serialize.dumps({"format": _FORMAT, "header": self.header,
                                "entry": self.entry})

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the artifact to `path` (atomically)."""
        target = Path(path)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temp.write_bytes(self.to_bytes())
        os.replace(temp, target)


def precompile(module: torch.nn.Module, example_inputs: Sequence[Any], *,
               backend: str = "inductor", mode: str | None = None,
               options: Mapping[str, Any] | None = None) -> PrecompiledModule:
    """Compile `module` for the call signature of `example_inputs` into a saveable artifact.

    Args:
        module: The module to compile. Its forward is traced to ATen once, for the
            example inputs, with the grad mode in effect: training (forward and backward)
            when grad mode is on and a parameter or input requires grad.
        example_inputs: The positional arguments of the call to compile for.
        backend: `"inductor"` (default) or `"aot_eager"`.
        mode: An inductor mode (`compiler.list_mode_options()`).
        options: Inductor and aotgrad option values for this compile, by name.

    Returns:
        A `PrecompiledModule`: `.save(path)` writes it; `load_precompiled(path, module)`
        loads it in any process of the same environment.

    Examples:
        >>> import torch, compiler
        >>> net = torch.nn.Linear(4, 2)
        >>> artifact = compiler.precompile(net, (torch.ones(3, 4),), backend="aot_eager")
        >>> run = compiler.load_precompiled(artifact.to_bytes(), net)
        >>> torch.allclose(run(torch.ones(3, 4)), net(torch.ones(3, 4)))
        True

    Notes:
        Raises `PrecompiledGuardError` for a forward that changes the module's plain
        attributes (it would not change them when the artifact runs), and ValueError for
        a compile that cannot be saved (dynamic shapes, data-dependent values, a graph
        with grad-mode dependent ops). Python control flow in forward is fixed for the
        example inputs, as with `torch.export`; the saved guards check tensor metadata,
        grad mode, train flags and the module fingerprint, not other Python state.
    """
    fw_compiler, decompositions, aot_values = _compilers(backend, options, mode)
    before = module_fingerprint(module)
    lifted = LiftedModule(module)
    compiled = AotCompiled(lifted, fw_compiler, fw_compiler, None, decompositions, aot_values)
    compiled.prepare(*lifted.state(), *example_inputs)
    if module_fingerprint(module) != before:
        raise PrecompiledGuardError(
            f"{type(module).__name__}.forward changes the module's attributes; a "
            "precompiled module would not: it cannot be precompiled")
    if len(compiled.cache) != 1:
        raise ValueError("precompile: expected one compiled call signature")
    (key, entry), = compiled.cache.items()
    try:
        data = aot_disk.save_entry(entry, fw_compiler, fw_compiler)
        header = {"environment": _environment(fw_compiler), "key": key,
                  "fingerprint": before, "backend": backend,
                  "kernels": graph_cache.kernel_libraries(entry, fw_compiler)}
        serialize.dumps(header)
    except aot_cache.Uncacheable as exc:
        raise ValueError(f"precompile: this compile cannot be saved: {exc}") from exc
    header["devices"] = serialize.device_text(_devices(key))
    return PrecompiledModule(header, data)


def _environment(compiler: Any) -> dict[str, str]:
    return serialize.environment([serialize.package_of(compiler)])


def _devices(key: Any) -> set[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, torch.device):
            found.add(str(value))
        elif isinstance(value, (tuple, list)):
            for v in value:
                walk(v)

    walk(key)
    return found


def _recompute_fn(lifted: LiftedModule, key: tuple[Any, ...]) -> Callable[..., Any]:
    """The function of the tensor arguments a double backward recomputes: the module itself
    when every argument is a tensor (the key's parts after training, structure and the
    train flags are the arguments')."""
    leaves = key[3:]
    if key[1] == len(leaves) and all(isinstance(p[0], torch.dtype) for p in leaves):
        return lifted

    def refuse(*tensors: Any) -> Any:
        raise PrecompiledGuardError("backward with create_graph=True through a precompiled "
                                    "module called with non-tensor arguments is not supported")

    return refuse


class _Frozen(AotCompiled):
    """An `AotCompiled` holding only the precompiled signature: any other call raises."""

    def _compile(self, leaves: list[Any], in_spec: Any, training: bool, key: tuple[Any, ...],
                 ) -> Any:
        (expected,) = self.cache
        raise PrecompiledGuardError(
            "the precompiled module was compiled for another call signature; "
            f"{_difference(expected, key)}")


def _difference(expected: tuple[Any, ...], got: tuple[Any, ...]) -> str:
    labels = ["training (grad mode on and a parameter or input requiring grad)",
              "argument structure"]
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            what = labels[i] if i < len(labels) else f"argument part {i - len(labels)}"
            return f"{what}: expected {a!r}, got {b!r}"
    return f"{len(expected)} parts expected, got {len(got)}"


def _differences(expected: Mapping[str, str], got: Mapping[str, str]) -> list[str]:
    return [f"{k}: artifact {expected.get(k)!r}, here {got.get(k)!r}"
            for k in sorted(set(expected) | set(got)) if expected.get(k) != got.get(k)]


def load_precompiled(source: str | os.PathLike[str] | bytes,
                     module: torch.nn.Module) -> Callable[..., Any]:
    """Load a precompiled artifact and bind it to `module`'s parameters and buffers.

    Args:
        source: A path written by `PrecompiledModule.save`, or `PrecompiledModule.to_bytes()`.
        module: A module of the same classes and parameter names as the precompiled one
            (its parameters' current values are used on every call).

    Returns:
        A function that runs the module's precompiled graphs: `run(*args)`; no capture,
        tracing or compiling happens in this process.

    Examples:
        >>> import torch, compiler
        >>> net = torch.nn.Linear(4, 2)
        >>> data = compiler.precompile(net, (torch.ones(3, 4),), backend="aot_eager").to_bytes()
        >>> run = compiler.load_precompiled(data, net)
        >>> run(torch.ones(5, 4))
        Traceback (most recent call last):
        ...
        compiler.precompile.PrecompiledGuardError: the precompiled module was compiled for ...

    Notes:
        Raises `PrecompiledGuardError` when the artifact was made with other versions of
        Python, torch or our packages, on another machine type or CPU, or for a module of
        other classes, forward code, parameters or plain attributes; and, when called,
        for arguments of another signature than the one compiled (shapes, strides, dtypes,
        devices, requires_grad, grad mode, train/eval flags, Python constants).
    """
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        state = serialize.loads(data)
        ok = isinstance(state, dict) and state.get("format") == _FORMAT
    except Exception as exc:  # NOTE: not an artifact (damaged, another format)
        raise PrecompiledGuardError(f"not a precompiled module ({exc})") from exc
    if not ok:
        raise PrecompiledGuardError("not a precompiled module")
    header = state["header"]
    fw_compiler, decompositions, aot_values = _compilers(header["backend"], None, None)
    env = _differences(header["environment"], _environment(fw_compiler))
    if env:
        raise PrecompiledGuardError("the precompiled module was made in another environment "
                                    "and is refused: " + "; ".join(env))
    key = header["key"]
    devices = serialize.device_text(_devices(key))
    if devices != header["devices"]:
        raise PrecompiledGuardError(f"the precompiled module was made for the devices "
                                    f"{header['devices']!r}; here: {devices!r}")
    if module_fingerprint(module) != header["fingerprint"]:
        raise PrecompiledGuardError(
            "the module differs from the precompiled one (classes, forward code, "
            "submodules or plain attributes)")
    graph_cache.install_kernel_libraries(header["kernels"])
    lifted = LiftedModule(module)
    frozen = _Frozen(lifted, fw_compiler, fw_compiler, None, decompositions, aot_values)
    frozen.cache[key] = aot_disk.load_entry(state["entry"], _recompute_fn(lifted, key),
                                            frozen.saved_bytes, fw_compiler, fw_compiler)

    def run(*args: Any, **kwargs: Any) -> Any:
        return frozen(*lifted.state(), *args, **kwargs)

    return run


# --------------------------------------------------------------------------- cache artifacts


def save_cache_artifacts() -> bytes:
    """Pack the on-disk caches (compiled graphs and kernel libraries) into bytes.

    Returns:
        The entries of the configured cache directory (`inductor.cache_dir`) with their hash
        records and the environment they were made in, as one blob for
        `load_cache_artifacts` on another machine of the same kind.

    Examples:
        >>> import compiler
        >>> blob = compiler.save_cache_artifacts()
        >>> isinstance(blob, bytes)
        True

    Notes:
        Everything the cache folder holds is packed (not only this process' compiles);
        temporary files and locks are left out. Entries stay verified by their content hash
        where they are loaded.
    """
    root = resolve_dir(inductor_config.options.cache_dir)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("MANIFEST", serialize.dumps({"format": _ARTIFACTS_FORMAT,
                                                      "environment": _artifacts_environment()}))
        for path in sorted(root.rglob("*")) if root.is_dir() else []:
            name = path.name
            if (not path.is_file() or path.is_symlink() or name.startswith(".")
                    or name.endswith(".lock")):
                continue
            archive.write(path, str(path.relative_to(root)))
    return buffer.getvalue()


def load_cache_artifacts(data: bytes) -> int:
    """Install the caches `save_cache_artifacts` packed into this machine's cache directory.

    Args:
        data: The bytes `save_cache_artifacts()` returned (possibly on another machine).

    Returns:
        The number of files written (files already present are kept).

    Examples:
        >>> import compiler
        >>> compiler.load_cache_artifacts(compiler.save_cache_artifacts()) >= 0
        True

    Notes:
        Raises `PrecompiledGuardError`, writing nothing, when the artifacts were made with
        other versions of Python, torch or our packages, or on another machine type or CPU:
        a cache of another environment is never used.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        manifest = serialize.loads(archive.read("MANIFEST"))
        ok = isinstance(manifest, dict) and manifest.get("format") == _ARTIFACTS_FORMAT
    except Exception as exc:  # NOTE: not an artifact blob (damaged, another format)
        raise PrecompiledGuardError(f"not cache artifacts ({exc})") from exc
    if not ok:
        raise PrecompiledGuardError("not cache artifacts")
    env = _differences(manifest["environment"], _artifacts_environment())
    if env:
        raise PrecompiledGuardError("the cache artifacts were made in another environment and "
                                    "are refused: " + "; ".join(env))
    root = resolve_dir(inductor_config.options.cache_dir)
    written = 0
    for info in archive.infolist():
        name = info.filename
        parts = Path(name).parts
        if name == "MANIFEST" or info.is_dir() or ".." in parts or Path(name).is_absolute():
            continue
        target = root / name
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}@artifacts.tmp")
        temp.write_bytes(archive.read(info))
        os.replace(temp, target)
        written += 1
    return written
