"""Text shared by generated Triton modules: imports, the combine functions of reductions and
the integer helpers, and the tables that spell our ops in Triton.

Every generated module starts with `module_header(interpret)`; the helpers are defined in
the module itself (not imported), so each is decorated under the same interpreter setting
as the kernel that calls it.
"""

from __future__ import annotations

import math

import torch

_GPU_LIBDEVICE = """\
try:
    from triton.language.extra import libdevice
except ImportError:  # NOTE: older Triton keeps it under the CUDA backend
    from triton.language.extra.cuda import libdevice
"""

_INTERP_LIBDEVICE = "from inductor.runtime.triton_math import interp_libdevice as libdevice\n"

_HELPERS = '''

@triton.jit
def _maximum(a, b):
    return tl.where(a != a, a, tl.where(a > b, a, b))


@triton.jit
def _minimum(a, b):
    return tl.where(a != a, a, tl.where(a < b, a, b))


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _argmax(av, ai, bv, bi):
    a_nan = av != av
    b_nan = bv != bv
    win = (av > bv) | (a_nan & (bv == bv)) | (((av == bv) | (a_nan & b_nan)) & (ai < bi))
    return tl.where(win, av, bv), tl.where(win, ai, bi)


@triton.jit
def _argmin(av, ai, bv, bi):
    a_nan = av != av
    b_nan = bv != bv
    win = (av < bv) | (a_nan & (bv == bv)) | (((av == bv) | (a_nan & b_nan)) & (ai < bi))
    return tl.where(win, av, bv), tl.where(win, ai, bi)


@triton.jit
def _floordiv(a, b):
    q = a // b
    return tl.where((q * b != a) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def _mod(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _ipow(a, b):
    result = a * 0 + 1
    base = a
    e = b
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    return tl.where(b < 0, tl.where(a == 1, 1, tl.where(a == -1, 1 - 2 * (b & 1), 0)), result)
'''


# NOTE: Triton's interpreter casts float32 to bfloat16 by truncating the mantissa (and an
# integer to bfloat16 by reinterpreting its low bits); a GPU rounds to nearest even, as
# eager does. Under the interpreter a cast to bfloat16 goes through this helper instead.
_INTERP_BF16 = '''

@triton.jit
def _to_bf16(x):
    bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
    lsb = (bits >> 16) & tl.full([], 1, tl.uint32)
    rounded = (bits + tl.full([], 0x7FFF, tl.uint32) + lsb) >> 16
    quiet = (bits >> 16) | tl.full([], 0x40, tl.uint32)
    out = tl.where(x != x, quiet, rounded)
    return out.to(tl.uint16).to(tl.bfloat16, bitcast=True)
'''


def module_header(interpret: bool) -> str:
    """Imports and helpers at the top of a generated module."""
    lib = _INTERP_LIBDEVICE if interpret else _GPU_LIBDEVICE
    helpers = _HELPERS + _INTERP_BF16 if interpret else _HELPERS
    return "import triton\nimport triton.language as tl\n" + lib + helpers


def cast_text(value: str, dtype: torch.dtype, interpret: bool) -> str:
    """`value` cast to `dtype` (rounded to nearest even into bfloat16 on every device)."""
    if interpret and dtype == torch.bfloat16:
        return f"_to_bf16({value})"
    return f"{value}.to({TL_DTYPE[dtype]})"


TL_DTYPE = {
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.int64: "tl.int64",
    torch.int32: "tl.int32",
    torch.int16: "tl.int16",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}

# Unary ops as Triton expressions of their operand `{0}`.
UNARY = {
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})",
    "log": "tl.log({0})", "log2": "tl.log2({0})", "sqrt": "tl.sqrt_rn({0})",
    "rsqrt": "(1.0 / tl.sqrt_rn({0}))", "sin": "tl.sin({0})", "cos": "tl.cos({0})",
    "erf": "tl.erf({0})", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "sigmoid": "(1.0 / (1.0 + tl.exp(-{0})))", "relu": "tl.where({0} < 0, 0, {0})",
    "reciprocal": "(1.0 / {0})", "square": "({0} * {0})", "bitwise_not": "(~{0})",
    "logical_not": "({0} == 0)", "isnan": "({0} != {0})",
    "isinf": "(tl.abs({0}) == float('inf'))",
    "isfinite": "(({0} == {0}) & (tl.abs({0}) != float('inf')))",
    "signbit": "(libdevice.signbit({0}) != 0)", "frac": "({0} - libdevice.trunc({0}))",
    "round": "libdevice.nearbyint({0})", "trunc": "libdevice.trunc({0})",
    # NOTE: as eager's (0 < a) - (a < 0), NaN -> 0, in the argument's own type: a where over
    # integer constants (1, -1, 0) stored as bfloat16 gave +1 for negatives on an H100
    "sign": "(({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype))",
}
for _name in ("expm1", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma"):
    UNARY[_name] = f"libdevice.{_name}({{0}})"

BINARY_INFIX = {
    "add": "+", "sub": "-", "mul": "*", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "logical_and": "&", "logical_or": "|", "logical_xor": "!=",
    "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "lshift": "<<", "rshift": ">>",
}

BINARY_CALLS = {
    "maximum": "_maximum", "minimum": "_minimum", "atan2": "libdevice.atan2",
    "copysign": "libdevice.copysign", "hypot": "libdevice.hypot",
}


def literal(value: object, dtype: torch.dtype) -> str:
    """A Python literal Triton reads as a scalar of `dtype`'s kind."""
    if dtype == torch.bool:
        return "True" if value else "False"
    if dtype.is_floating_point:
        v = float(value)  # type: ignore[arg-type]
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('-inf')" if v < 0 else "float('inf')"
        return repr(v)
    return repr(int(value))  # type: ignore[call-overload]


def reduction_init(kind: str, dtype: torch.dtype) -> str:
    """The identity of a reduction, as a literal of `dtype`."""
    if kind == "sum":
        return literal(0, dtype)
    if kind == "prod":
        return literal(1, dtype)
    if kind == "any":
        return "0"
    if kind == "all":
        return "1"
    high = kind in ("max", "argmax")
    if dtype.is_floating_point:
        return "float('-inf')" if high else "float('inf')"
    if dtype == torch.bool:
        return "0" if high else "1"
    info = torch.iinfo(dtype)
    return repr(info.min if high else info.max)
