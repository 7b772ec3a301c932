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
    LocalSource,
    TensorMatch,
    backend_scope,
    compile_guard,
    interpret,
)
from guards.native import build, load_native, native_status
from guards.native.plan import native_class, tensor_spec


def _module() -> ModuleType:
    module = load_native()
    if module is None:
        pytest.skip(f"native checker not built here: {native_status()}")
    return module


# ---- building, caching, falling back ---------------------------------------------------


def test_source_ships_as_package_data() -> None:
    assert b"PyInit__guards_native" in build.source_text()


def test_no_compiler_is_a_build_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(build.NativeBuildError, match="cannot run the C\\+\\+ compiler"):
        build.build_and_load(tmp_path, cxx=str(tmp_path / "no-such-g++"))


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
    assert [p.suffix for p in cache.iterdir()] == [".lock"]  # no .so, no temporary file


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`load_native()` as if never called in this process (restored afterwards)."""
    monkeypatch.setattr(guards.native, "_tried", False)
    monkeypatch.setattr(guards.native, "_module", None)
    monkeypatch.setattr(guards.native, "_status", "not loaded yet")
    yield


def test_unavailable_native_falls_back_once(fresh_loader: None, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    def fail(directory: object = None, cxx: object = None) -> ModuleType:
        raise build.NativeBuildError("no compiler here")

    monkeypatch.setattr(build, "build_and_load", fail)
    t = torch.randn(2)
    tree = GuardBuilder().add(LocalSource("x"), TensorMatch.from_tensor(t)).build()
    with caplog.at_level(logging.INFO, logger="guards"):
        first = compile_guard(tree, native=True)
        second = compile_guard(tree)
    assert not first.native and not second.native
    assert first.fn({"x": t}, {}) is True and first.fn({"x": t.double()}, {}) is False
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no compiler here" in warnings[0].getMessage()
    assert native_status() == "unavailable: no compiler here"


def test_self_test_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _module()  # NOTE: built and cached; loaded again below, then the self-test "fails"
    monkeypatch.setattr(guards.native, "_tried", False)
    monkeypatch.setattr(guards.native, "_module", None)
    monkeypatch.setattr(guards.native, "_status", guards.native._status)
    monkeypatch.setattr(guards.native, "_self_test", lambda module: "answered wrongly")
    assert load_native() is None
    assert native_status() == "unavailable: answered wrongly"


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
