"""Which checks of a generated guard go to the native checker, and its constructor arguments.

In: the checks met while generating one guard function (TensorMatch on a local variable of
the generated code, the root GlobalStateMatch and BackendMatch). Out: a `NativeBatch` that
builds one `Checker` and the call `checker.check(v0, v1, ...)` the generated function makes
once, after every accessor has been read (a guard's result is a conjunction of side-effect
free checks, so checking the batch last gives the same pass/fail as checking in tree order).

A tensor check goes native only if the native checker reads exactly what the Python check
reads: its expected class is `torch.Tensor`, or a subclass whose `__torch_function__` is the
default or disabled one and that overrides none of the attributes the Python check uses
(`dtype`, `shape`, `stride`, ...). Other classes keep the generated Python check.
"""

from __future__ import annotations

from typing import Any

from guards.checks import BackendMatch, GlobalStateMatch, TensorMatch
from guards.state import _ACTIVE_BACKEND

#: Attributes the Python tensor check and the interpreter read: a subclass overriding one of
#: them could answer differently from the tensor's own metadata.
_READ_ATTRIBUTES = frozenset({
    "__getattribute__", "__getattr__", "dtype", "device", "is_cpu",
    "is_cuda", "get_device", "layout", "requires_grad", "shape", "size", "stride",
    "is_contiguous", "dim", "ndim",
})


def native_class(cls: object) -> bool:
    """Whether instances of `cls` can be checked natively (see module doc)."""
    import torch

    if cls is torch.Tensor:
        return True
    if not isinstance(cls, type) or not issubclass(cls, torch.Tensor):
        return False
    handler = getattr(cls, "__torch_function__", None)
    default = getattr(torch.Tensor.__torch_function__, "__func__", None)
    if handler is not torch._C._disabled_torch_function_impl and (
            getattr(handler, "__func__", None) is not default):
        return False
    for klass in cls.__mro__:
        if klass is torch.Tensor:
            return True
        if _READ_ATTRIBUTES & vars(klass).keys():
            return False
    return False


def tensor_spec(check: TensorMatch) -> tuple[Any, ...] | None:
    """The Checker's tensor spec for `check`, or None if it must stay in Python."""
    import torch

    if not native_class(check.cls):
        return None
    if type(check.dtype) is not torch.dtype or type(check.device) is not torch.device:
        return None
    offset, leaf = check.placement if check.placement is not None else (None, None)
    return (check.cls, check.dtype, check.device, check.expected_layout(),
            check.requires_grad, check.shape, check.strides, check.dispatch_keys, offset, leaf)


def state_spec(check: GlobalStateMatch) -> tuple[Any, ...]:
    """The Checker's global-state spec for `check`."""
    return (check.grad_enabled, check.default_dtype, check.deterministic, check.autocast)


class NativeBatch:
    """The native part of one generated function: tensor checks with the local variable
    each applies to, at most one global-state check and at most one backend check."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.args: list[str] = []
        self.tensors: list[tuple[Any, ...]] = []
        self.notes: list[str] = []
        self.state: tuple[Any, ...] | None = None
        self.backend: tuple[Any, ...] | None = None

    def take_tensor(self, check: TensorMatch, var: str, subject: str) -> bool:
        """Take `check` on the local `var` (True), or leave it to Python (False)."""
        spec = tensor_spec(check)
        if spec is None:
            return False
        self.args.append(var)
        self.tensors.append(spec)
        self.notes.append(f"{var}: {check.describe(subject)}")
        return True

    def take_state(self, check: GlobalStateMatch) -> bool:
        """Take the global-state check (only the first one met)."""
        if self.state is not None:
            return False
        self.state = state_spec(check)
        self.notes.append(check.describe(""))
        return True

    def take_backend(self, check: BackendMatch) -> bool:
        """Take the backend check (only the first one met)."""
        if self.backend is not None:
            return False
        self.backend = (_ACTIVE_BACKEND, check.backend_id)
        self.notes.append(check.describe(""))
        return True

    def empty(self) -> bool:
        """Whether nothing was taken (then no native call is made)."""
        return not self.tensors and self.state is None and self.backend is None

    def checker(self) -> Any:
        """A new native Checker for everything taken (raises TypeError/ValueError on a spec
        the native side rejects; the caller then generates pure Python)."""
        return self.module.Checker(self.tensors, self.state, self.backend)
