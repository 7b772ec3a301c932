"""Shared pytest configuration for every package's tests.

PyPI has unrelated distributions named `guards`, `capture`, `inductor` and `compiler`;
if one of them were installed it could shadow ours, so every importable package of
ours must resolve into this repository's `packages/` folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib

_PACKAGES_DIR = pathlib.Path(__file__).resolve().parent.parent / "packages"
_IMPORT_NAMES = ("guards", "capture", "aotgrad", "inductor", "compiler")


def pytest_sessionstart(session: object) -> None:
    """Fail fast if an import name of ours resolves outside `packages/`."""
    for name in _IMPORT_NAMES:
        if importlib.util.find_spec(name) is None:
            continue  # not installed in this environment (independence runs)
        module = importlib.import_module(name)
        location = pathlib.Path(module.__file__ or "").resolve()
        if _PACKAGES_DIR not in location.parents:
            raise RuntimeError(
                f"import name {name!r} resolves to {location}, not into {_PACKAGES_DIR}: "
                "an unrelated distribution is shadowing ours"
            )
