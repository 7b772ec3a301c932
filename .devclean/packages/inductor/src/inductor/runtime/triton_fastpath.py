"""The launch fast path of a compiled Triton kernel: after the first launch through the JIT,
later launches skip its argument binding while the tensors keep the first call's alignment
(Triton specializes a compiled kernel on 16-byte alignment).

Three levels, the fastest that applies:

- `compiled[grid](*args)`: the compiled kernel's runner (no JIT binding or cache lookup);
- the runner's C launcher called as the runner would (`FastPath.direct`), when no launch
  hooks are set: no runner closure or hook lookup per call;
- the C launcher given data pointers (`FastPath.raw`), when every argument is a tensor, all
  were aligned, and the launcher is Triton 3.6's form taking no scratch memory. Triton's C
  launcher takes an int as a device pointer as it is; given a tensor it calls `data_ptr()`
  and asks the driver whether the address is device memory (`cuPointerGetAttribute`), per
  pointer argument and launch. The addresses are read here anyway (the alignment check),
  and every tensor a generated kernel takes is on its device. Measured on the GPU zoo's
  BERT training (bf16), 198 launches per step: see tools/DEVICE_RUNS.md, session 24.
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Sequence
from typing import Any

import torch

_DATA_PTR = torch.Tensor.data_ptr
_STREAM = torch._C._cuda_getCurrentRawStream if torch.cuda.is_available() else None
_DEVICE = torch._C._cuda_getDevice if torch.cuda.is_available() else None
#: the parameters of Triton 3.6's `CudaLauncher.__call__` (its C `launch` then takes grid,
#: stream, function, cooperative, pdl, global scratch, profile scratch, then the rest)
_LAUNCHER_36 = ("self", "gridX", "gridY", "gridZ", "stream", "function", "args")


class FastPath:
    """After the first launch of one `@triton.jit` function, later launches go through its
    compiled kernel directly while the tensors keep the first call's alignment."""

    def __init__(self) -> None:
        self.compiled: Any = None
        self.grid: tuple[int, ...] = ()
        self.align: tuple[bool, ...] = ()
        self.extra: tuple[int, ...] = ()
        self.on = True  # NOTE: off once a compiled kernel refused our arguments
        self.direct: tuple[Any, ...] | None = None  # see _direct
        self.raw: tuple[Any, ...] | None = None  # see _raw
        self.looked = False  # NOTE: whether _direct was asked (once: its answer stands)
        self.tensors: tuple[int, ...] = ()  # positions of the tensor arguments
        self.all_aligned = False
        self.all_tensors = False
        self.pick: Any = None  # NOTE: picks the tensor arguments when all were aligned

    def call(self, args: Sequence[Any]) -> bool:
        """Launch through the compiled kernel; False when the caller must use the JIT."""
        raw = self.raw
        if raw is not None:
            ptrs = tuple(map(_DATA_PTR, args))
            if functools.reduce(operator.or_, ptrs) & 15:
                return False
            launch, g0, g1, g2, function, coop, pdl, packed = raw
            launch(g0, g1, g2, _STREAM(_DEVICE()), function, coop, pdl,  # type: ignore[misc]
                   None, None, packed, None, None, None, *ptrs, *self.extra)
            return True
        if self.compiled is None or not self._aligned(args):
            return False
        if self.direct is not None:
            run, g0, g1, g2, function, packed = self.direct
            # NOTE: what `compiled[grid](*args)` does, minus building a runner closure and
            # looking up launch hooks per call (none were set when this was kept)
            stream = _STREAM(_DEVICE())  # type: ignore[misc]
            run(g0, g1, g2, stream, function, packed, None, None, None, *args, *self.extra)
            return True
        try:
            self.compiled[self.grid](*args, *self.extra)
        except TypeError:
            # NOTE: Triton versions differ in whether a compiled kernel takes its
            # constexpr arguments; the count is checked before anything launches
            if not self.extra:
                self.compiled = None
                self.on = False
                return False
            self.extra = ()
            self.compiled[self.grid](*args)
        if not self.looked:
            self.looked = True
            self.direct = self._direct()
            self.raw = self._raw() if self.direct is not None else None
        return True

    def _aligned(self, args: Sequence[Any]) -> bool:
        """Whether the tensors keep the first call's alignment; when all were aligned, one
        OR over their addresses in C calls instead of a Python loop."""
        if self.pick is not None:
            return not functools.reduce(operator.or_, map(_DATA_PTR, self.pick(args))) & 15
        return _alignment(args, self.tensors) == self.align

    def keep(self, compiled: Any, grid: tuple[int, ...], args: Sequence[Any],
             constexprs: tuple[int, ...]) -> None:
        """Remember what the JIT launch returned, for later calls."""
        if self.compiled is None and self.on and hasattr(compiled, "__getitem__"):
            self.compiled = compiled
            self.grid = grid + (1,) * (3 - len(grid))
            self.tensors = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
            self.align = _alignment(args, self.tensors)
            self.all_aligned = all(self.align) and len(self.tensors) > 1
            self.all_tensors = len(self.tensors) == len(args) > 0
            self.pick = operator.itemgetter(*self.tensors) if self.all_aligned else None
            self.extra = constexprs
            self.direct = None  # NOTE: set once a launch through the runner took our arguments
            self.raw = None
            self.looked = False

    def _direct(self) -> tuple[Any, ...] | None:
        """The compiled kernel's C launcher and what it takes, when this Triton has the
        layout we know (`run(grid, stream, function, packed_metadata, launch_metadata, enter
        hook, exit hook, *args)`) and no launch hooks are set; else None (the runner). A hook
        is unset when it is None or, on Triton versions that keep hooks in a chain, the
        chain is empty."""
        c = self.compiled
        try:
            from triton import knobs  # type: ignore[import-untyped]  # NOTE: no type hints

            hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
            c._init_handles()
            direct = (c.run, *self.grid, c.function, c.packed_metadata)
        except (ImportError, AttributeError):
            return None
        if any(_hook_set(h) for h in hooks) or _STREAM is None:
            return None
        return direct

    def _raw(self) -> tuple[Any, ...] | None:
        """The C launch under the runner (`self.direct`'s), given data pointers: only for
        an all-tensor, all-aligned argument list, a runner of Triton 3.6's form, and a
        kernel that needs neither global nor profile scratch memory (the runner would
        allocate those per launch); else None."""
        if self.direct is None or not (self.all_tensors and self.all_aligned):
            return None
        run, g0, g1, g2, function, packed = self.direct
        try:
            params = tuple(inspect.signature(type(run).__call__).parameters)
            launch = run.launch
            scratch = (run.global_scratch_size, run.profile_scratch_size)
            coop, pdl = run.launch_cooperative_grid, run.launch_pdl
        except (AttributeError, TypeError, ValueError):
            return None
        if params != _LAUNCHER_36 or any(scratch) or getattr(run, "gsan_enabled", False):
            return None
        return (launch, g0, g1, g2, function, coop, pdl, packed)


def _hook_set(hook: Any) -> bool:
    """Whether a Triton launch hook would run: None, or an empty hook chain, does not."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return calls is None or len(calls) > 0


def _alignment(args: Sequence[Any], tensors: tuple[int, ...]) -> tuple[bool, ...]:
    """Which tensor arguments (at `tensors`) start on a 16-byte boundary: Triton specializes
    a compiled kernel on it."""
    return tuple(args[i].data_ptr() % 16 == 0 for i in tensors)
