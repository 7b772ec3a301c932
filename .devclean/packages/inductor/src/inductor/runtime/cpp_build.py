"""Build generated C++ into shared libraries, cached on disk by a hash of source + flags.

In: the kernels of a graph. Out: ctypes functions. The cache folder (`runtime/disk_cache.py`)
hands a library to the dynamic loader only after its bytes match the sha256 recorded when it
was written, so a truncated, zero-filled or swapped file is rebuilt, never loaded; builds of
one library are serialized across processes by a lock. Each library also exports
`inductor_cache_key()`, checked after loading. Kernels are grouped into a few libraries
compiled in parallel; an index record per kernel lets later graphs reuse kernels they share
with earlier ones. The compiler's version (part of every key) is recorded in the cache once
per compiler binary, so a warm cache needs no compiler.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import re
import shutil
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
from inductor.runtime.build_errors import BuildError, CompilerUnusable
from inductor.runtime.disk_cache import DiskCache, resolve_dir
from inductor.runtime.process_caches import clear_all, register_clear

log = logging.getLogger("inductor.build")

_loaded: dict[str, ctypes.CDLL] = {}
_functions: dict[str, Any] = {}
_lock = threading.Lock()
_unique = 0
#: Library path -> (device, inode) of the file this process handed to the loader there (the
#: loader reuses a handle by path: a file replaced since must be loaded under another name).
_opened: dict[str, tuple[int, int]] = {}
_caches: dict[Path, DiskCache] = {}
_LIBRARY = re.compile(r"^lib_([0-9a-f]{32})\.so$")




def _cache() -> DiskCache:
    """The cache folder of the configured `cache_dir` (opened once per process)."""
    directory = resolve_dir(config.options.cache_dir)
    with _lock:
        cache = _caches.get(directory)
        if cache is None:
            cache = DiskCache(directory, "inductor", log, on_evict=_forget_index)
            _caches[directory] = cache
    return cache


def _compiler_version(cxx: str) -> str:
    """`cxx`'s version line, as recorded in the cache (see DiskCache.compiler_version)."""
    cache = _cache()
    return _recorded_version(cache, cxx)


@functools.cache
def _recorded_version(cache: DiskCache, cxx: str) -> str:
    try:
        version = cache.compiler_version(cxx)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompilerUnusable(f"C++ compiler {cxx!r} not usable: {e}") from e
    if version is None:
        raise CompilerUnusable(f"C++ compiler {cxx!r} not found, and the kernel cache "
                         f"{cache.primary} has no record of it")
    return version


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
def _cpu_flags() -> tuple[str, ...]:
    """This CPU's feature flags (from /proc/cpuinfo; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return tuple(sorted(line.partition(":")[2].split()))
    except OSError:
        pass
    return ()


def _cpu_has_avx512() -> bool:
    return "avx512f" in _cpu_flags()


def _key_flags() -> list[str]:
    """Compile flags, and with -march=native the CPU's features and machine: a cache shared
    by machines of other CPUs (a network home) must not hand them code they cannot run."""
    flags = compile_flags()
    if config.options.march_native:
        flags += [platform.machine(), " ".join(_cpu_flags())]
    return flags


def library_source(kernels: Sequence[CppKernel]) -> tuple[str, str]:
    """(full source with the key marker, key)."""
    body = PRELUDE + "\n" + "\n".join(k.source for k in kernels)
    cxx = config.options.cxx
    material = "\0".join([body, cxx, _compiler_version(cxx), *_key_flags()])
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
    return isinstance(value, bytes) and value == key.encode()


def _load(path: Path, key: str) -> ctypes.CDLL | None:
    """Load a verified library file; None (the entry discarded) if it does not load or
    answers another key."""
    try:
        st = os.stat(path)
        identity = (st.st_dev, st.st_ino)
        # NOTE: the loader returns the first file ever loaded under a path for that path
        replaced = _opened.get(str(path), identity) != identity
        lib = _load_fresh(path) if replaced else ctypes.CDLL(str(path))
    except OSError as exc:
        problem = f"does not load: {exc}"
    else:
        _opened.setdefault(str(path), identity)
        if _verify(lib, key):
            return lib
        problem = "answers another key"
    cache = _cache()
    if path.parent == cache.directory and cache.writable:
        with cache.lock(path.name):
            cache.discard(path.name, problem)
    return None


def _compile(source: str, out: Path) -> None:
    """Compile `source` into the shared library `out` (a temporary path of the cache)."""
    src_name = out.with_name(out.name.removesuffix(".tmp") + ".cpp.tmp")
    try:
        src_name.write_text(source)
        # NOTE: -x c++: the temporary source's name does not end in .cpp
        cmd = [config.options.cxx, *compile_flags(), "-x", "c++", str(src_name), "-x", "none",
               "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as e:  # NOTE: not a cache problem: no compiler to build with
            raise CompilerUnusable(f"C++ compiler {config.options.cxx!r} did not run: {e}") from e
    finally:
        src_name.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise BuildError(f"kernel compile failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")


def _load_fresh(path: Path) -> ctypes.CDLL:
    """Load a rebuilt library under a unique name (the loader caches handles by path): a
    hard link beside it, else a copy in a private temporary folder."""
    global _unique
    with _lock:
        _unique += 1
        alias = path.with_name(f".{path.stem}.{os.getpid()}.{_unique}.so")
    try:
        os.link(path, alias)
    except OSError:
        with tempfile.TemporaryDirectory(prefix="inductor-load-") as private:
            copy = Path(private) / alias.name
            shutil.copyfile(path, copy)
            return ctypes.CDLL(str(copy))
    try:
        return ctypes.CDLL(str(alias))
    finally:
        alias.unlink(missing_ok=True)


def _limit_bytes() -> int:
    return int(config.options.cache_size_limit_mb) * (1 << 20)


def build_library(kernels: Sequence[CppKernel]) -> ctypes.CDLL:
    """One shared library of `kernels`: from this process, the disk cache, or built now."""
    source, key = library_source(kernels)
    with _lock:
        lib = _loaded.get(key)
    if lib is not None:
        return lib
    name = f"lib_{key}.so"
    cache = _cache()
    lib = None
    for _ in range(2):  # NOTE: a second round only if the stored file fails to load
        path = cache.lookup(name, key)
        if path is None:
            path = cache.store(name, key, lambda out: _compile(source, out), _limit_bytes())
        lib = _load(path, key)
        if lib is not None:
            break
    if lib is None:
        raise BuildError(f"freshly built library {name} does not load or fails its key check")
    with _lock:
        _loaded[key] = lib
    _write_index(cache, kernels, name)
    return lib


def _write_index(cache: DiskCache, kernels: Sequence[CppKernel], lib_name: str) -> None:
    digest = _flags_digest()
    for k in kernels:
        record = f"{k.name}.{digest}"
        if cache.read_record("index", record) != lib_name:
            cache.write_record("index", record, lib_name)


def _forget_index(cache: DiskCache, removed: list[str]) -> None:
    """Drop the index records of kernels whose library was evicted."""
    gone = set(removed)
    for record in cache.records("index"):
        if cache.read_record("index", record) in gone:
            cache.remove_record("index", record)


@functools.cache
def _flags_digest_for(flags: str) -> str:
    return hashlib.sha256(flags.encode()).hexdigest()[:12]


def _flags_digest() -> str:
    """What a kernel's library depends on besides the kernel's own text: the compiler, its
    flags, and the prelude every kernel is built with (a kernel whose text is unchanged
    after the prelude changed must not load a library built with the old one)."""
    cxx = config.options.cxx
    return _flags_digest_for("\0".join([cxx, _compiler_version(cxx), *_key_flags(), PRELUDE]))


def _from_index(kernel: CppKernel) -> Any | None:
    cache = _cache()
    lib_name = cache.read_record("index", f"{kernel.name}.{_flags_digest()}")
    if lib_name is None:
        return None
    match = _LIBRARY.match(lib_name)
    if match is None:
        cache.remove_record("index", f"{kernel.name}.{_flags_digest()}")
        return None
    key = match[1]
    with _lock:
        lib = _loaded.get(key)
    if lib is None:
        path = cache.lookup(lib_name, key)
        lib = _load(path, key) if path is not None else None
        if lib is None:
            return None
        with _lock:
            _loaded[key] = lib
    try:
        return getattr(lib, kernel.name)
    except AttributeError:
        return None


def _prepare(fn: Any, kernel: CppKernel) -> Any:
    """Argument types: data pointers, and int64 sizes for the size symbols it takes."""
    fn.argtypes = [ctypes.c_int64 if p in kernel.sizes else ctypes.c_void_p
                   for p in kernel.params]
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
                fn = _prepare(fn, k)
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
                fn = _prepare(getattr(lib, k.name), k)
                _functions[k.name] = fn
                result[k.name] = fn
    return result


def _clear_loaded() -> None:
    with _lock:
        _loaded.clear()
        _functions.clear()


register_clear("cpp_build", _clear_loaded)


def clear_memory_cache() -> None:
    """Forget loaded libraries, cached plans and every other in-process cache that
    registered with `runtime/process_caches.py` (to exercise the on-disk cache)."""
    clear_all()
