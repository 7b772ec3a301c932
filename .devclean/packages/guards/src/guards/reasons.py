"""The meaning of each check kind in plain Python, with its failure worded for users.

One function per check kind, in a table keyed by the check's class: each returns None when
the check holds and the failure message otherwise. The interpreter (`interpret.py`) walks
the tree with this table; `codegen.py` holds the equivalent fast code per kind.
Messages read like `tensor L['x'] size mismatch at index 0: expected 8, got 16`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from guards.checks import (
    AliasCheck,
    BackendMatch,
    Check,
    DictKeysMatch,
    EqualsMatch,
    GlobalStateMatch,
    IdentityBind,
    IdMatch,
    KeyAbsent,
    LengthMatch,
    NotNone,
    RelationCheck,
    SymbolBind,
    TensorMatch,
    TypeMatch,
    _short_repr,
    _type_name,
    constant_matches,
    dict_keys_match,
)
from guards.dispatch_keys import keys_match
from guards.state import current_backend

#: (check, value, subject, environment) -> None if it holds, else the message. The
#: environment holds bound size symbols (name -> int) and identity slots (IDENTITY_PREFIX +
#: slot -> the object).
Explainer = Callable[[Any, object, str, dict[str, Any]], "str | None"]

#: Prefix of identity slots in the interpreter's environment (apart from size symbols).
IDENTITY_PREFIX = "@"
EXPLAINERS: dict[type[Check], Explainer] = {}


def _explains(kind: type[Check]) -> Callable[[Explainer], Explainer]:
    def register(fn: Explainer) -> Explainer:
        EXPLAINERS[kind] = fn
        return fn

    return register


def explain_check(check: Check, value: object, subject: str, env: dict[str, Any]) -> str | None:
    """None if `check` holds for `value`, else why not (may raise; callers catch)."""
    return EXPLAINERS[type(check)](check, value, subject, env)


@_explains(TypeMatch)
def _type(check: TypeMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    if type(value) is check.cls:
        return None
    return (f"{subject} type mismatch: expected {_type_name(check.cls)}, "
            f"got {_type_name(type(value))}")


@_explains(IdMatch)
def _id(check: IdMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    if id(value) == check.target_id:
        return None
    return f"{subject} is not the expected object {check.label}: got {_short_repr(value)}"


@_explains(EqualsMatch)
def _equals(check: EqualsMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    if constant_matches(value, check.value):
        return None
    return f"{subject} == {check.value!r} failed: got {_short_repr(value)}"


@_explains(LengthMatch)
def _length(check: LengthMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    got = len(value)  # type: ignore[arg-type]  # a TypeError is a failure
    if got == check.length:
        return None
    return f"len({subject}) == {check.length} failed: got {got}"


@_explains(DictKeysMatch)
def _dict_keys(check: DictKeysMatch, value: object, subject: str,
               env: dict[str, Any]) -> str | None:
    if check.by_identity:
        if dict_keys_match(value, check.keys):
            return None
        return f"{subject} keys are not the {len(check.keys)} objects it had (identity)"
    got = tuple(value.keys())  # type: ignore[attr-defined]
    if got == check.keys:
        return None
    return f"{subject} keys mismatch: expected {check.keys!r}, got {got!r}"


@_explains(KeyAbsent)
def _key_absent(check: KeyAbsent, value: object, subject: str,
                env: dict[str, Any]) -> str | None:
    if check.key not in value:  # type: ignore[operator]  # a TypeError is a failure
        return None
    return f"{check.key!r} is now in {subject}: got {_short_repr(value[check.key])}"  # type: ignore[index]


@_explains(IdentityBind)
def _identity_bind(check: IdentityBind, value: object, subject: str,
                   env: dict[str, Any]) -> str | None:
    env[IDENTITY_PREFIX + check.slot] = value
    return None


@_explains(AliasCheck)
def _aliasing(check: AliasCheck, value: object, subject: str,
              env: dict[str, Any]) -> str | None:
    def obj(slot: str) -> object:
        return env[IDENTITY_PREFIX + slot]

    for group in check.groups:
        for slot in group[1:]:
            if obj(slot) is not obj(group[0]):
                return (f"aliasing changed: {check.label(slot)} is no longer "
                        f"{check.label(group[0])} (compiled for one object at both)")
    seen: dict[int, str] = {}
    for group in check.groups:
        head = group[0]
        other = seen.get(id(obj(head)))
        if other is not None:
            return (f"aliasing changed: {check.label(head)} is now the same object as "
                    f"{check.label(other)} (compiled for distinct objects)")
        seen[id(obj(head))] = head
    return None


@_explains(NotNone)
def _not_none(check: NotNone, value: object, subject: str, env: dict[str, Any]) -> str | None:
    return None if value is not None else f"{subject} is not None failed: got None"


def tensor_mismatch(check: TensorMatch, tensor: object, subject: str) -> str | None:
    """Why `tensor` does not match `check`, or None."""
    where = f"tensor {subject}"
    if type(tensor) is not check.cls:
        return (f"{where} type mismatch: expected {_type_name(check.cls)}, "
                f"got {_type_name(type(tensor))}")
    value: Any = tensor  # NOTE: a torch.Tensor (or subclass) from here on
    if value.dtype is not check.dtype:
        return f"{where} dtype mismatch: expected {check.dtype}, got {value.dtype}"
    if value.device != check.device:
        return f"{where} device mismatch: expected {check.device}, got {value.device}"
    layout = check.expected_layout()
    if value.layout is not layout:
        return f"{where} layout mismatch: expected {layout}, got {value.layout}"
    if value.requires_grad is not check.requires_grad:
        return (f"{where} requires_grad mismatch: expected {check.requires_grad}, "
                f"got {value.requires_grad}")
    sizes = tuple(value.shape)
    if len(sizes) != len(check.shape):
        return f"{where} rank mismatch: expected {len(check.shape)} dims, got {len(sizes)}"
    for i, (expected, got) in enumerate(zip(check.shape, sizes)):
        if expected is not None and expected != got:
            return f"{where} size mismatch at index {i}: expected {expected}, got {got}"
    index = stride_mismatch(check.strides, sizes, tuple(value.stride()))
    if index is not None:
        return (f"{where} stride mismatch at index {index}: expected {check.strides[index]}, "
                f"got {value.stride()[index]}")
    if check.placement is not None:
        moved = placement_mismatch(check, value)
        if moved is not None:
            return f"{where} {moved}"
    if check.dispatch_keys is not None and not keys_match(value, check.dispatch_keys):
        import torch

        got_keys = torch._C._dispatch_keys(value)
        return (f"{where} dispatch keys mismatch: expected {check.dispatch_keys:#x}, "
                f"got {got_keys.raw_repr():#x} ({got_keys})")
    return None


def placement_mismatch(check: TensorMatch, tensor: Any) -> str | None:
    """How a pinned tensor moved (every stride, storage offset, leafness), or None."""
    assert check.placement is not None
    offset, leaf = check.placement
    strides = tuple(tensor.stride())
    if strides != check.strides:
        return f"stride mismatch (pinned): expected {check.strides}, got {strides}"
    if tensor.storage_offset() != offset:
        return (f"storage offset mismatch (pinned): expected {offset}, "
                f"got {tensor.storage_offset()}")
    if tensor.is_leaf is not leaf:
        return f"is_leaf mismatch (pinned): expected {leaf}, got {tensor.is_leaf}"
    return None


def stride_mismatch(expected: tuple[int | None, ...], sizes: tuple[int, ...],
                    strides: tuple[int, ...]) -> int | None:
    """The first index where strides differ in a way that matters, else None.

    Strides at dimensions of size 1 never address memory, and neither does any stride of a
    tensor with no elements, so those are not compared.
    """
    if len(strides) != len(expected):
        return 0
    if 0 in sizes:
        return None
    for i, (want, got, size) in enumerate(zip(expected, strides, sizes)):
        if want is not None and size != 1 and want != got:
            return i
    return None


@_explains(TensorMatch)
def _tensor(check: TensorMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    return tensor_mismatch(check, value, subject)


def _on_off(flag: object) -> str:
    return "enabled" if flag else "disabled"


@_explains(GlobalStateMatch)
def _global_state(check: GlobalStateMatch, value: object, subject: str,
                  env: dict[str, Any]) -> str | None:
    import torch

    if check.grad_enabled is not None and torch.is_grad_enabled() is not check.grad_enabled:
        return f"grad mode changed: expected {_on_off(check.grad_enabled)}"
    if check.default_dtype is not None:
        got = torch.get_default_dtype()
        if got is not check.default_dtype:
            return f"default dtype changed: expected {check.default_dtype}, got {got}"
    deterministic = check.deterministic
    if deterministic is not None and torch.are_deterministic_algorithms_enabled() is not deterministic:
        return f"deterministic algorithms changed: expected {_on_off(deterministic)}"
    for device, enabled, dtype in check.autocast or ():
        now = torch.is_autocast_enabled(device)
        if now is not enabled:
            return f"autocast state changed for {device}: expected {_on_off(enabled)}"
        if enabled and torch.get_autocast_dtype(device) is not dtype:
            return (f"autocast dtype changed for {device}: expected {dtype}, "
                    f"got {torch.get_autocast_dtype(device)}")
    return None


@_explains(BackendMatch)
def _backend(check: BackendMatch, value: object, subject: str, env: dict[str, Any]) -> str | None:
    active = current_backend()
    if id(active) == check.backend_id:
        return None
    return f"backend changed: expected {check.label}, got {_short_repr(active)}"


@_explains(SymbolBind)
def _bind(check: SymbolBind, value: object, subject: str, env: dict[str, Any]) -> str | None:
    if type(value) is not int:
        return f"{subject} (symbol {check.symbol}) is not an int: got {_short_repr(value)}"
    env[check.symbol] = value
    return None


@_explains(RelationCheck)
def _relation(check: RelationCheck, value: object, subject: str,
              env: dict[str, Any]) -> str | None:
    if check.relation.evaluate(env):
        return None
    values = ", ".join(f"{s} = {env[s]}" for s in sorted(check.relation.symbols()))
    return f"size relation {check.relation.render()} failed with {values}"
