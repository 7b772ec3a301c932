"""The native checker: building and caching, falling back, and meaning the same as Python.

Build tests use a temporary cache directory and, where a real compile would only cost time,
a stand-in `compile_to` that copies the shared object this process already loaded. Meaning
tests compare the native answer with the interpreter's on chosen cases (the random cases are
in test_guards_agreement.py). Tests that need the built checker skip, saying why, where it
cannot be built; the fallback tests run everywhere.
"""

from __future__ import annotations

import gc
import logging
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import guards.native
import pytest
import torch
from guards import (
    BackendMatch,
    EqualsMatch,
    GlobalStateMatch,
    GuardBuilder,
    GuardTree,
    LocalSource,
    TensorMatch,
    backend_scope,
    compile_guard,
    config,
    interpret,
)
from guards.config import NATIVE_BACKGROUND, NATIVE_SYNC
from guards.native import build, load_native, native_status
from guards.native.plan import native_class, tensor_spec


def _module() -> ModuleType:
    module = load_native(wait=True)
    if module is None:
        pytest.skip(f"native checker not built here: {native_status()}")
    return module


# ---- building, caching, falling back ---------------------------------------------------


def test_source_ships_as_package_data() -> None:
    assert b"PyInit__guards_native" in build.source_text()


def test_no_compiler_is_a_build_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(build.NativeBuildError, match="cannot run the C\\+\\+ compiler"):
        build.build_and_load(tmp_path, cxx=str(tmp_path / "no-such-g++"))


def _suffixes(cache: pathlib.Path) -> list[str]:
    """The suffixes of the files in a cache folder (the compilers' version records aside)."""
    return sorted(p.suffix for p in cache.iterdir() if p.name != "compilers")


def _fake_compiler(tmp_path: pathlib.Path) -> str:
    """A 'compiler' that reports a version and fails every compile."""
    script = tmp_path / "fake-g++"
    script.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "fake 1.0"; exit 0; fi\n'
                      'echo "fake: cannot compile" >&2\nexit 3\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_failed_compile_leaves_nothing_behind(tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(build.NativeBuildError, match="exit 3"):
        build.build_and_load(cache, cxx=_fake_compiler(tmp_path))
    assert _suffixes(cache) == [".lock"]  # no .so, no temporary file


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`load_native()` as if never called in this process (restored afterwards); a
    background build a test left running is stopped."""
    monkeypatch.setattr(guards.native, "_tried", False)
    monkeypatch.setattr(guards.native, "_module", None)
    monkeypatch.setattr(guards.native, "_status", "not loaded yet")
    monkeypatch.setattr(guards.native, "_build", None)
    yield
    pending = guards.native._build
    if pending is not None:
        if pending.process.poll() is None:
            os.killpg(pending.process.pid, signal.SIGTERM)  # its own session (our child)
        pending.process.wait(timeout=60)
        pending.log.close()


def _tensor_tree() -> tuple[torch.Tensor, GuardTree]:
    t = torch.randn(2)
    return t, GuardBuilder().add(LocalSource("x"), TensorMatch.from_tensor(t)).build()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "guards" and r.levelno == logging.WARNING]


@pytest.mark.parametrize("mode", [NATIVE_SYNC, NATIVE_BACKGROUND], ids=["sync", "background"])
def test_failed_build_falls_back_with_one_warning(
        mode: int, fresh_loader: None, tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("GUARDS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", _fake_compiler(tmp_path))
    t, tree = _tensor_tree()
    with caplog.at_level(logging.INFO, logger="guards"), config.patch(native=mode):
        first = compile_guard(tree)
        if mode == NATIVE_BACKGROUND:
            assert native_status().startswith("building in the background")
            assert load_native(wait=True) is None  # NOTE: the build is over, and failed
        second = compile_guard(tree)
        assert load_native() is None and load_native(wait=True) is None
    assert not first.native and not second.native
    for guard in (first, second):
        assert guard.fn({"x": t}, {}) is True and guard.fn({"x": t.double()}, {}) is False
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "fake: cannot compile" in warnings[0], warnings
    assert native_status().startswith("unavailable: ") and "exit 3" in native_status()
    assert _suffixes(tmp_path / "cache") == [".lock"]


@pytest.fixture
def native_file() -> pathlib.Path:
    """The built checker (built now if needed; the loader's state is left alone)."""
    try:
        module = build.build_and_load()
    except build.NativeBuildError as exc:
        pytest.skip(f"native checker not built here: {exc}")
    return pathlib.Path(str(module.__file__))


class GatedCompiler:
    """A stand-in compiler, to be found through $CXX: reports the real compiler's version
    (so the build key is the real one), notes that a compile started (and which process ran
    it), then waits until `release()` and copies the real built checker to its output."""

    def __init__(self, tmp_path: pathlib.Path, good: pathlib.Path) -> None:
        real = build.find_compiler()
        assert real is not None
        self.started = tmp_path / "started"
        self.gate = tmp_path / "gate"
        self.path = tmp_path / "gated-g++"
        version = build.compiler_version(real).replace("'", "")
        self.path.write_text(
            "#!/bin/sh\n"
            f"if [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\n"
            f"echo $PPID > '{self.started}'\n"
            "n=0\n"
            f"while [ ! -e '{self.gate}' ]; do sleep 0.05; n=$((n+1)); "
            "[ $n -gt 2400 ] && exit 4; done\n"
            'out=""; prev=""\n'
            'for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
            f"cp '{good}' \"$out\"\n")
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)

    def release(self) -> None:
        """Let the waiting (and every later) compile finish."""
        self.gate.touch()

    def wait_started(self, timeout: float = 120.0) -> int:
        """The pid of the process that ran the compile, once it started."""
        deadline = time.monotonic() + timeout
        while not (self.started.exists() and self.started.read_text().strip()):
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.05)
        return int(self.started.read_text())


def _gated(tmp_path: pathlib.Path, good: pathlib.Path,
           monkeypatch: pytest.MonkeyPatch) -> tuple[GatedCompiler, pathlib.Path]:
    """A gated compiler as $CXX and an empty cache directory as $GUARDS_CACHE_DIR."""
    compiler = GatedCompiler(tmp_path, good)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CXX", str(compiler.path))
    monkeypatch.setenv("GUARDS_CACHE_DIR", str(cache))
    assert build.import_extension(good, build.plan_build().key)  # NOTE: the keys agree
    return compiler, cache


def test_background_build_never_blocks(native_file: pathlib.Path, fresh_loader: None,
                                       tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, cache = _gated(tmp_path, native_file, monkeypatch)
    t, tree = _tensor_tree()
    with config.patch(native=NATIVE_BACKGROUND):
        first = compile_guard(tree)  # NOTE: returns although the compile cannot finish
        assert not first.native
        assert native_status().startswith("building in the background")
        compiler.wait_started()
        again = compile_guard(tree)
        assert not again.native and not compiler.gate.exists()
        assert not any(p.suffix == ".so" and not p.name.startswith(".")
                       for p in cache.iterdir())
        compiler.release()
        deadline = time.monotonic() + 120
        while load_native() is None:  # NOTE: never waits; picks the build up once done
            assert time.monotonic() < deadline, native_status()
            time.sleep(0.05)
        later = compile_guard(tree)
    assert later.native and not first.native  # NOTE: a guard compiled earlier stays Python
    for guard in (first, later):
        assert guard.fn({"x": t}, {}) is True and guard.fn({"x": t.double()}, {}) is False
    assert native_status() == f"loaded from {build.plan_build().path}"
    assert _suffixes(cache) == [".lock", ".sha256", ".so"]


def test_sync_mode_waits_for_the_build(native_file: pathlib.Path, fresh_loader: None,
                                       tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, _ = _gated(tmp_path, native_file, monkeypatch)
    t, tree = _tensor_tree()
    opened = threading.Timer(1.0, compiler.release)
    start = time.monotonic()
    opened.start()
    try:
        with config.patch(native=NATIVE_SYNC):
            guard = compile_guard(tree)
            waited = time.monotonic() - start
    finally:
        opened.cancel()
    assert guard.native and waited >= 1.0
    assert guard.fn({"x": t}, {}) is True and guard.fn({"x": t.double()}, {}) is False


def test_exit_while_building_leaves_no_partial_file(native_file: pathlib.Path,
                                                    tmp_path: pathlib.Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, cache = _gated(tmp_path, native_file, monkeypatch)
    code = (
        "import torch\n"
        "from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard\n"
        "from guards.native import native_status\n"
        "t = torch.randn(2)\n"
        "tree = GuardBuilder().add(LocalSource('x'), TensorMatch.from_tensor(t)).build()\n"
        "print(compile_guard(tree).native, native_status().split(' into ')[0])\n"
    )
    env = {**os.environ, "GUARDS_NATIVE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, timeout=120)
    assert out.stdout.split() == ["False", "building", "in", "the", "background"]
    builder = compiler.wait_started()  # NOTE: the detached build outlives the process
    try:
        assert not compiler.gate.exists()
        assert not any(p.suffix == ".so" and not p.name.startswith(".")
                       for p in cache.iterdir())
        compiler.release()
        deadline = time.monotonic() + 120
        while _running(builder):
            assert time.monotonic() < deadline, "the detached build did not finish"
            time.sleep(0.05)
    finally:
        if _running(builder):
            os.kill(builder, signal.SIGTERM)
    assert _suffixes(cache) == [".lock", ".sha256", ".so"]  # no temporary file
    plan = build.plan_build()
    assert build.import_extension(plan.path, plan.key).BUILD_KEY == plan.key


def _running(pid: int) -> bool:
    """Whether process `pid` (not our child) still runs; a zombie that nobody reaped (the
    parent exited) counts as over."""
    try:
        stat_line = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # NOTE: no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat_line.rpartition(")")[2].split()[0] not in ("Z", "X")


def test_cli_builds_and_says_where(native_file: pathlib.Path, tmp_path: pathlib.Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, cache = _gated(tmp_path, native_file, monkeypatch)
    compiler.release()
    command = [sys.executable, "-m", "guards.native"]
    first = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    path = build.plan_build().path
    assert first.stdout.startswith(f"guards: native checker {path} (built in ")
    assert compiler.started.exists()
    compiler.started.unlink()
    second = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    assert second.stdout.startswith(f"guards: native checker {path} (already built; loaded")
    assert not compiler.started.exists()  # NOTE: nothing compiled the second time
    assert _suffixes(cache) == [".lock", ".sha256", ".so"]


def test_cli_reports_a_failed_build(tmp_path: pathlib.Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUARDS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", _fake_compiler(tmp_path))
    out = subprocess.run([sys.executable, "-m", "guards.native"], capture_output=True,
                         text=True, check=False, timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert "unavailable" in out.stderr and "fake: cannot compile" in out.stderr


def test_stale_temporary_files_are_removed(tmp_path: pathlib.Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copying_compiler(monkeypatch)
    plan = build.plan_build(tmp_path)
    # NOTE: as a killed build leaves it (whatever its pid: the build of a key holds its lock)
    stale = tmp_path / f".{plan.path.name}.{os.getpid()}@host.0123456789ab.tmp"
    stale.write_bytes(b"half a file")
    assert build.build_and_load(tmp_path).BUILD_KEY == plan.key and len(calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        "compilers", plan.path.with_suffix(".lock").name, plan.path.name,
        plan.path.name + ".sha256"])


@pytest.mark.parametrize("wait", [True, False], ids=["wait", "no_wait"])
def test_self_test_failure_falls_back(wait: bool, native_file: pathlib.Path,
                                      fresh_loader: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # NOTE: the cached checker is loaded again, then the self-test "fails": final, with or
    # without waiting (no rebuild, no background build)
    monkeypatch.setattr(guards.native, "_self_test", lambda module: "answered wrongly")
    assert load_native(wait=wait) is None
    assert native_status() == "unavailable: answered wrongly"
    assert guards.native._build is None


def _copying_compiler(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> list[str]:
    """Replace the compile step by a copy of the loaded shared object; returns the list of
    outputs it was asked for."""
    good = _module().__file__
    assert good is not None
    calls: list[str] = []

    def compile_to(plan: build.BuildPlan, output: pathlib.Path) -> None:
        calls.append(str(output))
        time.sleep(delay)
        shutil.copyfile(good, output)

    monkeypatch.setattr(build, "compile_to", compile_to)
    return calls


def test_corrupt_cached_file_is_rebuilt(tmp_path: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copying_compiler(monkeypatch)
    plan = build.plan_build(tmp_path)
    plan.path.write_bytes(b"\x7fELF truncated")
    module = build.build_and_load(tmp_path)
    assert module.BUILD_KEY == plan.key and len(calls) == 1
    assert build.build_and_load(tmp_path).BUILD_KEY == plan.key
    assert len(calls) == 1  # NOTE: the rebuilt file is reused


def test_wrong_build_key_is_not_trusted() -> None:
    path = pathlib.Path(str(_module().__file__))
    with pytest.raises(build.NativeBuildError, match="built for key"):
        build.import_extension(path, "another-key")


def test_concurrent_builds_compile_once(tmp_path: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _copying_compiler(monkeypatch, delay=0.3)
    results: list[object] = []

    def load() -> None:
        try:
            results.append(build.build_and_load(tmp_path).BUILD_KEY)
        except Exception as exc:  # noqa: BLE001  # reported by the assert below
            results.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [build.plan_build(tmp_path).key] * 4
    assert len(calls) == 1


def test_env_var_disables_native(tmp_path: pathlib.Path) -> None:
    code = (
        "import torch\n"
        "from guards import GuardBuilder, LocalSource, TensorMatch, compile_guard\n"
        "import guards.native\n"
        "t = torch.randn(2)\n"
        "tree = GuardBuilder().add(LocalSource('x'), TensorMatch.from_tensor(t)).build()\n"
        "guard = compile_guard(tree)\n"
        "print(guard.native, guard.fn({'x': t}, {}), guards.native._tried)\n"
    )
    env = {**os.environ, "GUARDS_NATIVE": "0", "GUARDS_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.split() == ["False", "True", "False"]  # never even tried to build
    assert not any(tmp_path.iterdir())


# ---- which tensor checks go native -----------------------------------------------------


class _Plain(torch.Tensor):
    pass


class _Disabled(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl


class _OwnShape(torch.Tensor):
    @property
    def shape(self) -> torch.Size:  # type: ignore[override]
        return torch.Size([1])


class _OwnTorchFunction(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        return super().__torch_function__(func, types, args, kwargs or {})


class _Inherits(_OwnShape):
    pass


@pytest.mark.parametrize(("cls", "native"), [
    (torch.Tensor, True), (torch.nn.Parameter, True), (_Plain, True), (_Disabled, True),
    (_OwnShape, False), (_OwnTorchFunction, False), (_Inherits, False), (int, False)])
def test_native_classes(cls: type, native: bool) -> None:
    assert native_class(cls) is native


def test_checker_cycles_are_collected() -> None:
    module = _module()

    class Holder(torch.Tensor):
        pass

    spec = tensor_spec(TensorMatch.from_tensor(torch.randn(2).as_subclass(Holder)))
    assert spec is not None
    # NOTE: a cycle: the class holds the checker, which holds the class.
    Holder.checker = module.Checker([spec])  # type: ignore[attr-defined]
    ref = weakref.ref(Holder)
    del Holder, spec
    gc.collect()
    assert ref() is None


# ---- the same meaning as the interpreter -----------------------------------------------


def _neg(t: torch.Tensor) -> torch.Tensor:
    u = t.clone()
    torch._C._set_neg(u, True)
    return u


BASE = torch.randn(2, 3)
FIRST_FAILURES: list[tuple[str, Callable[[], torch.Tensor]]] = [
    ("type", lambda: torch.nn.Parameter(BASE.clone(), requires_grad=False)),
    ("dtype", lambda: BASE.double()),
    ("device", lambda: torch.empty(2, 3, device="meta")),
    ("layout", lambda: BASE.to_sparse()),
    ("requires_grad", lambda: BASE.clone().requires_grad_()),
    ("rank", lambda: BASE.reshape(6)),
    ("size", lambda: torch.randn(2, 4)),
    ("stride", lambda: torch.randn(3, 2).t()),
    ("dispatch keys", lambda: _neg(BASE)),
    ("dispatch keys", lambda: torch._efficientzerotensor(2, 3)),
]


@pytest.mark.parametrize(("kind", "make"), FIRST_FAILURES, ids=[k for k, _ in FIRST_FAILURES])
def test_first_failure_is_the_interpreters(kind: str, make: Callable[[], torch.Tensor]) -> None:
    check = TensorMatch.from_tensor(BASE, dispatch_keys=True)
    spec = tensor_spec(check)
    assert spec is not None
    checker = _module().Checker([spec])
    other = make()
    assert checker.first_failure(0, BASE) is None and checker.check(BASE) is True
    assert checker.first_failure(0, other) == kind and checker.check(other) is False
    tree = GuardBuilder().add(LocalSource("x"), check).build()
    failure = interpret(tree, {"x": other}, {})
    assert failure is not None and failure.reason.startswith(f"tensor L['x'] {kind} mismatch")


def test_dynamic_dims_and_size_one_strides() -> None:
    t = torch.randn(4, 1, 3)
    check = TensorMatch.from_tensor(t, dynamic_dims={0}, dispatch_keys=True)
    tree = GuardBuilder().add(LocalSource("x"), check).build()
    native = compile_guard(tree, native=True)
    python = compile_guard(tree, native=False)
    if not native.native:
        pytest.skip(f"native checker not built here: {native_status()}")
    cases = [torch.randn(9, 1, 3), torch.randn(64).as_strided((5, 1, 3), (3, 7, 1)),
             torch.randn(0, 1, 3), torch.randn(9, 2, 3), torch.randn(3, 9).t().reshape(9, 1, 3),
             torch.randn(3, 5).t().unsqueeze(1), torch.randn(1, 3).expand(6, 3).unsqueeze(1)]
    for x in cases:
        expected = interpret(tree, {"x": x}, {}) is None
        assert native.fn({"x": x}, {}) is expected
        assert python.fn({"x": x}, {}) is expected


def _state_backend() -> object:
    return object()


@pytest.fixture
def restore_state() -> Iterator[None]:
    dtype = torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(deterministic)


def test_global_state_and_backend(restore_state: None) -> None:
    _module()
    backend = _state_backend()
    other = _state_backend()
    b = GuardBuilder().add_global(GlobalStateMatch.current()).add_global(BackendMatch.of(backend))
    b.add(LocalSource("n"), EqualsMatch(1))
    tree = b.build()
    native = compile_guard(tree, ["n"], native=True)
    python = compile_guard(tree, ["n"], native=False)
    assert native.native and not python.native

    def answers() -> tuple[bool, ...]:
        L: dict[str, object] = {"n": 1}
        assert native.fn_args is not None
        return (native.fn(L, {}), native.fn_args(1, {}), python.fn(L, {}),
                interpret(tree, L, {}) is None)

    assert answers() == (False,) * 4  # NOTE: no backend active
    with backend_scope(backend):
        assert answers() == (True,) * 4
        with torch.no_grad():
            assert answers() == (False,) * 4
        torch.set_default_dtype(torch.float64)
        assert answers() == (False,) * 4
        torch.set_default_dtype(torch.float32)
        torch.use_deterministic_algorithms(True)
        assert answers() == (False,) * 4
        torch.use_deterministic_algorithms(False)
        with torch.autocast("cpu"):
            assert answers() == (False,) * 4
        with backend_scope(other):
            assert answers() == (False,) * 4
        assert answers() == (True,) * 4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = GuardBuilder().add_global(GlobalStateMatch.current()).build()
        guard = compile_guard(inside, native=True)
        assert guard.native and guard.fn({}, {}) is True
    with torch.autocast("cpu", dtype=torch.float16):
        assert guard.fn({}, {}) is False
        failure = interpret(inside, {}, {})
        assert failure is not None and "autocast dtype changed" in failure.reason
    assert guard.fn({}, {}) is False
