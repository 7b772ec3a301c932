"""Run `mypy --strict` on every package, one package at a time.

Usage: python tools/typecheck.py [package ...]   (default: all five)
Exits non-zero if any package has a type error.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {
    "guards": "packages/guards/src",
    "capture": "packages/capture/src",
    "aotgrad": "packages/aotgrad/src",
    "inductor": "packages/inductor/src",
    "compiler": "packages/compiler-api/src",
}


def main(argv: list[str]) -> int:
    names = argv or list(PACKAGES)
    failed = []
    for name in names:
        src = ROOT / PACKAGES[name]
        print(f"== mypy --strict {name}", flush=True)
        cmd = [sys.executable, "-m", "mypy", "--strict", "--config-file",
               str(ROOT / "pyproject.toml"), str(src / name)]
        if subprocess.run(cmd, cwd=ROOT, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"mypy --strict failed for: {', '.join(failed)}")
        return 1
    print(f"mypy --strict passed for: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
