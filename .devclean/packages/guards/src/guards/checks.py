"""Leaf checks: what must hold of the value at a source for a cached entry to be valid.

Checks are frozen, hashable data; what they mean lives in two tables that must agree: the
interpreter's (`reasons.py`, which also words the failure) and the code generator's
(`codegen.py`). The hypothesis test in tests/guards checks that they do.
Torch is imported only by the helpers that build tensor and global-state checks.
"""

from __future__ import annotations

import enum
import math
import types
from dataclasses import dataclass, field
from typing import Any

from guards.exprs import Relation


@dataclass(frozen=True, slots=True)
class Check:
    """Base of all leaf checks."""

    def describe(self, subject: str) -> str:
        """A one-line rendering of the check applied to `subject` (a source name)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TypeMatch(Check):
    """`type(value) is cls` (exact type, no subclasses)."""

    cls: type

    def describe(self, subject: str) -> str:
        return f"type({subject}) is {_type_name(self.cls)}"


@dataclass(frozen=True, slots=True)
class IdMatch(Check):
    """`id(value) == target_id`: the very same object (modules, functions, classes).

    `label` is a short description of the expected object for messages. The caller keeps
    the object alive for as long as the guard exists (otherwise its id may be reused).
    """

    target_id: int
    label: str = field(default="", compare=False)
    #: The object itself, when known: kept alive so that its id cannot be reused by another
    #: object while the guard exists, and compared with `is` by the generated code.
    obj: object = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(obj: object) -> IdMatch:
        """The identity check for `obj` (which it keeps alive)."""
        return IdMatch(id(obj), _short_repr(obj), obj)

    def holds_object(self) -> bool:
        """Whether `obj` is the expected object itself (then `value is obj` is the check)."""
        return id(self.obj) == self.target_id  # NOTE: `obj` None stands for None itself

    def describe(self, subject: str) -> str:
        return f"id({subject}) == {self.target_id}  # {self.label}"


def _is_torch_constant(value: object) -> bool:
    cls = type(value)
    return cls.__module__ == "torch" and cls.__name__ in ("dtype", "device")


def is_guardable_constant(value: object) -> bool:
    """Whether EqualsMatch supports `value`: ints, floats (NaN too), strs, bools, None,
    enum members, torch.dtype, torch.device, and tuples of those."""
    if value is None or type(value) in (int, float, str, bool):
        return True
    if isinstance(value, enum.Enum) or _is_torch_constant(value):
        return True
    if type(value) is tuple:
        return all(is_guardable_constant(item) for item in value)
    return False


def constant_matches(value: object, expected: object) -> bool:
    """The meaning of EqualsMatch: same exact type and equal value.

    NaN matches NaN; `-0.0` does not match `0.0`; `True` does not match `1`; tuples match
    elementwise; dtypes and enum members match by identity.
    """
    if expected is None or type(expected) is bool:
        return value is expected
    if type(expected) is float:
        if math.isnan(expected):
            return type(value) is float and value != value  # noqa: PLR0124  # NaN test
        if expected == 0.0:  # 0.0 == -0.0, but they are different constants
            return (type(value) is float and value == 0.0
                    and math.copysign(1.0, value) == math.copysign(1.0, expected))
        return type(value) is float and value == expected
    if type(expected) in (int, str):
        return type(value) is type(expected) and value == expected
    if type(expected) is tuple:
        if type(value) is not tuple or len(value) != len(expected):
            return False
        return all(constant_matches(v, e) for v, e in zip(value, expected))
    if isinstance(expected, enum.Enum) or type(expected).__name__ == "dtype":
        return value is expected
    # torch.device
    return type(value) is type(expected) and value == expected


@dataclass(frozen=True, slots=True)
class EqualsMatch(Check):
    """The value equals a constant of the same type (see `constant_matches`)."""

    value: Any

    def __post_init__(self) -> None:
        if not is_guardable_constant(self.value):
            raise TypeError(f"EqualsMatch does not support constants of type "
                            f"{type(self.value).__name__}: {self.value!r}")

    def describe(self, subject: str) -> str:
        return f"{subject} == {self.value!r}"


@dataclass(frozen=True, slots=True)
class LengthMatch(Check):
    """`len(value) == length`."""

    length: int

    def describe(self, subject: str) -> str:
        return f"len({subject}) == {self.length}"


@dataclass(frozen=True, slots=True)
class DictKeysMatch(Check):
    """`tuple(value.keys()) == keys`: the same keys in the same order. Keys that are not
    constants (the tensors keying an optimizer's `state`) match by identity."""

    keys: tuple[Any, ...]

    @property
    def by_identity(self) -> bool:
        """Whether some key is an object matched by identity, not a constant."""
        return not all(is_guardable_constant(key) for key in self.keys)

    def describe(self, subject: str) -> str:
        if self.by_identity:
            return f"keys of {subject} are the {len(self.keys)} expected objects, in order"
        return f"tuple({subject}.keys()) == {self.keys!r}"


def dict_keys_match(value: Any, keys: tuple[Any, ...]) -> bool:
    """`DictKeysMatch` with object keys: the same length, each key the expected object (or,
    for a constant key, an equal constant); never calls a tensor's `==`."""
    if len(value) != len(keys):
        return False
    for got, expected in zip(value, keys, strict=True):
        if got is not expected and not (is_guardable_constant(expected)
                                        and constant_matches(got, expected)):
            return False
    return True


@dataclass(frozen=True, slots=True)
class KeyAbsent(Check):
    """`key not in value`: a name is not in a namespace (an instance `__dict__` without an
    attribute that would shadow a method, a module's globals without a name that would shadow
    a builtin, a class `__dict__` before the class that defines an inherited attribute)."""

    key: Any

    def __post_init__(self) -> None:
        if not is_guardable_constant(self.key):
            raise TypeError(f"KeyAbsent needs a constant key, got {self.key!r}")

    def describe(self, subject: str) -> str:
        return f"{self.key!r} not in {subject}"


@dataclass(frozen=True, slots=True)
class IdentityBind(Check):
    """Names the object at this source `slot`, for an `AliasCheck` (always holds).

    Added by `GuardBuilder.add_aliasing`.
    """

    slot: str

    def describe(self, subject: str) -> str:
        return f"{self.slot} = {subject}  # identity"


@dataclass(frozen=True, slots=True)
class AliasCheck(Check):
    """How the objects bound to slots alias: within each group every slot is the same object,
    and the objects of different groups are pairwise distinct.

    Placed right after its last slot is bound. `labels` holds the source names of `groups`,
    for messages. Added by `GuardBuilder.add_aliasing`.
    """

    groups: tuple[tuple[str, ...], ...]
    labels: tuple[tuple[str, ...], ...] = field(default=(), compare=False)

    def slots(self) -> frozenset[str]:
        """Every slot the check reads."""
        return frozenset(slot for group in self.groups for slot in group)

    def label(self, slot: str) -> str:
        """The source name of `slot` (the slot itself without labels)."""
        for group, names in zip(self.groups, self.labels):
            for member, name in zip(group, names):
                if member == slot:
                    return name
        return slot

    def describe(self, subject: str) -> str:
        parts = [" is ".join(self.label(s) for s in group) for group in self.groups
                 if len(group) > 1]
        heads = [self.label(group[0]) for group in self.groups]
        if len(heads) > 1:
            parts.append("distinct objects: " + ", ".join(heads))
        return "aliasing: " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class NotNone(Check):
    """`value is not None`."""

    def describe(self, subject: str) -> str:
        return f"{subject} is not None"


@dataclass(frozen=True, slots=True)
class TensorMatch(Check):
    """A tensor's exact class, dtype, device, layout, requires_grad, sizes, strides, and
    dispatch keys.

    A `None` entry in `shape` or `strides` is left unchecked (a dynamic dimension, whose
    size is then usually bound as a symbol and constrained by relations). Strides are
    compared only where they can matter: at dimensions whose size is not 1, and not at all
    when the tensor has no elements. `dispatch_keys` is the raw dispatch key set
    (`torch._C._dispatch_keys(t).raw_repr()`), or None to leave it unchecked.

    `placement` pins where the tensor's elements lie: (storage offset, is_leaf). With it,
    every stride is compared (size-1 dimensions and empty tensors included), and so are the
    storage offset and leafness. Capture pins module parameters and buffers, whose
    placement never changes in practice, so a backend need not re-read it on every call.
    Build with `TensorMatch.from_tensor(t, dynamic_dims=...)`.
    """

    cls: type
    dtype: Any
    device: Any
    requires_grad: bool
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]
    dispatch_keys: int | None = None
    #: The tensor's layout; None stands for `torch.strided`.
    layout: Any = None
    #: (storage offset, is_leaf) when pinned (see above), else None.
    placement: tuple[int, bool] | None = None

    @staticmethod
    def from_tensor(tensor: Any, dynamic_dims: tuple[int, ...] | frozenset[int] = (),
                    *, dispatch_keys: bool | None = None, pinned: bool = False
                    ) -> TensorMatch:
        """The match for `tensor` as it is now, leaving `dynamic_dims` unchecked.

        `dispatch_keys`: record the key set (default: `GuardsConfig.tensor_dispatch_keys`).
        `pinned`: record its placement too (every stride, storage offset, leafness); only
        without dynamic dimensions.

        With dynamic dimensions, a stride is left unchecked too if it may depend on a
        dynamic size: when some dynamic dimension has a smaller stride (is further inside).
        """
        import torch

        dynamic = frozenset(dynamic_dims)
        sizes = tuple(int(s) for s in tensor.shape)
        strides_now = tuple(int(s) for s in tensor.stride())
        shape = tuple(None if i in dynamic else s for i, s in enumerate(sizes))
        strides = tuple(
            None if any(strides_now[j] < st for j in dynamic if j != i) else st
            for i, st in enumerate(strides_now)
        )
        if dispatch_keys is None:
            from guards import config

            dispatch_keys = bool(config.options.tensor_dispatch_keys)
        keys = torch._C._dispatch_keys(tensor).raw_repr() if dispatch_keys else None
        layout = None if tensor.layout is torch.strided else tensor.layout
        placement = None
        if pinned:
            if dynamic:
                raise ValueError("TensorMatch.from_tensor: a pinned tensor has no dynamic "
                                 "dimensions")
            strides = strides_now
            placement = (int(tensor.storage_offset()), bool(tensor.is_leaf))
        return TensorMatch(type(tensor), tensor.dtype, tensor.device,
                           bool(tensor.requires_grad), shape, strides, keys, layout, placement)

    def expected_layout(self) -> Any:
        """The layout required (`torch.strided` unless recorded otherwise)."""
        if self.layout is not None:
            return self.layout
        import torch

        return torch.strided

    def describe(self, subject: str) -> str:
        keys = "" if self.dispatch_keys is None else f", dispatch_keys={self.dispatch_keys:#x}"
        if self.layout is not None:
            keys += f", layout={self.layout}"
        if self.placement is not None:
            keys += (f", pinned: every stride, storage_offset={self.placement[0]}, "
                     f"is_leaf={self.placement[1]}")
        return (f"tensor {subject}: {_type_name(self.cls)} {self.dtype} {self.device} "
                f"requires_grad={self.requires_grad} shape={_dims(self.shape)} "
                f"strides={_dims(self.strides)}{keys}")


@dataclass(frozen=True, slots=True)
class GlobalStateMatch(Check):
    """Torch's global state as it was at compile time; `None` fields are unchecked.

    `autocast` is a tuple of (device_type, enabled, dtype) per device type checked.
    Build with `GlobalStateMatch.current()`. Hangs off the tree's root (no source).
    """

    grad_enabled: bool | None = None
    default_dtype: Any = None
    deterministic: bool | None = None
    autocast: tuple[tuple[str, bool, Any], ...] | None = None

    @staticmethod
    def current(autocast_devices: tuple[str, ...] = ("cpu", "cuda")) -> GlobalStateMatch:
        """The state now: grad mode, default dtype, deterministic algorithms, autocast."""
        import torch

        autocast = tuple(
            (device, bool(torch.is_autocast_enabled(device)), torch.get_autocast_dtype(device))
            for device in autocast_devices
        )
        return GlobalStateMatch(
            grad_enabled=torch.is_grad_enabled(),
            default_dtype=torch.get_default_dtype(),
            deterministic=torch.are_deterministic_algorithms_enabled(),
            autocast=autocast,
        )

    def describe(self, subject: str) -> str:
        parts = []
        if self.grad_enabled is not None:
            parts.append(f"grad_enabled={self.grad_enabled}")
        if self.default_dtype is not None:
            parts.append(f"default_dtype={self.default_dtype}")
        if self.deterministic is not None:
            parts.append(f"deterministic={self.deterministic}")
        if self.autocast is not None:
            parts.append("autocast=" + ",".join(
                f"{d}:{'on' if on else 'off'}:{dt}" for d, on, dt in self.autocast))
        return "global state: " + " ".join(parts)


@dataclass(frozen=True, slots=True)
class BackendMatch(Check):
    """The backend active for this call (see `backend_scope`) is the one compiled for.

    Keeps one function compiled with two backends as two cache entries. Hangs off the root.
    """

    backend_id: int
    label: str = field(default="", compare=False)
    #: The backend itself (kept alive so that its id stays its own); not compared.
    backend: object = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(backend: object) -> BackendMatch:
        """The check that `backend` is the active backend."""
        return BackendMatch(id(backend), _short_repr(backend), backend)

    def describe(self, subject: str) -> str:
        return f"active backend is {self.label} (id {self.backend_id})"


@dataclass(frozen=True, slots=True)
class SymbolBind(Check):
    """Binds the int at this source to a size symbol (`s0 = L['x'].shape[0]`).

    Fails if the value is not an int. Added by `GuardBuilder.bind_symbol`.
    """

    symbol: str

    def describe(self, subject: str) -> str:
        return f"{self.symbol} = {subject}"


@dataclass(frozen=True, slots=True)
class RelationCheck(Check):
    """A relation between bound size symbols, placed right after its last symbol is bound.

    Added by `GuardBuilder.add_relation`.
    """

    relation: Relation

    def describe(self, subject: str) -> str:
        return f"assert {self.relation.render()}"


def _type_name(cls: type) -> str:
    module = cls.__module__
    if module in ("builtins", ""):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _short_repr(obj: object, limit: int = 60) -> str:
    """A one-line description of `obj` for messages (never raises)."""
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        kind = "class" if isinstance(obj, type) else "function"
        return f"<{kind} {getattr(obj, '__qualname__', '?')}>"
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001  # a broken __repr__ must not break guard building
        text = ""
    if not text or "\n" in text or len(text) > limit:
        text = f"<{type(obj).__qualname__} object at {id(obj):#x}>"
    return text


def _dims(values: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("?" if v is None else str(v) for v in values) + ")"
