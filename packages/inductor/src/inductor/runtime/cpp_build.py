"""Build generated C++ into shared libraries, cached on disk by a hash of source + flags.

A library is compiled to a temporary name and moved into place with `os.replace`, so a
reader never sees a half-written file. Each library exports `inductor_cache_key()`; a
library that fails to load or returns the wrong key is rebuilt, never used. Kernels are
grouped into a few libraries compiled in parallel; an index file per kernel lets later
graphs reuse kernels they share with earlier ones.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inductor import config
from inductor.codegen.cpp import CppKernel
from inductor.codegen.cpp_prelude import PRELUDE

log = logging.getLogger("inductor.build")

_loaded: dict[str, ctypes.CDLL] = {}
_functions: dict[str, Any] = {}
_lock = threading.Lock()
_unique = 0


class BuildError(RuntimeError):
    pass


@functools.cache
def _compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"C++ compiler {cxx!r} not usable: {e}") from e


def compile_flags() -> list[str]:
    # NOTE: -ffp-contract=off: g++ fuses `a * b + c` into an FMA by default (GNU mode),
    # skipping the product's rounding that eager does; near cancellation (`1 - x * x` in
    # asin's derivative at |x| ~ 1) results drifted far from eager. The prelude's
    # polynomials (exp, tanh, erf) use explicit FMAs, so they keep their speed.
    flags = [config.options.opt_level, "-shared", "-fPIC", "-std=c++17", "-fopenmp",
             "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-w"]
    if config.options.march_native:
        flags.append("-march=native")
        if _cpu_has_avx512():
            # NOTE: g++ tunes Intel AVX-512 CPUs (sapphirerapids) to 256-bit vectors; the
            # kernels' exp/erf polynomials are compute-bound there and ATen's own kernels
            # use 512-bit ones (the attention block's exp: 2.8x slower than eager at 256).
            flags.append("-mprefer-vector-width=512")
    return flags


@functools.cache
def _cpu_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def _cache_dir() -> Path:
    path = Path(config.options.cache_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def library_source(kernels: Sequence[CppKernel]) -> tuple[str, str]:
    """(full source with the key marker, key)."""
    body = PRELUDE + "\n" + "\n".join(k.source for k in kernels)
    cxx = config.options.cxx
    material = "\0".join([body, cxx, _compiler_version(cxx), *compile_flags()])
    key = hashlib.sha256(material.encode()).hexdigest()[:32]
    marker = f'\nextern "C" const char* inductor_cache_key() {{ return "{key}"; }}\n'
    return body + marker, key


def _verify(lib: ctypes.CDLL, key: str) -> bool:
    try:
        fn = lib.inductor_cache_key
    except AttributeError:
        return False
    fn.restype = ctypes.c_char_p
    fn.argtypes = []
    value = fn()
    return isinstance(value, bytes) and value.decode() == key


def _try_load(path: Path, key: str) -> ctypes.CDLL | None:
    if not path.exists():
        return None
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        log.warning("cached kernel library %s does not load; rebuilding", path)
        return None
    if _verify(lib, key):
        return lib
    log.warning("cached kernel library %s has a wrong key; rebuilding", path)
    return None


def _compile(source: str, key: str, out: Path) -> None:
    directory = out.parent
    fd, src_name = tempfile.mkstemp(suffix=".cpp", prefix=f"{key}.", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    tmp_out = f"{src_name[:-4]}.so.tmp"
    cmd = [config.options.cxx, *compile_flags(), src_name, "-o", tmp_out]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        os.unlink(src_name)
        raise BuildError(f"kernel compile failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    os.replace(tmp_out, out)
    os.replace(src_name, out.with_suffix(".cpp"))


def _load_fresh(path: Path) -> ctypes.CDLL:
    """Load a rebuilt library under a unique name (the loader caches handles by path)."""
    global _unique
    with _lock:
        _unique += 1
        alias = path.with_name(f"{path.stem}.{os.getpid()}.{_unique}.so")
    if not alias.exists():
        os.link(path, alias)
    lib = ctypes.CDLL(str(alias))
    os.unlink(alias)
    return lib


def build_library(kernels: Sequence[CppKernel]) -> ctypes.CDLL:
    source, key = library_source(kernels)
    with _lock:
        lib = _loaded.get(key)
    if lib is not None:
        return lib
    path = _cache_dir() / f"lib_{key}.so"
    lib = _try_load(path, key)
    if lib is None:
        existed = path.exists()
        _compile(source, key, path)
        lib = _load_fresh(path) if existed else ctypes.CDLL(str(path))
        if not _verify(lib, key):
            raise BuildError(f"freshly built library {path} fails its key check")
    with _lock:
        _loaded[key] = lib
    _write_index(kernels, path.name)
    return lib


def _write_index(kernels: Sequence[CppKernel], lib_name: str) -> None:
    directory = _cache_dir() / "index"
    directory.mkdir(exist_ok=True)
    for k in kernels:
        target = directory / f"{k.name}.{_flags_digest()}"
        if not target.exists():
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(lib_name)
            os.replace(tmp, target)


@functools.cache
def _flags_digest_for(flags: str) -> str:
    return hashlib.sha256(flags.encode()).hexdigest()[:12]


def _flags_digest() -> str:
    cxx = config.options.cxx
    return _flags_digest_for("\0".join([cxx, _compiler_version(cxx), *compile_flags()]))


def _from_index(kernel: CppKernel) -> Any | None:
    index = _cache_dir() / "index" / f"{kernel.name}.{_flags_digest()}"
    try:
        lib_name = index.read_text().strip()
    except OSError:
        return None
    path = _cache_dir() / lib_name
    key = lib_name.removeprefix("lib_").removesuffix(".so")
    with _lock:
        lib = _loaded.get(key)
    if lib is None:
        lib = _try_load(path, key)
        if lib is None:
            return None
        with _lock:
            _loaded[key] = lib
    try:
        return getattr(lib, kernel.name)
    except AttributeError:
        return None


def _prepare(fn: Any, nargs: int) -> Any:
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn


def load_kernels(kernels: Sequence[CppKernel]) -> dict[str, Any]:
    """Kernel name -> ctypes function, building what the caches do not have."""
    result: dict[str, Any] = {}
    missing: list[CppKernel] = []
    seen: set[str] = set()
    for k in kernels:
        if k.name in seen:
            continue
        seen.add(k.name)
        fn = _functions.get(k.name)
        if fn is None:
            fn = _from_index(k)
            if fn is not None:
                fn = _prepare(fn, len(k.params))
                _functions[k.name] = fn
        if fn is None:
            missing.append(k)
        else:
            result[k.name] = fn
    if missing:
        per = max(1, config.options.kernels_per_library)
        workers = max(1, config.options.compile_threads)
        n_chunks = max(min(workers, len(missing)), -(-len(missing) // per))
        chunks = [missing[i::n_chunks] for i in range(n_chunks)]
        chunks = [c for c in chunks if c]
        if len(chunks) == 1:
            libs = [build_library(chunks[0])]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                libs = list(pool.map(build_library, chunks))
        for chunk, lib in zip(chunks, libs):
            for k in chunk:
                fn = _prepare(getattr(lib, k.name), len(k.params))
                _functions[k.name] = fn
                result[k.name] = fn
    return result


def clear_memory_cache() -> None:
    """Forget loaded libraries and cached plans (to exercise the on-disk cache)."""
    from inductor import pipeline

    with _lock:
        _loaded.clear()
        _functions.clear()
    pipeline.clear_plan_cache()
