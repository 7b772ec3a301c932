"""The native checker's cache under damage: every run ends with right answers and no crash.

Damaged entries (truncated, zero-filled, garbage, swapped, a directory in place of a file)
of every kind of file in the cache run in a child process (`_native_cache_driver.py`): a
damaged shared object handed to the dynamic loader could kill the process. Builds are
copies of the checker built once (a real compile takes a minute): by a stand-in compile
step in the driver, or by a stand-in compiler script found through $CXX that reports the
real compiler's version (so the build key is the real one) and logs each compile.

Tests run as root here, where a chmod'ed read-only directory can still be written: an
unusable directory is made with a regular file in its place, a path below a regular file,
or a path under /proc; a read-only warm cache with `chattr +i` (where that is permitted).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from guards import config
from guards.native import build

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "_native_cache_driver.py"


@pytest.fixture(scope="module")
def good() -> pathlib.Path:
    """The built checker (built now in the default cache if needed), for the compiler the
    tests' processes use: `g++` (`_env` drops `$CXX`; a machine may set it to another)."""
    cxx = os.environ.pop("CXX", None)
    try:
        module = build.build_and_load()
    except build.NativeBuildError as exc:
        pytest.skip(f"native checker not built here: {exc}")
    finally:
        if cxx is not None:
            os.environ["CXX"] = cxx
    return pathlib.Path(str(module.__file__))


def _drive(good: pathlib.Path, tmp_path: pathlib.Path,
           cases: list[list[str]]) -> dict[str, dict[str, Any]]:
    spec = {"good": str(good), "golden": str(tmp_path / "golden"), "cases": cases}
    out = subprocess.run([sys.executable, str(DRIVER), json.dumps(spec)], capture_output=True,
                         text=True, timeout=600, check=False)
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
    rebuilds = bool(kinds & {"library", "hash"})
    if "swapped_forged" not in damage:  # NOTE: its forged hash matches: loaded, then refused
        assert not result["mapped_damaged"], result
    assert result["builds"] == (1 if rebuilds else 0), result
    assert result["builds_again"] == 0 and result["warnings_again"] == [], result
    expected = len(kinds - {"lock"})
    reported = [w for w in result["warnings"] if "damaged" in w]
    assert len(reported) == expected and len(result["warnings"]) == expected, result


DEFAULT_DAMAGES = [
    "truncated:library",            # the SIGBUS of issue 15
    "code:library",                 # damaged code, BUILD_KEY intact
    "swapped:library",              # another shared library in its place
    "swapped_forged:library",       # ... with a matching hash record: the import refuses it
    "directory:library",
    "garbage:hash",
    "zeros:compiler",
    "directory:lock+truncated:library",
]
SLOW_DAMAGES = [
    f"{how}:{kind}"
    for kind in ("library", "hash", "compiler")
    for how in ("truncated", "zeros", "garbage", "directory")
    if f"{how}:{kind}" not in DEFAULT_DAMAGES
] + ["garbage:lock", "truncated:hash+garbage:compiler"]


def test_damaged_entries_are_misses(good: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cases = [[d, d, str(tmp_path / f"case{i}")] for i, d in enumerate(DEFAULT_DAMAGES)]
    results = _drive(good, tmp_path, cases)
    for damage in DEFAULT_DAMAGES:
        _check_damage(damage, results[damage])


@pytest.mark.slow
def test_damaged_entries_are_misses_every_kind(good: pathlib.Path,
                                               tmp_path: pathlib.Path) -> None:
    cases = [[d, d, str(tmp_path / f"case{i}")] for i, d in enumerate(SLOW_DAMAGES)]
    results = _drive(good, tmp_path, cases)
    for damage in SLOW_DAMAGES:
        _check_damage(damage, results[damage])


def test_unusable_cache_directories_build_privately(good: pathlib.Path,
                                                    tmp_path: pathlib.Path) -> None:
    regular = tmp_path / "a-file"
    regular.write_bytes(b"not a directory")
    cases = [["file in its place", "none", str(regular)],
             ["below a file", "none", str(regular / "cache")],
             ["under /proc", "none", f"/proc/guards-cache-{os.getpid()}"]]
    results = _drive(good, tmp_path, cases)
    for name, _, _ in cases:
        result = results[name]
        assert result["builds"] == 1 and result["builds_again"] == 0, result
        assert len(result["warnings"]) == 1 and "not usable" in result["warnings"][0], result
        assert result["warnings_again"] == [], result
    assert regular.read_bytes() == b"not a directory"


def test_read_only_warm_cache_is_used(good: pathlib.Path, tmp_path: pathlib.Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i not permitted here: {made.stderr!r}")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    cache = tmp_path / "ro"
    try:
        result = _drive(good, tmp_path, [["read-only", "readonly", str(cache)]])["read-only"]
        assert result["builds"] == 0 and result["warnings"] == [], result
        assert result["builds_again"] == 0 and result["warnings_again"] == [], result
    finally:
        subprocess.run(["chattr", "-i", str(cache)], check=False)


# ---- processes: killed, concurrent, without a compiler -----------------------------------


def _stand_in_compiler(tmp_path: pathlib.Path, good: pathlib.Path) -> pathlib.Path:
    """A compiler found through $CXX: reports the real compiler's version; each compile
    appends a line to $CXX_LOG, then hangs if $CXX_HANG is set (touching it), waits for
    $CXX_GATE if set (touching $CXX_GATE.started), and copies the built checker to -o."""
    real = build.find_compiler()
    if real is None:
        pytest.skip("no C++ compiler here")
    script = tmp_path / "stand-in-g++"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = --version ]; then exec {real} --version; fi
        echo "$$" >> "$CXX_LOG"
        if [ -n "$CXX_HANG" ]; then touch "$CXX_HANG"; sleep 600; fi
        if [ -n "$CXX_GATE" ]; then
            touch "$CXX_GATE.started"
            while [ ! -e "$CXX_GATE" ]; do sleep 0.05; done
        fi
        out=""; prev=""
        for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done
        cp '{good}' "$out"
        """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _env(tmp_path: pathlib.Path, cxx: pathlib.Path | str | None, cache: pathlib.Path,
         **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "GUARDS_NATIVE")}
    env.update({"GUARDS_CACHE_DIR": str(cache), "CXX_LOG": str(tmp_path / "cxx.log"), **extra})
    if cxx is not None:
        env["CXX"] = str(cxx)
    return env


def _compiler_runs(tmp_path: pathlib.Path) -> int:
    log = tmp_path / "cxx.log"
    return len(log.read_text().split()) if log.exists() else 0


def _build_now(env: dict[str, str], **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "guards.native"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **popen)


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, (out[-2000:], err[-3000:])
    return out


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_killed_build_then_rerun(good: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cxx = _stand_in_compiler(tmp_path, good)
    cache = tmp_path / "cache"
    hang = tmp_path / "hanging"
    first = _build_now(_env(tmp_path, cxx, cache, CXX_HANG=str(hang)), start_new_session=True)
    try:
        _wait_for(hang.exists, first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # NOTE: the process and its hanging compiler
        first.communicate()
    assert first.returncode == -signal.SIGKILL
    assert [p for p in cache.iterdir() if p.name.endswith(".tmp")], "no temporary file left"
    out = _finish(_build_now(_env(tmp_path, cxx, cache)))
    assert "(built in" in out
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]
    assert "(already built; loaded" in _finish(_build_now(_env(tmp_path, cxx, cache)))
    assert _compiler_runs(tmp_path) == 2  # NOTE: the killed one and the rebuild


def _blocked_on_flock(pid: int) -> bool:
    with open("/proc/locks") as f:
        return any("->" in line and f" {pid} " in line for line in f)


def test_second_process_waits_for_the_first_build(good: pathlib.Path,
                                                  tmp_path: pathlib.Path) -> None:
    cxx = _stand_in_compiler(tmp_path, good)
    cache = tmp_path / "cache"
    gate = tmp_path / "gate"
    first = _build_now(_env(tmp_path, cxx, cache, CXX_GATE=str(gate)))
    second = None
    try:
        _wait_for(pathlib.Path(f"{gate}.started").exists, first)
        second = _build_now(_env(tmp_path, cxx, cache))
        waiting = second
        _wait_for(lambda: _blocked_on_flock(waiting.pid), waiting)
        gate.touch()
        _finish(first)
        _finish(second)
    finally:
        gate.touch()
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    assert _compiler_runs(tmp_path) == 1


@pytest.mark.slow
def test_four_processes_build_once(good: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cxx = _stand_in_compiler(tmp_path, good)
    cache = tmp_path / "cache"
    processes = [_build_now(_env(tmp_path, cxx, cache)) for _ in range(4)]
    for process in processes:
        _finish(process)
    assert _compiler_runs(tmp_path) == 1


_USE = textwrap.dedent("""
    import torch
    from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard
    from guards.native import load_native, native_status
    t = torch.randn(2, 3)
    tree = GuardBuilder().add(LocalSource('x'), TensorMatch.from_tensor(t)).build()
    module = load_native(wait=True)
    guard = compile_guard(tree)
    answers = [guard.fn({'x': v}, {}) for v in (t, torch.randn(2, 3), t.double(), t.t())]
    assert answers == [True, True, False, False], answers
    print(module is not None, guard.native, native_status().split(' ')[0])
""")


def test_warm_cache_needs_no_compiler(good: pathlib.Path, tmp_path: pathlib.Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(build, "compile_to", lambda plan, out: shutil.copyfile(good, out))
    monkeypatch.delenv("CXX", raising=False)
    assert build.build_and_load(cache).__file__  # NOTE: records the compiler ("g++")
    no_compiler = tmp_path / "empty-bin"
    no_compiler.mkdir()
    env = {**_env(tmp_path, None, cache), "PATH": str(no_compiler)}
    out = subprocess.run([sys.executable, "-c", _USE], capture_output=True, text=True,
                         env=env, timeout=300, check=True)
    assert out.stdout.split() == ["True", "True", "loaded"], out.stderr[-2000:]
    # NOTE: nothing cached and no compiler: pure Python guards (right answers), one warning
    env["GUARDS_CACHE_DIR"] = str(tmp_path / "empty-cache")
    out = subprocess.run([sys.executable, "-c", _USE], capture_output=True, text=True,
                         env=env, timeout=300, check=True)
    assert out.stdout.split() == ["False", "False", "unavailable:"], out.stderr[-2000:]
    assert out.stderr.count("native checker unavailable") == 1, out.stderr


_BACKGROUND = textwrap.dedent("""
    import torch
    from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard
    from guards.native import load_native, native_status
    t = torch.randn(2, 3)
    tree = GuardBuilder().add(LocalSource('x'), TensorMatch.from_tensor(t)).build()
    first = compile_guard(tree)  # NOTE: starts the background build
    print(native_status().split(' into ')[0])
    assert load_native(wait=True) is not None, native_status()
    later = compile_guard(tree)
    for guard in (first, later):
        answers = [guard.fn({'x': v}, {}) for v in (t, torch.randn(2, 3), t.double(), t.t())]
        assert answers == [True, True, False, False], answers
    print(first.native, later.native, native_status().split(' ')[0])
""")


def test_background_build_with_an_unusable_cache_dir(good: pathlib.Path,
                                                     tmp_path: pathlib.Path) -> None:
    cxx = _stand_in_compiler(tmp_path, good)
    regular = tmp_path / "a-file"
    regular.write_bytes(b"not a directory")
    out = subprocess.run([sys.executable, "-c", _BACKGROUND], capture_output=True, text=True,
                         env=_env(tmp_path, cxx, regular), timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["building", "in", "the", "background", "False", "True",
                                  "loaded"], (out.stdout, out.stderr[-2000:])
    assert out.stderr.count("is not usable") == 1, out.stderr
    assert "unavailable" not in out.stderr
    assert regular.read_bytes() == b"not a directory" and _compiler_runs(tmp_path) == 1


# ---- where the cache is ----------------------------------------------------------------


@pytest.mark.parametrize("variable,value,expected", [
    ("GUARDS_CACHE_DIR", "~/checker", "home/checker"),
    ("GUARDS_CACHE_DIR", "rel/checker", "work/rel/checker"),
    ("XDG_CACHE_HOME", "{tmp}/xdg", "xdg/compiler/guards"),
    ("XDG_CACHE_HOME", "relative-is-ignored", "home/.cache/compiler/guards"),
    ("COMPILER_CACHE_DIR", "~/root", "home/root/guards"),
])
def test_cache_dir_resolution(variable: str, value: str, expected: str, tmp_path: pathlib.Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GUARDS_CACHE_DIR", "XDG_CACHE_HOME", "COMPILER_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    monkeypatch.chdir(tmp_path / "work")
    assert config.native_cache_dir() == str(tmp_path / expected)
    assert build.cache_dir() == tmp_path / expected


def test_background_build_gets_an_absolute_cache_dir(tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The detached build runs in the cache folder: a relative path given to it would name
    another folder (issue 15: a relative GUARDS_CACHE_DIR was never found again)."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("GUARDS_CACHE_DIR", "rel")
    try:
        plan = build.plan_build()
    except build.NativeBuildError as exc:
        pytest.skip(f"no compiler: {exc}")
    command = build.background_command(plan)
    assert command[command.index("--cache-dir") + 1] == str(tmp_path / "work" / "rel")
    assert plan.path.parent == tmp_path / "work" / "rel"
