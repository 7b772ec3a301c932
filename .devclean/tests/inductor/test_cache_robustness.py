"""The kernel cache under damage: every run ends with eager-equal results and no crash.

Damaged entries (truncated, zero-filled, garbage, swapped, a directory in place of a file),
for every kind of file in the cache, run in a child process (`_cache_driver.py`): a damaged
library handed to the dynamic loader could kill the process. Unusable cache directories,
a compile killed by SIGKILL, concurrent processes, no compiler on PATH, and cache paths
given with `~`, relative, or through XDG_CACHE_HOME run in child processes too.

Tests run as root here, where a chmod'ed read-only directory can still be written: an
unusable directory is made with a regular file in its place, a path below a regular file,
or a path under /proc; a read-only warm cache with `chattr +i` (where that is permitted).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from inductor.runtime.disk_cache import DiskCache

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "_cache_driver.py"

#: Damages whose repair needs a rebuild (the library itself is not trusted).
_REBUILDS = ("library", "hash")


@pytest.fixture
def golden(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Where the driver puts warm caches of the test program (scale 3) and of another kernel
    (scale 5). NOTE: the driver compiles them itself: in a checkout where someone edits the
    code generator, a cache warmed by another process may hold other code."""
    return tmp_path / "golden-a", tmp_path / "golden-b"


def _drive(golden: tuple[pathlib.Path, pathlib.Path], cases: list[list[str]],
           env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    spec = {"cases": cases, "golden": str(golden[0]), "other": str(golden[1])}
    out = subprocess.run([sys.executable, str(DRIVER), json.dumps(spec)], capture_output=True,
                         text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, (out.returncode, out.stdout[-3000:], out.stderr[-3000:])
    results = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            results[result["case"]] = result
    assert set(results) == {c[0] for c in cases}, out.stdout
    return results


def _check_damage(damage: str, result: dict[str, Any]) -> None:
    kinds = {part.partition(":")[2] for part in damage.split("+")}
    rebuilds = bool(kinds & set(_REBUILDS))
    assert not result["mapped_damaged"], result
    assert result["compiles"] == (1 if rebuilds else 0), result
    assert result["compiles_again"] == 0 and result["warnings_again"] == [], result
    reported = [w for w in result["warnings"] if "damaged" in w]
    expected = len(kinds - {"lock"})
    assert len(reported) == expected and len(result["warnings"]) == expected, result


DEFAULT_DAMAGES = [
    "truncated:library",            # the SIGBUS of issue 15
    "code:library",                 # code damaged, key string intact: wrong results before
    "swapped:library",              # another kernel's library under this key
    "swapped_with_hash:library",    # ... with that library's hash record too
    "directory:library",
    "garbage:hash",
    "garbage:index",                # binary garbage: UnicodeDecodeError before
    "zeros:compiler",
    "directory:lock+truncated:library",
]
SLOW_DAMAGES = [
    f"{how}:{kind}"
    for kind in ("library", "hash", "index", "compiler")
    for how in ("truncated", "zeros", "garbage", "directory")
    if f"{how}:{kind}" not in DEFAULT_DAMAGES
] + ["garbage:lock", "truncated:hash+garbage:index+zeros:compiler"]


def _damage_cases(tmp_path: pathlib.Path, damages: list[str]) -> list[list[str]]:
    return [[d, d, str(tmp_path / f"case{i}")] for i, d in enumerate(damages)]


def test_damaged_entries_are_misses(golden: tuple[pathlib.Path, pathlib.Path],
                                    tmp_path: pathlib.Path) -> None:
    results = _drive(golden, _damage_cases(tmp_path, DEFAULT_DAMAGES))
    for damage in DEFAULT_DAMAGES:
        _check_damage(damage, results[damage])


@pytest.mark.slow
def test_damaged_entries_are_misses_every_kind(golden: tuple[pathlib.Path, pathlib.Path],
                                               tmp_path: pathlib.Path) -> None:
    results = _drive(golden, _damage_cases(tmp_path, SLOW_DAMAGES))
    for damage in SLOW_DAMAGES:
        _check_damage(damage, results[damage])


def test_unusable_cache_directories_compile_privately(
        golden: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path) -> None:
    regular = tmp_path / "a-file"
    regular.write_bytes(b"not a directory")
    cases = [["file in its place", "none", str(regular)],
             ["below a file", "none", str(regular / "cache")],
             ["under /proc", "none", f"/proc/inductor-cache-{os.getpid()}"]]
    results = _drive(golden, cases)
    for name, _, _ in cases:
        result = results[name]
        assert result["compiles"] == 1 and result["compiles_again"] == 0, result
        assert len(result["warnings"]) == 1 and "not usable" in result["warnings"][0], result
        assert result["warnings_again"] == [], result
    assert regular.read_bytes() == b"not a directory"


def test_read_only_warm_cache_is_used(golden: tuple[pathlib.Path, pathlib.Path],
                                      tmp_path: pathlib.Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i not permitted here: {made.stderr!r}")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    cache = tmp_path / "ro"
    try:
        result = _drive(golden, [["read-only", "readonly", str(cache)]])["read-only"]
        assert result["compiles"] == 0 and result["warnings"] == [], result
        assert result["compiles_again"] == 0 and result["warnings_again"] == [], result
        assert sorted(p.name for p in cache.iterdir()) == sorted(
            p.name for p in golden[0].iterdir())
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=False)


def _compiler_wrapper(tmp_path: pathlib.Path) -> pathlib.Path:
    """`tcxx`: g++ that appends a line to $CXX_LOG per compile; if $CXX_HANG is set, touches
    that file and hangs; if $CXX_GATE is set, touches $CXX_GATE.started and waits until
    $CXX_GATE exists."""
    real = shutil.which("g++")
    if real is None:
        pytest.skip("no g++ here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tcxx"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = --version ]; then exec {real} --version; fi
        echo "$$" >> "$CXX_LOG"
        if [ -n "$CXX_HANG" ]; then touch "$CXX_HANG"; sleep 600; fi
        if [ -n "$CXX_GATE" ]; then
            touch "$CXX_GATE.started"
            while [ ! -e "$CXX_GATE" ]; do sleep 0.05; done
        fi
        exec {real} "$@"
        """))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    from _cache_driver import run
    result = run({cache!r}, scale={scale!r})
    print("RESULT", result["compiles"], len(result["warnings"]))
""")


def _child(cache: pathlib.Path, env: dict[str, str], scale: float = 3.0,
           **popen: Any) -> subprocess.Popen[str]:
    code = _CHILD.format(here=str(HERE), cache=str(cache), scale=scale)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **popen)


def _finish(process: subprocess.Popen[str]) -> tuple[int, int]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, (out[-2000:], err[-3000:])
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
    _, compiles, warnings = line.split()
    return int(compiles), int(warnings)


def _env(tmp_path: pathlib.Path, wrapper: pathlib.Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "INDUCTOR_CXX": str(wrapper), "CXX_LOG": str(tmp_path / "cxx.log"),
            **extra}


def _compiler_runs(tmp_path: pathlib.Path) -> int:
    log = tmp_path / "cxx.log"
    return len(log.read_text().split()) if log.exists() else 0


def test_killed_compile_then_rerun(tmp_path: pathlib.Path) -> None:
    wrapper = _compiler_wrapper(tmp_path)
    cache = tmp_path / "cache"
    hang = tmp_path / "hanging"
    first = _child(cache, _env(tmp_path, wrapper, CXX_HANG=str(hang)), start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not hang.exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.05)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # NOTE: the child and its hanging compiler
        first.communicate()
    assert first.returncode == -signal.SIGKILL
    leftovers = [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]
    assert leftovers, "the killed compile left no temporary file to clean up"
    second = _child(cache, _env(tmp_path, wrapper))
    assert _finish(second) == (1, 0)
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]
    assert len(list(cache.glob("lib_*.so"))) == 1
    assert _finish(_child(cache, _env(tmp_path, wrapper))) == (0, 0)
    assert _compiler_runs(tmp_path) == 2  # NOTE: the killed one and the rebuild


def _blocked_on_flock(pid: int) -> bool:
    with open("/proc/locks") as f:
        return any("->" in line and f" {pid} " in line for line in f)


def test_second_process_waits_for_the_first_build(tmp_path: pathlib.Path) -> None:
    """A process compiling a library that another process is building waits for it (on the
    library's lock), then loads the first one's result: one compiler run in all."""
    wrapper = _compiler_wrapper(tmp_path)
    cache = tmp_path / "cache"
    gate = tmp_path / "gate"
    first = _child(cache, _env(tmp_path, wrapper, CXX_GATE=str(gate)))
    second = None
    try:
        _wait_for(lambda: pathlib.Path(f"{gate}.started").exists(), first)
        second = _child(cache, _env(tmp_path, wrapper))
        _wait_for(lambda: _blocked_on_flock(second.pid), second)  # type: ignore[union-attr]
        gate.touch()
        assert _finish(first) == (1, 0)
        assert _finish(second) == (0, 0)
    finally:
        gate.touch()
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    assert _compiler_runs(tmp_path) == 1


def _wait_for(condition: Any, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [4])
def test_concurrent_processes_compile_once(processes: int, tmp_path: pathlib.Path) -> None:
    wrapper = _compiler_wrapper(tmp_path)
    cache = tmp_path / "cache"
    children = [_child(cache, _env(tmp_path, wrapper)) for _ in range(processes)]
    results = [_finish(c) for c in children]
    assert sum(compiles for compiles, _ in results) == 1, results
    assert all(warnings == 0 for _, warnings in results), results
    assert _compiler_runs(tmp_path) == 1


def test_warm_cache_needs_no_compiler(tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "cache"
    assert _finish(_child(cache, dict(os.environ))) == (1, 0)
    no_compiler = tmp_path / "empty-bin"
    no_compiler.mkdir()
    env = {**os.environ, "PATH": str(no_compiler)}
    assert _finish(_child(cache, env)) == (0, 0)
    # NOTE: a kernel that is not cached cannot be built: a clear error, not a crash
    other = _child(cache, env, scale=5.0)
    _, err = other.communicate(timeout=600)
    assert other.returncode == 1 and "CompilerUnusable" in err and "'g++'" in err, err[-2000:]


_WHERE = textwrap.dedent("""
    import os, sys
    from inductor import config
    from inductor.runtime import cpp_build
    os.chdir(sys.argv[1])  # NOTE: a relative path was resolved when it was read
    print(config.options.cache_dir)
    print(cpp_build._cache().primary)
""")


@pytest.mark.parametrize("variable,value,expected", [
    ("INDUCTOR_CACHE_DIR", "~/kernels", "home/kernels"),
    ("INDUCTOR_CACHE_DIR", "rel/kernels", "work/rel/kernels"),
    ("XDG_CACHE_HOME", "{tmp}/xdg", "xdg/compiler/inductor"),
    pytest.param("COMPILER_CACHE_DIR", "~/root", "home/root/inductor", marks=pytest.mark.slow),
])
def test_cache_dir_resolution(variable: str, value: str, expected: str,
                              tmp_path: pathlib.Path) -> None:
    for name in ("home", "work", "elsewhere"):
        (tmp_path / name).mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("INDUCTOR_CACHE_DIR", "XDG_CACHE_HOME", "COMPILER_CACHE_DIR")}
    env.update({"HOME": str(tmp_path / "home"), variable: value.format(tmp=tmp_path)})
    out = subprocess.run([sys.executable, "-c", _WHERE, str(tmp_path / "elsewhere")],
                         capture_output=True, text=True, env=env, cwd=tmp_path / "work",
                         timeout=300, check=True)
    configured, opened = out.stdout.split()
    assert configured == opened == str(tmp_path / expected)
    assert (tmp_path / expected).is_dir()
    assert not (tmp_path / "work" / "~").exists()
    assert not any((tmp_path / "elsewhere").iterdir())


def test_size_limit_evicts_least_recently_used(tmp_path: pathlib.Path) -> None:
    cache = DiskCache(tmp_path, "test", logging.getLogger("test"))

    def produce(size: int) -> Any:
        return lambda out: out.write_bytes(os.urandom(size))

    paths = [cache.store(f"e{i}.so", f"k{i}", produce(400_000), 0) for i in range(3)]
    old = time.time() - 100
    for i, path in enumerate(paths):  # NOTE: e1 used last, e0 before it, e2 first
        os.utime(path.with_name(path.name + ".sha256"), (old + (2, 5, 1)[i],) * 2)
    newest = cache.store("e3.so", "k3", produce(400_000), 1_000_000)
    assert newest.exists()
    assert sorted(p.name for p in tmp_path.glob("e*.so")) == ["e1.so", "e3.so"]
    assert cache.lookup("e1.so", "k1") is not None and cache.lookup("e2.so", "k2") is None
    assert not (tmp_path / "e2.lock").exists()


def test_evicted_library_drops_its_index_records(tmp_path: pathlib.Path) -> None:
    from inductor.runtime import cpp_build

    cache = DiskCache(tmp_path, "test", logging.getLogger("test"),
                      on_evict=cpp_build._forget_index)
    cache.write_record("index", "kernel_a.f", "lib_a.so")
    cache.write_record("index", "kernel_b.f", "lib_b.so")
    old = cache.store("lib_a.so", "a", lambda out: out.write_bytes(os.urandom(600_000)), 0)
    os.utime(old.with_name(old.name + ".sha256"), (time.time() - 100,) * 2)
    cache.store("lib_b.so", "b", lambda out: out.write_bytes(os.urandom(600_000)), 1_000_000)
    assert not old.exists()
    assert cache.records("index") == ["kernel_b.f"]
    assert cache.read_record("index", "kernel_b.f") == "lib_b.so"
