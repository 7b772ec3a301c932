"""Warm starts (issue 15 point 3): a second process runs compiled graphs from the on-disk
compiled-graph cache without tracing, partitioning or planning kernels, with eager's results;
damaged or unusable entries are misses; another call signature or option is another entry.

Each run is a fresh process (`_warm_driver.py`): the in-process caches start empty there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DRIVER = Path(__file__).with_name("_warm_driver.py")
BACKENDS = ["aot_eager", "inductor"]


def run(backend: str, cache: Path, variant: str = "base") -> dict[str, Any]:
    request = {"backend": backend, "variant": variant, "cache": str(cache)}
    env = dict(os.environ, INDUCTOR_CACHE_DIR=str(cache), AOTGRAD_DISK_CACHE="1")
    env.pop("AOTGRAD_GRAPH_CACHE", None)
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(request)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "graphs").glob("graph_*.bin"))


@pytest.fixture(scope="module", params=BACKENDS)
def warm_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               ) -> tuple[str, Path, dict[str, Any]]:
    backend = str(request.param)
    cache = tmp_path_factory.mktemp(f"warm-{backend}")
    cold = run(backend, cache)
    return backend, cache, cold


def test_cold_process_writes_entries(warm_cache: tuple[str, Path, dict[str, Any]]) -> None:
    _backend, cache, cold = warm_cache
    assert cold["same"]
    assert "compile_training" in cold["traced"]
    # NOTE: the MLP's training graph, the function's training graph (inputs do not need
    # grad: an inference graph)
    assert cold["disk_stores"] == 2, cold
    assert cold["disk_hits"] == 0
    # NOTE: the two compiled graphs and the two frames that call them (compiler.frame_cache)
    assert len(entries(cache)) == 4


def test_warm_process_skips_tracing(warm_cache: tuple[str, Path, dict[str, Any]]) -> None:
    backend, cache, _ = warm_cache
    warm = run(backend, cache)
    assert warm["same"]
    assert warm["traced"] == [], warm  # nothing traced, partitioned or planned
    assert warm["disk_hits"] == 2 and warm["disk_misses"] == 0 and warm["disk_stores"] == 0


@pytest.mark.parametrize("variant", ["shape", "nograd", "options"])
def test_other_signature_or_options_is_another_entry(
        warm_cache: tuple[str, Path, dict[str, Any]], variant: str,
        tmp_path: Path) -> None:
    backend, cache, _ = warm_cache
    if variant == "options" and backend == "aot_eager":
        pytest.skip("fusion is an inductor option; aot_eager refuses it")
    private = tmp_path / "cache"
    _copy(cache, private)
    other = run(backend, private, variant)
    assert other["same"]
    # NOTE: under no_grad only the MLP's call differs (the function trains nothing)
    changed = 1 if variant == "nograd" else 2
    assert other["disk_hits"] == 2 - changed, other
    assert other["disk_misses"] == changed and other["disk_stores"] == changed
    assert len(other["traced"]) >= changed


def _copy(source: Path, target: Path) -> None:
    import shutil

    shutil.copytree(source, target, symlinks=True)


# NOTE: every damage for one backend (the store is the same for both); for inductor, the
# two ways an entry fails: its hash, or loading it.
DAMAGES = {"aot_eager": ["truncated", "zeros", "garbage", "rehashed-garbage", "directory"],
           "inductor": ["truncated", "rehashed-garbage"]}


@pytest.mark.parametrize("damage", DAMAGES["aot_eager"])
def test_damaged_entry_is_a_miss(warm_cache: tuple[str, Path, dict[str, Any]], damage: str,
                                 tmp_path: Path) -> None:
    backend, cache, _ = warm_cache
    if damage not in DAMAGES[backend]:
        pytest.skip(f"{damage} is tested with the other backend")
    private = tmp_path / "cache"
    _copy(cache, private)
    for path in entries(private):
        data = path.read_bytes()
        if damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif damage == "zeros":
            path.write_bytes(bytes(len(data)))
        elif damage == "garbage":
            path.write_bytes(os.urandom(len(data)))
        elif damage == "directory":
            path.unlink()
            path.mkdir()
        else:
            # NOTE: bytes that pass the hash check (the record rewritten to match) but do not
            # unpickle: the entry is discarded when loading fails
            import hashlib

            garbage = b"\x80\x05garbage" + os.urandom(64)
            path.write_bytes(garbage)
            record = path.with_name(path.name + ".sha256")
            fmt, key, _, _ = record.read_text().split()
            record.write_text(f"{fmt} {key} {len(garbage)} "
                              f"{hashlib.sha256(garbage).hexdigest()}\n")
    again = run(backend, private)
    assert again["same"]
    assert again["disk_hits"] == 0 and again["disk_stores"] == 2, again
    if damage == "rehashed-garbage":
        assert again["disk_errors"] == 2
    assert "damaged" in again["stderr"] or "cannot be loaded" in again["stderr"]
    if damage in ("truncated", "rehashed-garbage"):
        rebuilt = run(backend, private)
        assert rebuilt["same"] and rebuilt["disk_hits"] == 2 and rebuilt["traced"] == []
