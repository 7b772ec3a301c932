"""Symbolic input sizes: which sizes and int arguments of a frame are symbols, the fake
tensors and numbers standing for them, and the marks users put on tensors.

A frame compiles static first. Its code's `FrameShapes` remembers the sizes and ints each
input had; when a later compile sees an input whose size (or int value) changed, exactly
that dimension (or int) becomes a symbol of the frame's ShapeEnv (automatic dynamic), so a
program whose sizes keep changing compiles twice, not once per size. `dynamic=True` makes
every size symbolic from the first compile, `dynamic=False` never does automatically.
Sizes 0 and 1 stay static (the ShapeEnv specializes them), and so do parameters and buffers
of modules. `mark_dynamic` / `maybe_mark_dynamic` / `mark_static` override the choice per
dimension (attributes on the tensor, read when the tensor is wrapped).

IR in: real tensors and ints met at sources. IR out: fake tensors with `SymInt` sizes and
strides (expressions of the ShapeEnv's symbols), `SymInt` placeholders for ints, and per
symbol the source it was read from (`shape_guards` turns them into guards).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy  # type: ignore[import-untyped]  # sympy ships no type information
import torch
from guards.sources import BufferSource, ParamSource, Source
from torch.fx.experimental import symbolic_shapes
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

__all__ = [
    "FrameShapes",
    "RecordingShapeEnv",
    "SymbolicInputs",
    "forget_shapes",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "shapes_for",
]

#: Attributes the marks set on tensors (dim -> (min, max)), sets of dims, or on modules.
DYNAMIC_ATTR = "_capture_dynamic_dims"
MAYBE_DYNAMIC_ATTR = "_capture_maybe_dynamic_dims"
STATIC_ATTR = "_capture_static_dims"
STATIC_MODULE_ATTR = "_capture_static_module"


#: The class of the ShapeEnv's `source` arguments: `ShapeEnv.create_symbol` asks for one
#: per symbol and calls its `name()`. NOTE: the class is torch's guard-source base
#: (`torch._guards.Source`, which the ShapeEnv module imports); we use the ShapeEnv (DESIGN.md)
#: and so this one type of its API, read from the ShapeEnv's module as that module sees it,
#: subclassed only to label our symbols. Nothing else of `torch._guards` is used: our guards
#: are `capture/shape_guards.py` + the `guards` package. (Read through `vars` because the
#: module does not re-export the name for `mypy --strict`.)
_ShapeEnvSource: Any = vars(symbolic_shapes)["Source"]


@dataclasses.dataclass(frozen=True)
class _EnvSource(_ShapeEnvSource):  # type: ignore[misc]  # a class known at run time
    """The ShapeEnv's own description of where a symbol comes from (its API takes one):
    only the name of our source, for its messages and symbol names."""

    label: str = ""

    @property
    def _name_template(self) -> str:
        return self.label


def mark_dynamic(t: torch.Tensor, dim: int | list[int] | tuple[int, ...],
                 min: int | None = None, max: int | None = None) -> None:
    """Make `t`'s dimension `dim` symbolic from the first compile; `min`/`max` bound it."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    marks: dict[int, tuple[int | None, int | None]] = dict(getattr(t, DYNAMIC_ATTR, {}))
    for d in dims:
        d = _normalize(t, d)
        marks[d] = (min, max)
    setattr(t, DYNAMIC_ATTR, marks)


def maybe_mark_dynamic(t: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> None:
    """Make `t`'s dimension `dim` symbolic from the first compile, unless the program needs
    its value (then it is specialized quietly)."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    marks = set(getattr(t, MAYBE_DYNAMIC_ATTR, set()))
    marks.update(_normalize(t, d) for d in dims)
    setattr(t, MAYBE_DYNAMIC_ATTR, marks)


def mark_static(t: torch.Tensor | torch.nn.Module, dim: int | None = None) -> None:
    """Keep `t`'s dimension `dim` (every dimension when None) static; for a module, its
    parameters and buffers."""
    if isinstance(t, torch.nn.Module):
        setattr(t, STATIC_MODULE_ATTR, True)
        for tensor in (*t.parameters(), *t.buffers()):
            mark_static(tensor)
        return
    dims = set(getattr(t, STATIC_ATTR, set()))
    dims.update(range(t.dim()) if dim is None else (_normalize(t, dim),))
    setattr(t, STATIC_ATTR, dims)


def _normalize(t: torch.Tensor, dim: int) -> int:
    if not -t.dim() <= dim < max(t.dim(), 1):
        raise IndexError(f"dimension {dim} out of range for a tensor of {t.dim()} dims")
    return dim % max(t.dim(), 1)


@dataclass
class FrameShapes:
    """What the compiles of one code object saw: per input source, the sizes (None: a
    dimension already seen changing) and int values (None: seen changing).

    `dynamic`: the compile call's flag (None: automatic, True: all sizes symbolic,
    False: only marked dimensions)."""

    dynamic: bool | None = None
    sizes: dict[Source, tuple[int | None, ...]] = field(default_factory=dict)
    ints: dict[Source, int | None] = field(default_factory=dict)

    def tensor_dims(self, tensor: torch.Tensor, source: Source) -> set[int]:
        """The dimensions of `tensor` (read at `source`) to make symbolic now, recording its
        sizes for the next compile."""
        shape = tuple(int(s) for s in tensor.shape)
        marked = set(getattr(tensor, DYNAMIC_ATTR, {})) | set(
            getattr(tensor, MAYBE_DYNAMIC_ATTR, set()))
        static = set(getattr(tensor, STATIC_ATTR, set()))
        if isinstance(source, (ParamSource, BufferSource)):
            return marked - static  # NOTE: module state keeps static shapes
        if self.dynamic is True:
            dims = set(range(len(shape)))
        else:
            seen = self.sizes.get(source)
            if seen is None or len(seen) != len(shape):
                merged: tuple[int | None, ...] = shape
            else:
                merged = tuple(None if a is None or a != b else a for a, b in zip(seen, shape))
            self.sizes[source] = merged
            dims = {i for i, s in enumerate(merged) if s is None} if self.dynamic is None else set()
        return (dims | marked) - static

    def int_dynamic(self, value: int, source: Source) -> bool:
        """Whether the int argument `value` at `source` is a symbol now (recording it)."""
        if self.dynamic is True:
            return True
        seen = self.ints.get(source, value)
        self.ints[source] = None if seen is None or seen != value else value
        return self.dynamic is None and self.ints[source] is None


_FRAME_SHAPES: weakref.WeakKeyDictionary[object, FrameShapes] = weakref.WeakKeyDictionary()


def shapes_for(cache: object, dynamic: bool | None) -> FrameShapes:
    """The `FrameShapes` of a code object's guard cache (made on first use)."""
    state = _FRAME_SHAPES.get(cache)
    if state is None:
        state = FrameShapes(dynamic)
        _FRAME_SHAPES[cache] = state
    return state


def forget_shapes(cache: object | None = None) -> None:
    """Forget what compiles saw of input sizes: of one guard cache, or (None) of all."""
    if cache is None:
        _FRAME_SHAPES.clear()
    else:
        _FRAME_SHAPES.pop(cache, None)


class RecordingShapeEnv(ShapeEnv):
    """A ShapeEnv that remembers where the program specialized a symbol to a constant: the
    user's line (given by `where()`, the translator's current location) per symbol."""

    def __init__(self, where: Callable[[], str]) -> None:
        super().__init__(duck_shape=False)
        self.where = where
        self.specialized_at: dict[Any, str] = {}

    def _set_replacement(self, a: Any, tgt: Any, msg: str) -> None:
        super()._set_replacement(a, tgt, msg)
        if isinstance(tgt, sympy.Integer) and a not in self.specialized_at:
            try:
                self.specialized_at[a] = self.where()
            except Exception:  # noqa: BLE001  # a location is a nicety, never a failure
                self.specialized_at[a] = "?"


@dataclass
class SymbolicInputs:
    """The frame's symbolic inputs, for guards: per symbol the source it is bound from
    (in creation order), per tensor source its fake tensor and symbolic dimensions, and the
    dimensions users marked dynamic (symbol -> (mark text, min, max))."""

    symbols: dict[Any, Source] = field(default_factory=dict)
    tensors: dict[Source, tuple[torch.Tensor, frozenset[int]]] = field(default_factory=dict)
    marked: dict[Any, tuple[str, int | None, int | None]] = field(default_factory=dict)

    def symbolic_tensor(self, env: ShapeEnv, mode: Any, tensor: torch.Tensor, source: Source,
                        dims: set[int]) -> torch.Tensor | None:
        """A fake tensor like `tensor` whose `dims` are symbols (None if none stays symbolic:
        sizes 0 and 1 are specialized)."""
        from guards.sources import SizeSource

        if tensor.storage_offset() != 0 or tensor.layout is not torch.strided:
            # NOTE: a view into a larger storage (or a sparse tensor) keeps static sizes:
            # the symbolic fake is a fresh dense tensor, which would not describe it.
            return None
        sizes: list[Any] = []
        symbolic: set[int] = set()
        marks = getattr(tensor, DYNAMIC_ATTR, {})
        for i, size in enumerate(tensor.shape):
            size = int(size)
            if i not in dims or size in (0, 1):
                sizes.append(size)
                continue
            src = SizeSource(source, i)
            expr = env.create_symbol(size, _EnvSource(src.name()), DimDynamic.DYNAMIC)
            if i in marks:
                low, high = marks[i]
                self.marked[expr] = (f"{source.name()}.shape[{i}]", low, high)
                _constrain(env, expr, low, high)
            self.symbols[expr] = src
            sizes.append(env.create_symintnode(expr, hint=size, source=_EnvSource(src.name())))
            symbolic.add(i)
        if not symbolic:
            return None
        strides = _symbolic_strides(tensor, sizes)
        with mode:
            fake = torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device,
                                       layout=tensor.layout,
                                       requires_grad=bool(tensor.requires_grad))
        self.tensors[source] = (fake, frozenset(symbolic))
        return fake

    def symbolic_int(self, env: ShapeEnv, value: int, source: Source) -> torch.SymInt | None:
        """A `SymInt` for the int argument `value` at `source` (None for 0 and 1, which
        stay static)."""
        expr = env.create_symbol(value, _EnvSource(source.name()), DimDynamic.DYNAMIC,
                                 positive=None)
        if not isinstance(expr, sympy.Symbol):
            return None
        self.symbols[expr] = source
        out = env.create_symintnode(expr, hint=value, source=_EnvSource(source.name()))
        return out if isinstance(out, torch.SymInt) else None


def _constrain(env: ShapeEnv, expr: Any, low: int | None, high: int | None) -> None:
    from torch.utils._sympy.value_ranges import ValueRanges

    current = env.var_to_range[expr]
    lower = current.lower if low is None else max(current.lower, sympy.Integer(low))
    upper = current.upper if high is None else min(current.upper, sympy.Integer(high))
    env.var_to_range[expr] = ValueRanges(lower, upper)


def _symbolic_strides(tensor: torch.Tensor, sizes: list[Any]) -> list[Any]:
    """Strides as expressions of the sizes where the real strides are the dense ones for
    an order of the dimensions (innermost first); any other stride stays its int (and is
    guarded so)."""
    real = [int(s) for s in tensor.stride()]
    real_sizes = [int(s) for s in tensor.shape]
    order = sorted(range(len(real)), key=lambda i: (real[i], real_sizes[i]))
    out: list[Any] = list(real)
    dense_real = 1
    dense: Any = 1
    for i in order:
        if real[i] == dense_real:
            out[i] = dense
        dense_real = real[i] * real_sizes[i]
        dense = out[i] * sizes[i]
    return out
