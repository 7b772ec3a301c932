"""The guards package's options, declared with `guards.optionset` (the same pattern as every
package's `config.py`): name, type, default, environment variable and help each.

Environment variables are read here only, once at import. `options` holds the values in
effect (read it as `config.options.<name>`); `patch(...)` overrides options within a block.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from guards.optionset import OptionSet, option

__all__ = ["GuardsConfig", "declared", "list_options", "load", "options", "patch", "replace",
           "values"]

#: Values of the option `native`.
NATIVE_OFF, NATIVE_BACKGROUND, NATIVE_SYNC = 0, 1, 2
_NATIVE_WORDS = {"sync": NATIVE_SYNC, "off": NATIVE_OFF}


def _parse_native(text: str) -> int:
    word = text.strip().lower()
    return _NATIVE_WORDS[word] if word in _NATIVE_WORDS else int(text)


@dataclass(frozen=True, slots=True)
class GuardsConfig:
    """The guards options (see `list_options()` for help and env vars)."""

    cache_size_limit: int = option(
        8, env="GUARDS_CACHE_SIZE_LIMIT",
        help="compiled entries kept per code object; past it, the cache reports 'limit "
             "reached', and capture warns once and runs that code eagerly")
    tensor_dispatch_keys: int = option(
        1, env="GUARDS_TENSOR_DISPATCH_KEYS",
        help="1: TensorMatch.from_tensor records the dispatch key set, read on every check "
             "(about 0.3 us per tensor). 0: leave dispatch keys unchecked")
    native: int = option(
        1, env="GUARDS_NATIVE", parse=_parse_native,
        help="1: generated guards check tensors and global state with the native checker "
             "(C++, cached under GUARDS_CACHE_DIR, else $XDG_CACHE_HOME/compiler/guards or "
             "~/.cache/compiler/guards; pure Python if "
             "it cannot be built), built with g++ in a background process meanwhile guards "
             "stay pure Python. 2 (or 'sync'): the first guard waits for that build. "
             "0 (or 'off'): pure Python only")
    snapshots: int = option(
        1, env="GUARDS_SNAPSHOTS",
        help="1: with the native checker, the state of objects pinned by identity (modules: "
             "hooks, attributes, children, parameters) is checked by dict versions (one native "
             "call) instead of reading every attribute per call; a changed version runs the "
             "full guard. 0: always read every attribute")
    native_cache_size_limit_mb: int = option(
        256, env="GUARDS_NATIVE_CACHE_SIZE_LIMIT_MB",
        help="size of the native checker's cache (one build per torch, Python and compiler) "
             "beyond which least-recently-used builds are removed (0: no limit)")


_set = OptionSet("guards", GuardsConfig, os.environ, globals())
#: The values in effect (`patch` rebinds this name).
options: GuardsConfig = _set.current

patch = _set.patch
list_options = _set.list_options
values = _set.values
declared = _set.declared
load = _set.load
replace = _set.replace


def native_cache_dir() -> str:
    """The native checker's cache folder: `$GUARDS_CACHE_DIR`, else
    `$COMPILER_CACHE_DIR/guards`, else `$XDG_CACHE_HOME/compiler/guards` or
    `~/.cache/compiler/guards` (`~` expanded, made absolute). NOTE: read at every call, not
    at import: `python -m guards.native` and tests set these variables late."""
    configured = os.environ.get("GUARDS_CACHE_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    root = os.environ.get("COMPILER_CACHE_DIR")
    if root:
        return os.path.join(os.path.abspath(os.path.expanduser(root)), "guards")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # NOTE: the XDG spec says a relative XDG_CACHE_HOME is invalid and is ignored
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "compiler", "guards")


def native_compiler() -> str:
    """The C++ compiler of the native checker: `$CXX`, else `g++` (read at every call)."""
    return os.environ.get("CXX") or "g++"
