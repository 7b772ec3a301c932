"""C++ for the run-time checks of `ir/checks.py`: bounds-checked indirect indices, and
integer divisions that raise on a zero divisor instead of trapping (SIGFPE).

A checking kernel keeps two locals, `ind_bad` (bit `k` set: check `k` failed) and `ind_val`
(the largest bad index), updated without branches, so loops with checks still vectorize;
every OpenMP loop of the kernel reduces them (`reduction(|:ind_bad) reduction(max:ind_val)`
is added to its pragma) and the kernel ends by storing them into its `err` argument.

In: an op kind and its C++ operands. Out: C++ expressions, pragma clauses, the epilogue.
"""

from __future__ import annotations

import torch

ERR_ARG = "err"  # the C++ name of a checking kernel's error slots
MAX_CHECKS = 62  # NOTE: bits of `ind_bad`; checks beyond share the last bit

# Integer ops that divide: their C++ helpers take a divisor checked by `ind_nonzero`.
INT_DIVISIONS = {"trunc_div": "ind_trunc_div", "floordiv": "ind_floordiv_v",
                 "remainder": "ind_remainder", "fmod": "ind_fmod"}

PRAGMA_CLAUSES = " reduction(|:ind_bad) reduction(max:ind_val)"


def is_integral(dtype: torch.dtype) -> bool:
    """An integer dtype (bool excluded): division by zero raises in ATen."""
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def checked_division(kind: str, a: str, b: str, check_id: int) -> str:
    """`a <kind> b` for integers: a zero divisor sets check `check_id`, divides by 1."""
    bit = min(check_id, MAX_CHECKS + 1)
    return f"{INT_DIVISIONS[kind]}({a}, ind_nonzero({b}, ind_bad, {bit}))"


def checked_index(x: str, size: str, wrap: bool, check_id: int) -> str:
    """Index `x` into a dim of `size` (negative ones wrapped when `wrap`); out of bounds
    sets check `check_id` and reads index 0."""
    fn = "ind_index" if wrap else "ind_index_nowrap"
    bit = min(check_id, MAX_CHECKS + 1)
    return f"{fn}({x}, {size}, ind_bad, ind_val, {bit})"


def with_check_clauses(lines: list[str]) -> list[str]:
    """Each OpenMP loop pragma of a checking kernel whose loop checks something reduces
    the check flags (a loop that checks nothing keeps its pragma: the reductions would
    cost a horizontal max per pass, as in the row loop of `w[idx]`)."""
    out = list(lines)
    for i, line in enumerate(lines):
        text = line.strip()
        if not (text.startswith("#pragma omp") and ("simd" in text or " for" in text)):
            continue
        if _loop_checks(lines, i + 1):
            out[i] = line + PRAGMA_CLAUSES
    return out


def _loop_checks(lines: list[str], start: int) -> bool:
    """Whether the loop opened at `lines[start]` (a `for` line, its block indented under
    it and closed by a `}` at its indentation) uses the check flags."""
    if start >= len(lines):
        return True
    indent = len(lines[start]) - len(lines[start].lstrip())
    for line in lines[start + 1:]:
        if "ind_bad" in line:
            return True
        stripped = line.lstrip()
        if stripped == "}" and len(line) - len(stripped) == indent:
            return False
    return True


PROLOGUE = "int64_t ind_bad = 0, ind_val = INT64_MIN;"
EPILOGUE = f"if (ind_bad) ind_report({ERR_ARG}, ind_bad, ind_val);"

PRELUDE_CHECKS = r"""
/* Run-time checks (codegen/checks.py): failing sets a bit of `bad` (and `val` to the
   largest bad index) and computes on with a safe value, never reading or writing outside
   a tensor; the kernel then reports the lowest failed check and the wrapper raises what
   ATen raises. */
static inline int64_t ind_index(int64_t i, int64_t size, int64_t& bad, int64_t& val,
                                int bit) {
  int64_t w = i < 0 ? i + size : i;
  bool out = (uint64_t)w >= (uint64_t)size;
  bad |= (int64_t)out << bit;
  val = out && i > val ? i : val;
  return out ? 0 : w;
}
static inline int64_t ind_index_nowrap(int64_t i, int64_t size, int64_t& bad,
                                       int64_t& val, int bit) {
  bool out = (uint64_t)i >= (uint64_t)size;
  bad |= (int64_t)out << bit;
  val = out && i > val ? i : val;
  return out ? 0 : i;
}
template <class T> static inline T ind_nonzero(T b, int64_t& bad, int bit) {
  T zero = (T)(b == 0);
  bad |= (int64_t)zero << bit;
  return b | zero;
}
static inline void ind_report(int64_t* err, int64_t bad, int64_t val) {
  err[0] = __builtin_ctzll((uint64_t)bad);
  err[1] = val;
}
"""
