"""The guards package's options: declared once, typed, with an env var and help each.

Environment variables are read here only (at import, and again by `GuardsConfig.from_env`).
`patch(...)` overrides options within a block (tests, `reset`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Option:
    """One option: default value, environment variable and help text."""

    default: int
    env: str
    help: str
    #: Words the environment variable may hold instead of a number (word -> value).
    words: tuple[tuple[str, int], ...] = ()

    def parse(self, text: str) -> int:
        """The value the environment variable's text stands for (a number or a word)."""
        for word, value in self.words:
            if text.strip().lower() == word:
                return value
        return int(text)


OPTIONS: dict[str, Option] = {
    "cache_size_limit": Option(
        8, "GUARDS_CACHE_SIZE_LIMIT",
        "Entries kept per code object before the cache reports 'limit reached' and the "
        "caller should run eagerly."),
    "tensor_dispatch_keys": Option(
        1, "GUARDS_TENSOR_DISPATCH_KEYS",
        "1: TensorMatch.from_tensor records the dispatch key set, read on every check "
        "(about 0.3 us per tensor). 0: leave dispatch keys unchecked."),
    "native": Option(
        1, "GUARDS_NATIVE",
        "1: generated guards check tensors and global state with the native checker "
        "(C++, cached under GUARDS_CACHE_DIR or ~/.cache/compiler-guards; pure Python if it "
        "cannot be built). Without a cached build, it is built with g++ in a background "
        "process and guards compiled meanwhile stay pure Python. 2 (or 'sync'): the first "
        "guard waits for that build instead. 0: pure Python only.",
        words=(("sync", 2), ("off", 0))),
}


#: Values of the option `native`.
NATIVE_OFF, NATIVE_BACKGROUND, NATIVE_SYNC = 0, 1, 2


@dataclass(frozen=True, slots=True)
class GuardsConfig:
    """The guards options (see `OPTIONS` for help and env vars)."""

    cache_size_limit: int = OPTIONS["cache_size_limit"].default
    tensor_dispatch_keys: int = OPTIONS["tensor_dispatch_keys"].default
    native: int = OPTIONS["native"].default

    @staticmethod
    def from_env() -> GuardsConfig:
        """Defaults overridden by the options' environment variables."""
        values: dict[str, int] = {}
        for name, option in OPTIONS.items():
            text = os.environ.get(option.env)
            if text:
                values[name] = option.parse(text)
        return GuardsConfig(**values)


_current = GuardsConfig.from_env()


def get_config() -> GuardsConfig:
    """The options in effect now."""
    return _current


def list_options() -> dict[str, str]:
    """Option name -> one-line help."""
    return {name: option.help for name, option in OPTIONS.items()}


@contextlib.contextmanager
def patch(**changes: int) -> Iterator[GuardsConfig]:
    """Within the block, the given options take the given values."""
    global _current
    previous = _current
    _current = dataclasses.replace(previous, **changes)
    try:
        yield _current
    finally:
        _current = previous
