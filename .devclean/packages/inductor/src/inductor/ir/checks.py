"""Run-time checks of generated kernels: the conditions eager ATen raises on (an index out
of bounds, an integer division by zero), with the exception each raises.

A kernel that checks takes one more argument, `int64_t* err` (two slots): the first failing
check stores its number (1-based, in the kernel's `CppKernel.checks`) and the offending
value there and computes on with a safe value (index 0, divisor 1), so no memory outside a
tensor is read or written; the wrapper raises `KernelCheck.error(value)` after the call.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

# NOTE: the exception classes a check may raise, by name (checks are printed and hashed as
# part of loop bodies, so they hold names, not classes).
_EXCEPTIONS: dict[str, type[Exception]] = {"IndexError": IndexError,
                                           "RuntimeError": RuntimeError}


@dataclass(frozen=True, slots=True)
class KernelCheck:
    """`exc(message.format(value=...))` when the check fails; `value` is the bad index."""

    exc: str
    message: str

    def error(self, value: int) -> Exception:
        """The exception eager raises for the offending `value`."""
        return _EXCEPTIONS[self.exc](self.message.format(value=value))


def index_check(exc: str, dim: int, size: int) -> KernelCheck:
    """ATen's message for an index out of bounds of `dim` (`index`, `gather`, `scatter`)."""
    return KernelCheck(exc, f"index {{value}} is out of bounds for dimension {dim} with "
                            f"size {size}")


# NOTE: `index_select` and `embedding` on the CPU report no value.
OUT_OF_RANGE = KernelCheck("IndexError", "index out of range in self")
# NOTE: ATen's integer division, remainder and fmod raise a RuntimeError with this text.
ZERO_DIVISION = KernelCheck("RuntimeError", "ZeroDivisionError")

ERR_PARAM = "kernel_err"  # the name of the error slots among a kernel's parameters


# NOTE: a call's error slots are a ctypes array (cheaper to make per call than a tensor,
# passed to C as a pointer): `ErrorSlots()` is two zeroed int64 slots.
ErrorSlots = ctypes.c_int64 * 2


def new_error_slots(device: str) -> torch.Tensor:
    """Error slots of a Triton kernel: two zeroed int64 on the kernel's device."""
    return torch.zeros(2, dtype=torch.int64, device=device)


def raise_kernel_error(err: ctypes.Array[ctypes.c_int64] | torch.Tensor,
                       checks: tuple[KernelCheck, ...]) -> None:
    """Raise what eager raises for the check reported in `err` (called by the wrapper)."""
    raise checks[int(err[0]) - 1].error(int(err[1]))
