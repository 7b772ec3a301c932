"""Precompiled modules and portable caches (issue 15 point 4): an artifact saved by one
process runs in a fresh one without capture, tracing or compiling, with the compiled model's
results; a call, module or environment it was not made for is refused, never run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import compiler
import pytest
import torch
from aotgrad import serialize
from compiler.precompile import PrecompiledGuardError

DRIVER = Path(__file__).with_name("_precompile_driver.py")


def run(request: dict[str, Any], cache: Path, path_env: str | None = None) -> dict[str, Any]:
    env = dict(os.environ, INDUCTOR_CACHE_DIR=str(cache), AOTGRAD_DISK_CACHE="1")
    if path_env is not None:
        env["PATH"] = path_env
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(request)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _no_compiler_path(tmp: Path) -> str:
    """A PATH without a C++ compiler (only the Python interpreter's folder)."""
    folder = tmp / "bin"
    folder.mkdir()
    return str(folder)


@pytest.mark.parametrize(("backend", "train"), [("inductor", False), ("inductor", True),
                                                ("aot_eager", True)])
def test_precompiled_module_runs_in_a_fresh_process(backend: str, train: bool,
                                                    tmp_path: Path) -> None:
    artifact = str(tmp_path / "block.precompiled")
    run({"mode": "save", "path": artifact, "backend": backend, "train": train},
        tmp_path / "cache-a")
    # NOTE: another, empty cache folder and no compiler on PATH: the kernels travel in the
    # artifact, nothing is built
    loaded = run({"mode": "load", "path": artifact, "train": train}, tmp_path / "cache-b",
                 path_env=_no_compiler_path(tmp_path))
    assert loaded["traced"] == []
    assert loaded["same_as_compiled"] and loaded["same_as_eager"]
    assert "another call signature" in loaded["other_shape_refused"]


def _artifact(backend: str = "aot_eager") -> tuple[torch.nn.Module, bytes]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    return net, compiler.precompile(net, (torch.ones(2, 4),), backend=backend).to_bytes()


def _edit_header(data: bytes, **changes: Any) -> bytes:
    state = serialize.loads(data)
    state["header"]["environment"] = {**state["header"]["environment"], **changes}
    return serialize.dumps(state)


def test_other_versions_are_refused() -> None:
    net, data = _artifact()
    for change in ({"torch": "2.0.0"}, {"source:aotgrad": "0" * 16}, {"cpu": "other"},
                   {"machine": "Linux riscv64"}):
        with pytest.raises(PrecompiledGuardError, match="another environment") as info:
            compiler.load_precompiled(_edit_header(data, **change), net)
        assert next(iter(change)) in str(info.value)


def test_guards_refuse_other_calls_and_modules() -> None:
    net, data = _artifact()
    run = compiler.load_precompiled(data, net)
    x = torch.ones(2, 4)
    assert torch.allclose(run(x), net(x))
    with torch.no_grad(), pytest.raises(PrecompiledGuardError, match="training"):
        run(x)  # compiled for training (parameters require grad, grad mode on)
    for bad in (torch.ones(3, 4), torch.ones(2, 4, dtype=torch.float64),
                torch.ones(4, 2).t()):
        with pytest.raises(PrecompiledGuardError, match="another call signature"):
            run(bad)
    net.eval()
    with pytest.raises(PrecompiledGuardError):
        run(x)
    other = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    with pytest.raises(PrecompiledGuardError, match="differs from the precompiled"):
        compiler.load_precompiled(data, other)
    with pytest.raises(PrecompiledGuardError, match="not a precompiled module"):
        compiler.load_precompiled(b"garbage", net)


def test_forward_that_changes_attributes_is_refused() -> None:
    class Counting(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return x * 2

    with pytest.raises(PrecompiledGuardError, match="changes the module's attributes"):
        compiler.precompile(Counting(), (torch.ones(2),), backend="aot_eager")


def test_cache_artifacts_move_a_warm_cache(tmp_path: Path) -> None:
    blob = str(tmp_path / "artifacts.zip")
    run({"mode": "artifacts-save", "path": blob, "backend": "inductor", "train": True},
        tmp_path / "cache-a")
    loaded = run({"mode": "artifacts-load", "path": blob, "backend": "inductor",
                  "train": True}, tmp_path / "cache-b", path_env=_no_compiler_path(tmp_path))
    assert loaded["written"] > 0
    assert loaded["same_as_eager"] and loaded["disk_hits"] == 1 and loaded["traced"] == []


def test_cache_artifacts_of_another_environment_are_refused(tmp_path: Path) -> None:
    import io
    import zipfile

    from inductor import config

    with config.patch({"cache_dir": str(tmp_path / "cache")}):
        data = compiler.save_cache_artifacts()
    archive = zipfile.ZipFile(io.BytesIO(data))
    manifest = serialize.loads(archive.read("MANIFEST"))
    manifest["environment"]["python"] = "2.7"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as rewritten:
        rewritten.writestr("MANIFEST", serialize.dumps(manifest))
    with pytest.raises(PrecompiledGuardError, match="python"):
        compiler.load_cache_artifacts(out.getvalue())
    with pytest.raises(PrecompiledGuardError, match="not cache artifacts"):
        compiler.load_cache_artifacts(b"garbage")
