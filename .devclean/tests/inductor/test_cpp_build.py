"""The on-disk kernel cache: reuse across processes, corrupt entries rebuilt, never loaded."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch
from aten_trace import trace_aten
from inductor import compile_aten, config
from inductor.runtime import cpp_build


def _compile(cache: pathlib.Path, scale: float = 3.0) -> torch.Tensor:
    x = torch.randn(50)
    gm = trace_aten(lambda t: torch.tanh(t * scale) + 1, [x])
    with config.patch(cache_dir=str(cache)):
        out = compile_aten(gm, [x])(x)[0]
    torch.testing.assert_close(out, torch.tanh(x * scale) + 1)
    return out


def _libraries(cache: pathlib.Path) -> list[pathlib.Path]:
    return sorted(cache.glob("lib_*.so"))


def _overwrite(path: pathlib.Path, data: bytes) -> None:
    """Put bad bytes at `path` as a new file: the old one stays mapped in this process
    (writing through it would crash the process that has the library loaded)."""
    tmp = path.with_suffix(".bad")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _compiles_in_fresh_process(cache: pathlib.Path, scale: float = 3.0) -> int:
    """Compile the test graph in a new process; return how many libraries it built."""
    here = pathlib.Path(__file__).resolve().parent
    script = textwrap.dedent(f"""
        import sys, pathlib
        sys.path.insert(0, {str(here)!r})
        import inductor.runtime.cpp_build as b
        calls = []
        original = b._compile
        b._compile = lambda *a: (calls.append(a), original(*a))
        from test_cpp_build import _compile
        _compile(pathlib.Path({str(cache)!r}), {scale!r})
        print("COMPILES", len(calls))
    """)
    env = dict(os.environ, INDUCTOR_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, check=True)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("COMPILES"))
    return int(line.split()[1])


def test_corrupt_library_is_rebuilt(tmp_path: pathlib.Path) -> None:
    cpp_build.clear_memory_cache()
    _compile(tmp_path)
    (lib,) = _libraries(tmp_path)
    _overwrite(lib, lib.read_bytes()[:100])  # a half-written file
    assert _compiles_in_fresh_process(tmp_path) == 1
    assert lib.stat().st_size > 1000
    assert _compiles_in_fresh_process(tmp_path) == 0


def test_library_with_wrong_key_is_rebuilt(tmp_path: pathlib.Path) -> None:
    cpp_build.clear_memory_cache()
    _compile(tmp_path / "a", 3.0)
    _compile(tmp_path / "b", 5.0)
    (lib_a,) = _libraries(tmp_path / "a")
    (lib_b,) = _libraries(tmp_path / "b")
    _overwrite(lib_a, lib_b.read_bytes())  # loads fine, but is not what the key says
    # NOTE: _compile checks the numbers, so the wrong library was not used.
    assert _compiles_in_fresh_process(tmp_path / "a", 3.0) == 1


def test_second_process_reuses_cache(tmp_path: pathlib.Path) -> None:
    cpp_build.clear_memory_cache()
    _compile(tmp_path)
    (lib,) = _libraries(tmp_path)
    before = lib.stat().st_mtime_ns
    assert _compiles_in_fresh_process(tmp_path) == 0
    assert lib.stat().st_mtime_ns == before


def test_a_changed_prelude_does_not_load_a_library_built_with_the_old_one(
        tmp_path: pathlib.Path) -> None:
    """Kernels find their library through an index keyed by their own text: the prelude
    they are built with is part of that key, so a kernel whose text is unchanged after the
    prelude changed (a fixed `ind_sign`) is built again, not served the old code."""
    x = torch.randn(50)
    # NOTE: a kernel no other test of this process has loaded (built here, indexed here)
    gm = trace_aten(lambda t: torch.atan(t * 1.25) - 7, [x])
    with config.patch(cache_dir=str(tmp_path)):
        compiled = compile_aten(gm, [x])
        kernel = compiled.kernels[0]
        assert cpp_build._from_index(kernel) is not None
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cpp_build, "PRELUDE", cpp_build.PRELUDE + "\n// another prelude\n")
            assert cpp_build._from_index(kernel) is None
        assert cpp_build._from_index(kernel) is not None
