"""guards and inductor each carry the on-disk cache module (they share no dependency): the
two copies must stay the same, apart from the line that names the other copy."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
COPIES = (ROOT / "packages/guards/src/guards/native/disk_cache.py",
          ROOT / "packages/inductor/src/inductor/runtime/disk_cache.py")


def test_disk_cache_copies_agree() -> None:
    guards_copy, inductor_copy = (path.read_text().splitlines() for path in COPIES)
    assert len(guards_copy) == len(inductor_copy)
    differing = [(a, b) for a, b in zip(guards_copy, inductor_copy) if a != b]
    guards_line = ("NOTE: inductor/runtime/disk_cache.py is the same module (the packages do "
                   "not depend on each")
    inductor_line = ("NOTE: guards/native/disk_cache.py is the same module (the packages do "
                     "not depend on each")
    assert differing == [(guards_line, inductor_line)], differing
