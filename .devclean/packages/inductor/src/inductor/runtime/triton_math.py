"""Math functions of generated Triton kernels run by Triton's interpreter.

On a GPU, kernels call `libdevice` (CUDA's math library). Triton's interpreter
(`TRITON_INTERPRET=1`) has no libdevice: its functions are empty stubs there. Kernels
generated for the interpreter import `interp_libdevice` under that name instead: the same
function names, computed by torch on the interpreter's numpy blocks, so CPU tests see
eager's own results for tanh, erfinv, lgamma, ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def _data(v: Any) -> Any:
    handle = getattr(v, "handle", None)
    return handle.data if handle is not None else np.asarray(v)


def _wrap(like: Any, data: Any, dtype: Any = None) -> Any:
    import triton.language as tl  # type: ignore[import-untyped]  # NOTE: no type hints
    from triton.runtime.interpreter import TensorHandle  # type: ignore[import-untyped]

    ty = like.type if dtype is None else (
        tl.block_type(dtype, list(like.type.shape)) if like.type.is_block() else dtype)
    sty = ty.scalar if hasattr(ty, "scalar") else ty
    out = np.asarray(data).astype(_data(like).dtype if dtype is None else np.int32)
    return tl.tensor(TensorHandle(out, sty), ty)


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Any], Any]:
    def apply(x: Any) -> Any:
        t = torch.from_numpy(np.ascontiguousarray(_data(x)))
        return _wrap(x, fn(t).numpy())

    return apply


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[[Any, Any],
                                                                                   Any]:
    def apply(a: Any, b: Any) -> Any:
        like = a if hasattr(a, "handle") else b
        dt = _data(like).dtype
        ta = torch.from_numpy(np.ascontiguousarray(np.asarray(_data(a), dtype=dt)))
        tb = torch.from_numpy(np.ascontiguousarray(np.asarray(_data(b), dtype=dt)))
        ta, tb = torch.broadcast_tensors(ta, tb)  # type: ignore[no-untyped-call]
        out = fn(ta, tb).numpy()
        if hasattr(like, "type") and like.type.is_block() and out.shape != _data(like).shape:
            like = a if _data(a).shape == out.shape else b
        return _wrap(like, out)

    return apply


class _InterpLibdevice:
    """`libdevice.<name>(x)` for the interpreter (torch on the numpy data)."""

    tanh = staticmethod(_unary(torch.tanh))
    log1p = staticmethod(_unary(torch.log1p))
    expm1 = staticmethod(_unary(torch.expm1))
    log10 = staticmethod(_unary(torch.log10))
    tan = staticmethod(_unary(torch.tan))
    asin = staticmethod(_unary(torch.asin))
    acos = staticmethod(_unary(torch.acos))
    atan = staticmethod(_unary(torch.atan))
    sinh = staticmethod(_unary(torch.sinh))
    cosh = staticmethod(_unary(torch.cosh))
    asinh = staticmethod(_unary(torch.asinh))
    acosh = staticmethod(_unary(torch.acosh))
    atanh = staticmethod(_unary(torch.atanh))
    erfc = staticmethod(_unary(torch.erfc))
    erfinv = staticmethod(_unary(torch.erfinv))
    lgamma = staticmethod(_unary(torch.lgamma))
    nearbyint = staticmethod(_unary(torch.round))
    trunc = staticmethod(_unary(torch.trunc))
    exp = staticmethod(_unary(torch.exp))
    pow = staticmethod(_binary(torch.pow))
    atan2 = staticmethod(_binary(torch.atan2))
    copysign = staticmethod(_binary(torch.copysign))
    hypot = staticmethod(_binary(torch.hypot))
    fmod = staticmethod(_binary(torch.fmod))

    @staticmethod
    def signbit(x: Any) -> Any:
        """1 where the sign bit is set (int32, as libdevice's)."""
        import triton.language as tl

        t = torch.from_numpy(np.ascontiguousarray(_data(x)))
        return _wrap(x, torch.signbit(t).numpy(), tl.int32)


interp_libdevice = _InterpLibdevice()
