"""The native checker: tensor, global-state and backend checks of a generated guard in C++.

`load_native()` returns the extension module, or None when it is not available (yet): then
generated guards stay pure Python. The module's `Checker(tensors, state, backend)` holds the
expected properties; `Checker.check(t0, t1, ...)` checks them all in one call (see
`checker.cpp`, and `plan.py` for which checks go native). Importing this package does not
import torch or build anything. Disable with `GUARDS_NATIVE=0` (option `native`).

A cached build (see `build.py`) is loaded at the first call (about 0.1 s). Without one, the
first call starts the build in a detached background process and returns None at once; each
later call checks without waiting whether it is over (`poll`, a few microseconds) and then
loads the result. `load_native(wait=True)`, or the option `native=2` (`GUARDS_NATIVE=sync`),
waits for the build instead. Any failure (no compiler, compile error, self-test) logs one
warning on logger `guards` and is never raised: guards stay pure Python.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guards.native.build import BackgroundBuild

LOG = logging.getLogger("guards")

_lock = threading.Lock()
_module: ModuleType | None = None
_status = "not loaded yet"
#: Whether the outcome is known (`_module` set, or the failure logged): nothing more to do.
_tried = False
#: The build running in the background, if any.
_build: BackgroundBuild | None = None


def _self_test(module: ModuleType) -> str | None:
    """None if the module answers a few known cases right, else what went wrong."""
    import torch

    # NOTE: not torch.randn: loading the checker must not move the user's RNG state.
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    keys = torch._C._dispatch_keys(t).raw_repr()
    checker = module.Checker(
        [(torch.Tensor, t.dtype, t.device, torch.strided, False, (2, 3), (3, 1), keys)])
    negative = t.clone()
    torch._C._set_neg(negative, True)
    answers = (checker.check(t), checker.check(t.t()), checker.check(negative),
               checker.first_failure(0, t.double()), checker.first_failure(0, negative))
    expected = (True, False, False, "dtype", "dispatch keys")
    return None if answers == expected else f"self-test answered {answers}, not {expected}"


def load_native(wait: bool | None = None) -> ModuleType | None:
    """The native module, loaded once per process; None if it is unavailable or not built
    yet. `wait`: True waits for a build, False never does (a cached build is still loaded),
    None follows the option `native` (2 waits). Never raises."""
    if _tried:
        return _module
    if wait is None:
        from guards import config
        from guards.config import NATIVE_SYNC

        wait = config.options.native == NATIVE_SYNC
    # NOTE: a caller that must not wait does not queue behind another thread's build either.
    if not _lock.acquire(blocking=wait):
        return _module
    try:
        if not _tried:
            _advance(wait)
    finally:
        _lock.release()
    return _module


def _advance(wait: bool) -> None:
    """One step towards an outcome (under `_lock`): load the cached build, start the
    background build, notice that it ended, or (with `wait`) build and load now."""
    global _build, _status
    from guards.native import build

    try:
        if _build is not None:
            if not wait and not _build.poll():
                return
            _build.wait()
            background, _build = _build, None
            _accept(background.result())
        elif wait:
            _accept(build.build_and_load())
        else:
            plan = build.plan_build()
            cached = build.load_cached(plan)  # NOTE: a damaged file is removed, not loaded
            if cached is not None:
                _accept(cached)  # NOTE: a failed self-test is final, not rebuilt
                return
            _build = build.start_background(plan)
            _status = f"building in the background into {_build.plan.path}"
            LOG.info("guards: native checker %s; guards stay pure Python until it is done",
                     _status)
    except Exception as exc:  # noqa: BLE001  # any failure: fall back to pure Python
        _fail(exc)


def _accept(module: ModuleType) -> None:
    """Use `module` if it passes the self-test (else fall back)."""
    global _module, _status, _tried
    from guards.native.build import NativeBuildError

    problem = _self_test(module)
    if problem is not None:
        raise NativeBuildError(problem)
    _module = module
    _status = f"loaded from {module.__file__}"
    _tried = True
    LOG.info("guards: native checker %s", _status)


def _fail(exc: Exception) -> None:
    """Give up for this process: one warning, guards stay pure Python."""
    global _status, _tried, _build
    _status = f"unavailable: {exc}"
    _tried = True
    _build = None
    LOG.warning("guards: native checker unavailable, generated guards stay pure Python "
                "(%s)", exc)


def native_status() -> str:
    """How `load_native()` went: not loaded yet, building in the background into <path>,
    loaded from <path>, or unavailable: why."""
    return _status
