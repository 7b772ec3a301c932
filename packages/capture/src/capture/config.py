"""Capture's options: each declared once, typed, with its environment variable and help.

Environment variables are read only here (at import), and `patch()` scopes changes in tests.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Option:
    """Declaration of one option (the default lives on `CaptureConfig`)."""

    env: str
    help: str


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return default if raw is None else int(raw)


OPTIONS: dict[str, Option] = {
    "cache_size_limit": Option(
        "CAPTURE_CACHE_SIZE_LIMIT",
        "compiled entries per code object; past it, warn once and run that code eagerly",
    ),
    "suppress_errors": Option(
        "CAPTURE_SUPPRESS_ERRORS",
        "when a backend raises, warn and run eagerly instead of raising BackendCompilerFailed",
    ),
    "verbose": Option(
        "CAPTURE_VERBOSE",
        "print the FX graph, the guards and the original and transformed bytecode per frame",
    ),
    "log_recompiles": Option(
        "CAPTURE_LOG_RECOMPILES", "log every recompile with the failed guard's reason"
    ),
}


@dataclass(slots=True)
class CaptureConfig:
    """The mutable option values (one instance: `capture.config`)."""

    cache_size_limit: int = _env_int("CAPTURE_CACHE_SIZE_LIMIT", 8)
    suppress_errors: bool = _env_bool("CAPTURE_SUPPRESS_ERRORS", False)
    verbose: bool = _env_bool("CAPTURE_VERBOSE", False)
    log_recompiles: bool = _env_bool("CAPTURE_LOG_RECOMPILES", True)

    def list_options(self) -> dict[str, str]:
        """Option name -> one-line help."""
        return {name: opt.help for name, opt in OPTIONS.items()}

    def to_dict(self) -> dict[str, object]:
        """Current values."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @contextlib.contextmanager
    def patch(self, **changes: object) -> Iterator[None]:
        """Temporarily set options (`with config.patch(verbose=True): ...`)."""
        unknown = [name for name in changes if name not in OPTIONS]
        if unknown:
            raise KeyError(f"unknown capture option(s) {unknown}; valid: {sorted(OPTIONS)}")
        saved = {name: getattr(self, name) for name in changes}
        for name, value in changes.items():
            setattr(self, name, value)
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)


config = CaptureConfig()
