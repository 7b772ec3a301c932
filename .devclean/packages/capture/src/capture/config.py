"""Capture's options, declared with `guards.optionset` (the same pattern as every package's
`config.py`): name, type, default, environment variable and help each.

Environment variables are read here only, once at import. `options` holds the values in
effect (`capture.config.options.<name>`); `patch(...)` overrides options within a block.
The per-code cache size limit is a guards option (`guards.config`, `cache_size_limit`): the
guard cache owns it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from guards.optionset import OptionSet, option

__all__ = ["CaptureConfig", "declared", "list_options", "load", "options", "patch", "replace",
           "values"]


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """The capture options (see `list_options()` for help and env vars)."""

    suppress_errors: bool = option(
        False, env="CAPTURE_SUPPRESS_ERRORS",
        help="when a backend fails to compile a graph (or returns no callable), log the "
             "reason and run that graph eagerly instead of raising BackendCompilerFailed")
    verbose: bool = option(
        False, env="CAPTURE_VERBOSE",
        help="print the FX graph, the guards and the original and transformed bytecode per "
             "frame")
    log_recompiles: bool = option(
        True, env="CAPTURE_LOG_RECOMPILES",
        help="log every recompile with the failed guard's reason (INFO on the "
             "'capture.recompiles' logger)")
    frame_disk_cache: bool = option(
        True, env="CAPTURE_FRAME_DISK_CACHE",
        help="keep frames compiled without a graph break on disk (when a disk store is "
             "installed: `compiler` installs one, on with aotgrad's disk cache) and install "
             "them in a later process without capturing")


_set = OptionSet("capture", CaptureConfig, os.environ, globals())
#: The values in effect (`patch` rebinds this name).
options: CaptureConfig = _set.current

patch = _set.patch
list_options = _set.list_options
values = _set.values
declared = _set.declared
load = _set.load
replace = _set.replace
