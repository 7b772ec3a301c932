"""Shared pytest configuration for every package's tests.

PyPI has unrelated distributions named `guards`, `capture`, `inductor` and `compiler`;
if one of them were installed it could shadow ours, so every importable package of
ours must resolve into this repository's `packages/` folder (editable installs) or come from
our own distribution (`compiler-guards`, ... : the independence check installs them
non-editable into fresh virtual environments).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import pathlib

# NOTE: tests count traces and compiles in one process; compiled graphs that an earlier test
# (or an earlier run) left on disk would answer them instead. The warm-start tests turn the
# disk layer back on in the processes they start (tests/compiler/test_warm_start.py).
os.environ.setdefault("AOTGRAD_DISK_CACHE", "0")

_PACKAGES_DIR = pathlib.Path(__file__).resolve().parent.parent / "packages"
_DISTRIBUTIONS = {
    "guards": "compiler-guards",
    "capture": "compiler-capture",
    "aotgrad": "compiler-aotgrad",
    "inductor": "compiler-inductor",
    "compiler": "compiler-api",
}


def pytest_sessionstart(session: object) -> None:
    """Fail fast if an import name of ours resolves outside `packages/`."""
    providers = importlib.metadata.packages_distributions()
    for name, ours in _DISTRIBUTIONS.items():
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            # Not installed here (independence runs); a namespace package without origin is
            # just the tests/<name> folder seen through pytest's rootdir on sys.path.
            continue
        module = importlib.import_module(name)
        location = pathlib.Path(module.__file__ or "").resolve()
        if _PACKAGES_DIR in location.parents:
            continue
        dists = set(providers.get(name, []))
        if dists != {ours}:
            raise RuntimeError(
                f"import name {name!r} resolves to {location}, provided by {sorted(dists)}, "
                f"not by {ours!r} nor from {_PACKAGES_DIR}: an unrelated distribution is "
                "shadowing ours"
            )
