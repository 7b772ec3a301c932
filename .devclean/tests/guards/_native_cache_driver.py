"""Child process of test_native_cache_robustness.py: damages native-checker caches and loads.

A damaged shared object handed to the dynamic loader could kill the process (SIGBUS), so
these runs happen here, not in pytest. Usage: `python _native_cache_driver.py '<json>'` with
{"good": built checker, "golden": dir, "cases": [[case, damages, cache_dir], ...]}. The
compile step is replaced by a copy of the good checker (a real build takes a minute), so
a "build" here is a call of `compile_to`. For each case the golden cache (one build, made
by this process when first needed) is copied to `cache_dir`, files of it are damaged
("truncated:library+directory:lock"; "none": `cache_dir` as the test prepared it), and the
checker is loaded and run against the interpreter's answers; then loaded again. Prints one
JSON line per case: builds, warnings, whether a damaged file was ever mapped.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import guards.native
import torch
from guards import GuardBuilder, LocalSource, TensorMatch, interpret
from guards.native import build

_builds: list[str] = []


def _copying_compile_to(good: str) -> None:
    def compile_to(plan: build.BuildPlan, output: Path) -> None:
        _builds.append(str(output))
        shutil.copyfile(good, output)

    build.compile_to = compile_to  # type: ignore[assignment]  # see the module doc


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def check(module: Any) -> None:
    """The module answers like the interpreter, on several tensors."""
    assert guards.native._self_test(module) is None
    t = torch.randn(2, 3)
    tree = GuardBuilder().add(LocalSource("x"), TensorMatch.from_tensor(t)).build()
    spec = TensorMatch.from_tensor(t)
    checker = module.Checker([(type(t), t.dtype, t.device, t.layout, t.requires_grad,
                               tuple(t.shape), tuple(t.stride()),
                               torch._C._dispatch_keys(t).raw_repr())])
    for other in (t, torch.randn(2, 3), t.double(), t.t(), torch.randn(3, 2), t[:, :2]):
        expected = interpret(tree, {"x": other}, {}) is None
        assert checker.check(other) is expected, (other.shape, other.dtype, spec)


def load(cache: str) -> dict[str, Any]:
    """Load (or build) the checker in `cache`; builds and warnings counted."""
    before = len(_builds)
    handler = _Warnings()
    logging.getLogger("guards").addHandler(handler)
    try:
        module = build.build_and_load(Path(cache))
        plan = build.plan_build(Path(cache))
        assert module.BUILD_KEY == plan.key
        check(module)
    finally:
        logging.getLogger("guards").removeHandler(handler)
    return {"builds": len(_builds) - before, "warnings": handler.messages}


def _only(folder: Path, pattern: str) -> Path:
    (path,) = sorted(folder.glob(pattern))
    return path


def target(cache: Path, kind: str) -> Path:
    """The file of the given kind in a warm cache folder."""
    patterns = {"library": (".", "_guards_native-*.so"), "hash": (".", "*.so.sha256"),
                "compiler": ("compilers", "[0-9a-f]*"), "lock": (".", "*.lock")}
    folder, pattern = patterns[kind]
    return _only(cache / folder, pattern)


def _write(path: Path, data: bytes) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.write_bytes(data)


def _other_library() -> Path:
    """Another shared library, loadable but not the checker (as a swapped file would be): a
    standard-library extension module's file (no PyInit__guards_native); some Pythons link
    those in statically (no `__file__`), then torch's own extension."""
    for name in ("_csv", "_json", "_ctypes", "select", "torch._C"):
        file = getattr(importlib.import_module(name), "__file__", None)
        if file and file.endswith(".so"):
            return Path(file)
    raise RuntimeError("no extension module file to stand in for a swapped library")


OTHER_LIBRARY = _other_library()


def _record(key: str, data: bytes) -> bytes:
    import hashlib

    return f"v1 {key} {len(data)} {hashlib.sha256(data).hexdigest()}\n".encode()


def _warm(golden: Path) -> Path:
    if not golden.exists():
        load(str(golden))
    return golden


def damage(cache: Path, damage_kind: str) -> int | None:
    """Damage one file; returns the damaged file's inode (None if not a file)."""
    if damage_kind == "none":
        return None
    if damage_kind == "readonly":  # NOTE: root writes through chmod; not through +i
        subprocess.run(["chattr", "+i", str(cache)], check=True)
        return None
    how, _, kind = damage_kind.partition(":")
    path = target(cache, kind)
    data = path.read_bytes()
    key = path.name.split("-")[1].split(".")[0] if kind in ("library", "hash") else ""
    if how == "truncated":
        _write(path, data[: len(data) // 2])
    elif how == "zeros":
        _write(path, bytes(len(data)))
    elif how == "garbage":
        _write(path, b"\xff\xfe\x00garbage\x80" * 64)
    elif how == "code":  # NOTE: BUILD_KEY intact: only the hash can tell
        body = bytearray(data)
        for i in range(len(body) // 3, len(body) // 3 + 64):
            body[i] ^= 0x5A
        _write(path, bytes(body))
    elif how == "swapped":  # another library under the checker's name
        _write(path, OTHER_LIBRARY.read_bytes())
    elif how == "swapped_forged":  # ... with a hash record that matches it
        other = OTHER_LIBRARY.read_bytes()
        _write(path, other)
        _write(target(cache, "hash"), _record(key, other))
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
    _copying_compile_to(spec["good"])
    golden = Path(spec["golden"])
    for name, damage_kind, cache_dir in spec["cases"]:
        cache = Path(cache_dir)
        if damage_kind != "none":
            shutil.copytree(_warm(golden), cache)
        inodes = [damage(cache, one) for one in damage_kind.split("+")]
        print(f"CASE {name} started", flush=True)
        result = load(str(cache))
        result["mapped_damaged"] = bool({i for i in inodes if i is not None}
                                        & _mapped_inodes())
        again = load(str(cache))
        result["builds_again"] = again["builds"]
        result["warnings_again"] = again["warnings"]
        print("RESULT " + json.dumps({"case": name, **result}), flush=True)


if __name__ == "__main__":
    main()
