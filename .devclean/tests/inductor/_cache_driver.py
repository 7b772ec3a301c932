"""Child process of test_cache_robustness.py: damages kernel-cache folders and compiles.

A damaged library that reached the dynamic loader could kill the process (SIGBUS), so these
runs happen here, not in pytest. Usage: `python _cache_driver.py '<json>'` with
{"cases": [[case, damages, cache_dir], ...], "golden": dir, "other": dir}: for each case the
golden cache (the test program compiled once, by this process when first needed: the code
generator's output must be the same as in the cases) is copied to `cache_dir`, files of it are
damaged ("truncated:library+directory:lock"), and the program is compiled and run against
eager three times with new inputs; then again (the rebuilt entry must be reused). Damages
"none" use `cache_dir` as it is (an unusable folder the test prepared). Prints one JSON line
per case: compiles, warnings, whether a damaged file was ever mapped into the process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from aten_trace import trace_aten
from inductor import compile_aten, config
from inductor.runtime import cpp_build

SCALE = 3.0


def program(t: torch.Tensor, scale: float = SCALE) -> torch.Tensor:
    """The test program: one pointwise kernel."""
    return torch.tanh(t * scale) + 1


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run(cache: str, scale: float = SCALE) -> dict[str, Any]:
    """Compile `program` into `cache` (nothing kept in memory from earlier runs), call it
    three times on new inputs against eager; the number of compiler runs and warnings."""
    cpp_build.clear_memory_cache()
    compiles: list[object] = []
    original = cpp_build._compile

    def counting(*args: Any) -> None:
        compiles.append(args)
        original(*args)

    cpp_build._compile = counting  # type: ignore[assignment]  # counted in this process
    handler = _Warnings()
    logging.getLogger("inductor").addHandler(handler)
    try:
        x = torch.randn(50)
        gm = trace_aten(lambda t: program(t, scale), [x])
        with config.patch(cache_dir=cache):
            compiled = compile_aten(gm, [x])
        for i in range(3):
            t = torch.randn(50) * (i + 1)
            torch.testing.assert_close(compiled(t)[0], program(t, scale))
    finally:
        cpp_build._compile = original  # type: ignore[assignment]
        logging.getLogger("inductor").removeHandler(handler)
    return {"compiles": len(compiles), "warnings": handler.messages}


def _only(folder: Path, pattern: str) -> Path:
    (path,) = sorted(folder.glob(pattern))
    return path


def target(cache: Path, kind: str) -> Path:
    """The file of the given kind in a warm cache folder."""
    if kind == "library":
        return _only(cache, "lib_*.so")
    if kind == "hash":
        return _only(cache, "lib_*.so.sha256")
    if kind == "index":
        return _only(cache / "index", "kernel_*")
    if kind == "compiler":
        return _only(cache / "compilers", "[0-9a-f]*")
    if kind == "lock":
        return _only(cache, "lib_*.lock")
    raise ValueError(kind)


def _write(path: Path, data: bytes) -> None:
    """New bytes at `path` as a new file (as another process or a crash would leave it)."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.write_bytes(data)


def _warm(cache: Path, scale: float) -> Path:
    """`cache` with the program of `scale` compiled into it (once)."""
    if not cache.exists():
        assert run(str(cache), scale)["compiles"] == 1
    return cache


def damage(cache: Path, damage_kind: str, other: Path) -> int | None:
    """Damage one file; returns the damaged file's inode (None if not a file)."""
    if damage_kind in ("none", "readonly"):
        if damage_kind == "readonly":  # NOTE: root writes through chmod; not through +i
            subprocess.run(["chattr", "+i", str(cache)], check=True)
        return None
    how, _, kind = damage_kind.partition(":")
    path = target(cache, kind)
    data = path.read_bytes()
    if how == "truncated":
        _write(path, data[: len(data) // 2])
    elif how == "zeros":
        _write(path, bytes(len(data)))
    elif how == "garbage":
        _write(path, b"\xff\xfe\x00garbage\x80" * 64)
    elif how == "code":  # NOTE: the key string is intact: only the hash can tell
        body = bytearray(data)
        # flip bytes in the middle of the file, away from the ELF headers
        for i in range(len(body) // 3, len(body) // 3 + 64):
            body[i] ^= 0x5A
        _write(path, bytes(body))
    elif how == "swapped":  # another kernel's library under this key's name
        _write(path, target(_warm(other, 5.0), kind).read_bytes())
    elif how == "swapped_with_hash":  # ... and its hash record too
        _write(path, target(_warm(other, 5.0), "library").read_bytes())
        record = target(cache, "hash")
        _write(record, target(other, "hash").read_bytes())
    elif how == "directory":
        path.unlink()
        path.mkdir()
        (path / "inside").write_text("x")
        return None
    else:
        raise ValueError(how)
    # NOTE: a second link keeps the damaged inode's number from being reused by the rebuild
    os.link(path, cache.parent / f"{cache.name}-damaged-{kind}")
    return path.stat().st_ino


def _mapped_inodes() -> set[int]:
    inodes = set()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and fields[4].isdigit():
                inodes.add(int(fields[4]))
    return inodes


def main() -> None:
    """Run the cases given as JSON in argv[1] (see the module doc)."""
    spec = json.loads(sys.argv[1])
    golden = Path(spec["golden"])
    other = Path(spec["other"])
    for name, damage_kind, cache_dir in spec["cases"]:
        cache = Path(cache_dir)
        if damage_kind != "none":
            shutil.copytree(_warm(golden, SCALE), cache)
        inodes = [damage(cache, one, other) for one in damage_kind.split("+")]
        print(f"CASE {name} started", flush=True)
        result = run(str(cache))
        result["mapped_damaged"] = bool({i for i in inodes if i is not None}
                                        & _mapped_inodes())
        again = run(str(cache))  # NOTE: the rebuilt entry is reused
        result["compiles_again"] = again["compiles"]
        result["warnings_again"] = again["warnings"]
        print("RESULT " + json.dumps({"case": name, **result}), flush=True)


if __name__ == "__main__":
    main()
