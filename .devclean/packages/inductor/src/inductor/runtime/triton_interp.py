"""Running an interpreted Triton kernel without leaving the interpreter behind.

Triton's interpreter runs a kernel with `TRITON_INTERPRET=1` set and with `triton.language`
patched to its numpy builder. Triton's own `@triton.jit` library functions (`tl.sum`,
`tl.zeros`, `tl.rand`, ...) were decorated when `triton.language` was imported (torch imports
it early), as compiled functions that an interpreted kernel cannot call: they are swapped for
interpreted ones while an interpreted kernel runs. Some Triton versions also leave the
interpreter's patches in place after a kernel (3.6 for every kernel; 3.9 for device
functions a kernel calls). A GPU kernel compiled later in the same process would then reach
the interpreter from the code generator (`'ir.value' object has no attribute 'data'`) or
call an interpreted library function. `interpreting()` runs a block as the interpreter and
puts back every attribute of the language modules and classes it changed when the block
ends.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from inductor import config

_MISSING = object()
_library: list[tuple[Any, str, Any]] = []  # NOTE: (module, name, interpreted function)


def _language_modules() -> list[Any]:
    return [m for name, m in list(sys.modules.items())
            if name.startswith("triton.language") and m is not None]


def _patched_owners() -> list[Any]:
    """The modules and classes of `triton.language` that the interpreter or we patch."""
    import triton.language as tl  # type: ignore[import-untyped]  # NOTE: no type hints

    owners = [*_language_modules(), tl.tensor, tl.dtype, getattr(tl, "condition", None),
              getattr(tl.core, "condition", None),
              getattr(tl.core, "tensor_descriptor_base", None)]
    unique: dict[int, Any] = {id(o): o for o in owners if o is not None}
    return list(unique.values())


def _interpreted_library() -> list[tuple[Any, str, Any]]:
    """Interpreted versions of Triton's library functions (made once per process)."""
    if not _library:
        from triton.runtime.interpreter import InterpretedFunction  # type: ignore[import-untyped]
        from triton.runtime.jit import JITFunction  # type: ignore[import-untyped]

        for module in _language_modules():
            for name, value in list(vars(module).items()):
                if isinstance(value, JITFunction) and not isinstance(value, InterpretedFunction):
                    _library.append((module, name, InterpretedFunction(value.fn)))
    return _library


@contextlib.contextmanager
def interpreting() -> Iterator[None]:
    """Run the block as Triton's interpreter; `triton.language` as it was afterwards."""
    saved = [(owner, dict(vars(owner))) for owner in _patched_owners()]
    try:
        for module, name, interpreted in _interpreted_library():
            setattr(module, name, interpreted)
        with config.triton_interpreter(True):
            yield
    finally:
        for owner, before in saved:
            # NOTE: names added are kept (a submodule imported, the name the interpreter's
            # rewritten functions read its semantic by): a compiled kernel never reads them
            now = dict(vars(owner))
            for name, value in before.items():
                if now.get(name, _MISSING) is not value:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(owner, name, value)
