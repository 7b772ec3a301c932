"""Fail if any source module grows past the size budget (one concept per module).

Usage: python tools/check_sizes.py   (exit 1 if a module under packages/ exceeds 1500 lines;
modules over 800 lines are listed as warnings)
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
WARN_LINES = 800
FAIL_LINES = 1500


def main() -> int:
    too_big = []
    for path in sorted((ROOT / "packages").rglob("*.py")):
        lines = sum(1 for _ in path.open(encoding="utf-8"))
        rel = path.relative_to(ROOT)
        if lines > FAIL_LINES:
            too_big.append(f"{rel}: {lines} lines (limit {FAIL_LINES})")
        elif lines > WARN_LINES:
            print(f"warning: {rel}: {lines} lines (aim for under {WARN_LINES})")
    for line in too_big:
        print(f"error: {line}")
    return 1 if too_big else 0


if __name__ == "__main__":
    sys.exit(main())
