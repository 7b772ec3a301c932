"""C++ for the run-time checks of `ir/checks.py`: integer divisions that raise on a zero
divisor instead of trapping (SIGFPE), and the prelude helpers they and checked indirect
indices call.

In: an op kind and its C++ operands. Out: a C++ expression that reports into the kernel's
`err` slots and computes on with a safe value.
"""

from __future__ import annotations

import torch

ERR_ARG = "err"  # the C++ name of a checking kernel's error slots

# Integer ops that divide: their C++ helpers take a divisor checked by `ind_nonzero`.
INT_DIVISIONS = {"trunc_div": "ind_trunc_div", "floordiv": "ind_floordiv_v",
                 "remainder": "ind_remainder", "fmod": "ind_fmod"}


def is_integral(dtype: torch.dtype) -> bool:
    """An integer dtype (bool excluded): division by zero raises in ATen."""
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def checked_division(kind: str, a: str, b: str, check_id: int) -> str:
    """`a <kind> b` for integers: a zero divisor reports `check_id` and divides by 1."""
    return f"{INT_DIVISIONS[kind]}({a}, ind_nonzero({b}, {ERR_ARG}, {check_id}))"


PRELUDE_CHECKS = r"""
/* Run-time checks (ir/checks.py): the first failing check stores its number and the bad
   value into err[0], err[1]; the kernel computes on with a safe value (never reading or
   writing outside a tensor) and the wrapper raises what ATen raises. */
__attribute__((noinline, cold)) static void ind_report(int64_t* err, int64_t id,
                                                       int64_t value) {
  int64_t expected = 0;
  if (__atomic_compare_exchange_n(err, &expected, id, false, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED))
    err[1] = value;
}
static inline int64_t ind_index(int64_t i, int64_t size, int64_t* err, int64_t id) {
  int64_t w = i < 0 ? i + size : i;
  if (__builtin_expect((uint64_t)w >= (uint64_t)size, 0)) { ind_report(err, id, i); return 0; }
  return w;
}
static inline int64_t ind_index_nowrap(int64_t i, int64_t size, int64_t* err, int64_t id) {
  if (__builtin_expect((uint64_t)i >= (uint64_t)size, 0)) { ind_report(err, id, i); return 0; }
  return i;
}
template <class T> static inline T ind_nonzero(T b, int64_t* err, int64_t id) {
  if (__builtin_expect(b == 0, 0)) { ind_report(err, id, 0); return T(1); }
  return b;
}
"""
