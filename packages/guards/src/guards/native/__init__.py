"""The native checker: tensor, global-state and backend checks of a generated guard in C++.

`load_native()` returns the extension module (built on first use, see `build.py`), or None
when it cannot be built or loaded: then generated guards stay pure Python, with one log
line on logger `guards`. The module's `Checker(tensors, state, backend)` holds the expected
properties; `Checker.check(t0, t1, ...)` checks them all in one call (see `checker.cpp`,
and `plan.py` for which checks go native). Importing this package does not import torch
or build anything. Disable with `GUARDS_NATIVE=0` (option `native`).
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType

LOG = logging.getLogger("guards")

_lock = threading.Lock()
_module: ModuleType | None = None
_status = "not loaded yet"
_tried = False


def _self_test(module: ModuleType) -> str | None:
    """None if the module answers a few known cases right, else what went wrong."""
    import torch

    t = torch.randn(2, 3)
    keys = torch._C._dispatch_keys(t).raw_repr()
    checker = module.Checker(
        [(torch.Tensor, t.dtype, t.device, torch.strided, False, (2, 3), (3, 1), keys)])
    negative = t.clone()
    torch._C._set_neg(negative, True)
    answers = (checker.check(t), checker.check(t.t()), checker.check(negative),
               checker.first_failure(0, t.double()), checker.first_failure(0, negative))
    expected = (True, False, False, "dtype", "dispatch keys")
    return None if answers == expected else f"self-test answered {answers}, not {expected}"


def load_native() -> ModuleType | None:
    """The native module, built and loaded once per process; None if unavailable."""
    if not _tried:
        with _lock:
            if not _tried:  # NOTE: another thread may have loaded it while we waited
                _load()
    return _module


def _load() -> None:
    global _module, _status, _tried
    from guards.native.build import NativeBuildError, build_and_load

    try:
        module = build_and_load()
        problem = _self_test(module)
        if problem is not None:
            raise NativeBuildError(problem)
    except Exception as exc:  # noqa: BLE001  # any failure: fall back to pure Python
        _status = f"unavailable: {exc}"
        LOG.warning("guards: native checker unavailable, generated guards stay pure Python "
                    "(%s)", exc)
    else:
        _module = module
        _status = f"loaded from {module.__file__}"
        LOG.info("guards: native checker %s", _status)
    _tried = True


def native_status() -> str:
    """How `load_native()` went: not loaded yet, loaded from <path>, or unavailable: why."""
    return _status
