"""Building and loading the native checker: `checker.cpp`, compiled on first use, cached.

In: the C++ source shipped in this package (read with importlib.resources), the system C++
compiler (`$CXX`, else `g++`), torch's headers and libraries. Out: the loaded extension
module, or None (then generated guards stay pure Python).

The shared object is cached under `$GUARDS_CACHE_DIR`, else `$COMPILER_CACHE_DIR/guards`,
else `$XDG_CACHE_HOME/compiler/guards` or `~/.cache/compiler/guards` (`~` expanded, relative
paths made absolute), named by a hash of everything the binary depends on: the source, the
flags, torch's version and location (which fix its include directories), Python's version
and include directory, and the compiler's version line (recorded in the cache once per
compiler binary, so a cached build loads without a compiler installed). The cache folder
(`disk_cache.py`) writes a build to a temporary name, records its sha256 and renames it into
place under a per-key lock, so that concurrent processes build once; a cached file is
imported only if its bytes match the recorded hash (a truncated or swapped file would crash
or misbehave in the dynamic loader), and one that fails to import or whose `BUILD_KEY` is
not the expected one is removed and rebuilt. An unusable cache folder means building in a
private temporary one (one warning). Every failure (no compiler, compile error, import
error) raises NativeBuildError.

`start_background(plan)` runs the same build in a detached process (`python -m
guards.native --background ...`, a new session: it finishes, and renames its file into
place, even after this process exits or is interrupted); `BackgroundBuild.poll()` says
whether it is done without waiting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.resources
import importlib.util
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import IO

from guards.native.disk_cache import DiskCache, resolve_dir

LOG = logging.getLogger("guards")

#: The extension's module name (its init function is `PyInit__guards_native`).
MODULE_NAME = "_guards_native"
SOURCE_NAME = "checker.cpp"
#: Sources appended to SOURCE_NAME (the snapshots of guarded objects, `snapshot.cpp`).
EXTRA_SOURCES = ("snapshot.cpp",)
#: Seconds a compile may take before it is given up (a 2-core machine needs about 30).
COMPILE_TIMEOUT_S = 600


class NativeBuildError(RuntimeError):
    """The native checker could not be built or loaded (the message says why)."""


@dataclass(frozen=True, slots=True)
class BuildPlan:
    """What to compile and where the result goes: the compiler, the source text, the
    compile flags (without the build key define), the link flags, the cache key and the
    cached file's path."""

    cxx: str
    source: bytes
    flags: tuple[str, ...]
    libs: tuple[str, ...]
    key: str
    path: pathlib.Path


def cache_dir() -> pathlib.Path:
    """The cache folder (`guards.config.native_cache_dir`; absolute, not created here)."""
    from guards import config

    return pathlib.Path(config.native_cache_dir())


_caches: dict[pathlib.Path, DiskCache] = {}
_caches_lock = threading.Lock()


def open_cache(directory: pathlib.Path) -> DiskCache:
    """The cache folder `directory` (opened once per process; also found by the private
    folder that replaced it if it was unusable)."""
    where = resolve_dir(str(directory))
    with _caches_lock:
        for cache in _caches.values():
            if where in (cache.primary, cache.directory):
                return cache
        cache = _caches[where] = DiskCache(where, "guards", LOG)
        return cache


def find_compiler() -> str | None:
    """The C++ compiler to use (`$CXX`, else `g++`) as a path, or None if not found."""
    from guards import config

    return shutil.which(config.native_compiler())


def source_text() -> bytes:
    """The C++ source shipped as package data: `checker.cpp` followed by the files of
    `EXTRA_SOURCES` (one translation unit)."""
    files = importlib.resources.files("guards.native")
    return b"\n".join(files.joinpath(name).read_bytes() for name in (SOURCE_NAME,
                                                                     *EXTRA_SOURCES))


def compiler_version(cxx: str) -> str:
    """The first line of `cxx --version` (part of the cache key)."""
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True,
                         timeout=60)
    lines = out.stdout.strip().splitlines()
    return lines[0] if lines else ""


def _torch_dirs() -> tuple[str, str]:
    """torch's package directory and its `lib` directory."""
    import torch

    root = os.path.dirname(torch.__file__)
    return root, os.path.join(root, "lib")


def compile_flags() -> tuple[str, ...]:
    """Compiler flags: C++20 and torch's C++ ABI (include directories: `include_flags`)."""
    import torch

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return ("-O2", "-shared", "-fPIC", "-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={abi}")


def include_flags() -> tuple[str, ...]:
    """torch's and Python's include directories. Computed only to build (importing
    torch.utils.cpp_extension takes a while); the cache key has torch's location instead."""
    from torch.utils.cpp_extension import include_paths

    return tuple(f"-I{path}" for path in [*include_paths(), sysconfig.get_paths()["include"]])


def link_flags() -> tuple[str, ...]:
    """Linker flags, placed after the source (with --as-needed, libraries named before the
    object that uses them are dropped): torch's libraries, found at run time by rpath."""
    _, lib = _torch_dirs()
    return (f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltorch_python", "-ltorch", "-ltorch_cpu",
            "-lc10")


def plan_build(directory: pathlib.Path | None = None, cxx: str | None = None) -> BuildPlan:
    """The build for this interpreter and torch: raises NativeBuildError if the compiler
    cannot run (or, not installed, was never recorded in the cache)."""
    import torch

    from guards import config

    configured = cxx if cxx is not None else config.native_compiler()
    cache = open_cache(directory if directory is not None else cache_dir())
    try:
        version = cache.compiler_version(configured)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeBuildError(f"cannot run the C++ compiler {configured}: {exc}") from exc
    if version is None:
        raise NativeBuildError(f"cannot run the C++ compiler {configured}: not found, and "
                               f"the cache {cache.primary} records no build with it")
    compiler = shutil.which(configured) or configured
    source = source_text()
    flags = compile_flags()
    libs = link_flags()
    root, _ = _torch_dirs()
    digest = hashlib.sha256()
    parts = (source, "\0".join(flags + libs).encode(), torch.__version__.encode(),
             root.encode(), sys.version.encode(), sysconfig.get_paths()["include"].encode(),
             version.encode())
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    key = digest.hexdigest()[:24]
    return BuildPlan(compiler, source, flags, libs, key,
                     cache.directory / f"{MODULE_NAME}-{key}.so")


#: Path -> (device, inode) of the file this process handed to the dynamic loader there: the
#: loader reuses a handle by path, so a file replaced since is loaded under another name.
_opened: dict[str, tuple[int, int]] = {}


def import_extension(path: pathlib.Path, key: str) -> ModuleType:
    """Import the extension at `path`; raises NativeBuildError if it does not load or was
    built for another key."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise NativeBuildError(f"{path} does not import: {exc}") from exc
    identity = (st.st_dev, st.st_ino)
    # NOTE: the loader returns the first file ever loaded under a path for that path
    replaced = _opened.setdefault(str(path), identity) != identity
    with tempfile.TemporaryDirectory(prefix="guards-load-") as private:
        target = path
        if replaced:
            target = pathlib.Path(private) / path.name
            shutil.copyfile(path, target)
        module = _exec_extension(target)
    if getattr(module, "BUILD_KEY", None) != key:
        raise NativeBuildError(f"{path} was built for key {getattr(module, 'BUILD_KEY', None)}"
                               f", expected {key}")
    return module


def _exec_extension(path: pathlib.Path) -> ModuleType:
    """Load the shared object at `path` as the extension module."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
    if spec is None:
        raise NativeBuildError(f"cannot make an import spec for {path}")
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as exc:  # ImportError, or anything a broken file raises
        raise NativeBuildError(f"{path} does not import: {exc}") from exc
    return module


def compile_to(plan: BuildPlan, output: pathlib.Path) -> None:
    """Compile `plan.source` into the shared object `output`; raises NativeBuildError. The
    source is written beside `output` (a temporary name of the cache: a killed build's
    files are swept from there)."""
    source = output.with_name(output.name.removesuffix(".tmp") + ".cpp.tmp")
    try:
        source.write_bytes(plan.source)
        # NOTE: -x c++: the temporary source's name does not end in .cpp
        command = [plan.cxx, *plan.flags, *include_flags(), f'-DGUARDS_NATIVE_KEY="{plan.key}"',
                   "-x", "c++", str(source), "-x", "none", "-o", str(output), *plan.libs]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise NativeBuildError(f"compiler did not run: {exc}") from exc
    finally:
        source.unlink(missing_ok=True)
    if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-20:])
            raise NativeBuildError(f"compile failed (exit {done.returncode}):\n{tail}")


def _size_limit_bytes() -> int:
    from guards import config

    return int(config.options.native_cache_size_limit_mb) * (1 << 20)


def load_cached(plan: BuildPlan) -> ModuleType | None:
    """The cached build of `plan` if its bytes are the recorded ones and it imports with the
    right key; else None (a damaged entry is removed, with one warning)."""
    cache = open_cache(plan.path.parent)
    path = cache.lookup(plan.path.name, plan.key)
    if path is None:
        return None
    try:
        return import_extension(path, plan.key)
    except NativeBuildError as exc:
        if path.parent == cache.directory and cache.writable:
            with cache.lock(path.name):
                cache.discard(path.name, str(exc))
        return None


def build_and_load(directory: pathlib.Path | None = None, cxx: str | None = None) -> ModuleType:
    """The native module: the cached build if it is intact, else a fresh build (see module
    doc). Raises NativeBuildError on any failure."""
    plan = plan_build(directory, cxx)
    module = load_cached(plan)
    if module is not None:
        return module
    cache = open_cache(plan.path.parent)

    def produce(output: pathlib.Path) -> None:
        LOG.info("guards: building the native checker with %s (first use; about 30 s)",
                 plan.cxx)
        compile_to(plan, output)

    # NOTE: under the key's lock: a build another process finished meanwhile is reused
    path = cache.store(plan.path.name, plan.key, produce, _size_limit_bytes())
    try:
        return import_extension(path, plan.key)
    except NativeBuildError as exc:
        with cache.lock(path.name):
            cache.discard(path.name, str(exc))
        raise


#: How much of a failed background build's output its warning quotes (characters).
LOG_TAIL_CHARS = 4000


@dataclass(eq=False)
class BackgroundBuild:
    """A build running in a detached process (see `start_background`)."""

    plan: BuildPlan
    process: subprocess.Popen[bytes]
    #: The process's stdout and stderr (an anonymous temporary file, gone when closed).
    log: IO[bytes]
    #: The process that started it: a forked child sees the build only through the file.
    owner: int = field(default_factory=os.getpid)

    def poll(self) -> bool:
        """Whether the build is over (never waits)."""
        if os.getpid() != self.owner:
            return self.plan.path.exists()
        return self.process.poll() is not None

    def wait(self) -> None:
        """Wait until the build is over."""
        if os.getpid() == self.owner:
            self.process.wait()

    def result(self) -> ModuleType:
        """The built module, once `poll()` is True; raises NativeBuildError saying why the
        build failed (the tail of its output)."""
        code = self.process.returncode if os.getpid() == self.owner else 0
        if code != 0:
            self.log.seek(0)
            tail = self.log.read().decode(errors="replace").strip()[-LOG_TAIL_CHARS:]
            self.log.close()
            raise NativeBuildError(f"background build failed (exit {code}): {tail}")
        self.log.close()
        module = load_cached(self.plan)
        if module is None:
            raise NativeBuildError(f"the background build left no intact {self.plan.path}")
        return module


#: The detached build's program: where this process found this package is added to the end
#: of sys.path if missing (a package found elsewhere first has another source, so another
#: key: the build refuses), then `guards.native.__main__.main` with the other arguments.
_BOOTSTRAP = ("import sys; sys.argv[1] in sys.path or sys.path.append(sys.argv[1]); "
              "from guards.native.__main__ import main; sys.exit(main(sys.argv[2:]))")


def background_command(plan: BuildPlan) -> list[str]:
    """The command line of the detached build of `plan` (see `guards.native.__main__`)."""
    # this file is <root>/guards/native/build.py: the folder holding the `guards` package
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-c", _BOOTSTRAP, package_root, "--background", "--cache-dir",
            str(plan.path.parent), "--cxx", plan.cxx, "--key", plan.key]


def start_background(plan: BuildPlan) -> BackgroundBuild:
    """Start building `plan` in a detached process; raises NativeBuildError if it cannot
    start. It runs in the cache directory (so that nothing in this process's working
    directory can shadow the packages it imports); in a private one if that cannot be
    written (the returned build's `plan.path` says where)."""
    try:
        directory = open_cache(plan.path.parent).writable_directory()
    except OSError as exc:
        raise NativeBuildError(f"no cache directory to build in: {exc}") from exc
    if directory != plan.path.parent:
        plan = dataclasses.replace(plan, path=directory / plan.path.name)
    log = tempfile.TemporaryFile(prefix="guards-native-build-")  # noqa: SIM115  # see result()
    try:
        process = subprocess.Popen(background_command(plan), stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log, close_fds=True,
                                   cwd=plan.path.parent, start_new_session=True)
    except OSError as exc:
        log.close()
        raise NativeBuildError(f"cannot start the background build: {exc}") from exc
    return BackgroundBuild(plan, process, log)
