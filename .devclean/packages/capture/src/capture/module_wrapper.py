"""The wrapper `capture.optimize(module)` returns: calls go through a compiled trampoline
(hooks included); attributes, parameters, state_dict, train/eval and to() are the original's."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

_TRAMPOLINE_SRC = "def __call__(self, *args, **kwargs):\n    return self(*args, **kwargs)\n"


def make_trampoline() -> types.FunctionType:
    """A fresh function (its own code object, so its own cache) that calls a module."""
    namespace: dict[str, Any] = {}
    exec(compile(_TRAMPOLINE_SRC, "<capture module call>", "exec"), namespace)  # noqa: S102
    fn: types.FunctionType = namespace["__call__"]
    return fn


class OptimizedModule(torch.nn.Module):
    """A compiled `nn.Module`: behaves like the original for everything but calls."""

    _orig_mod: torch.nn.Module

    def __init__(self, module: torch.nn.Module, compiled_call: Callable[..., Any]) -> None:
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled_call", compiled_call)
        object.__setattr__(self, "_capture_initialized", True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled_call(self._orig_mod, *args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled_call(self._orig_mod, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        return dir(self._orig_mod)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"

    # Explicit forwards (nn.Module defines these, so __getattr__ would not be reached).
    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        return self._orig_mod.parameters(recurse)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.named_parameters(*args, **kwargs)

    def buffers(self, recurse: bool = True) -> Iterator[torch.Tensor]:
        return self._orig_mod.buffers(recurse)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.named_buffers(*args, **kwargs)

    def children(self) -> Iterator[torch.nn.Module]:
        return self._orig_mod.children()

    def named_children(self) -> Any:
        return self._orig_mod.named_children()

    def modules(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.modules(*args, **kwargs)

    def named_modules(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.named_modules(*args, **kwargs)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def train(self, mode: bool = True) -> OptimizedModule:
        self._orig_mod.train(mode)
        return self

    def eval(self) -> OptimizedModule:
        self._orig_mod.eval()
        return self

    def to(self, *args: Any, **kwargs: Any) -> OptimizedModule:
        self._orig_mod.to(*args, **kwargs)
        return self

    def cuda(self, device: Any = None) -> OptimizedModule:
        self._orig_mod.cuda(device)
        return self

    def cpu(self) -> OptimizedModule:
        self._orig_mod.cpu()
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._orig_mod.zero_grad(set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> OptimizedModule:
        self._orig_mod.requires_grad_(requires_grad)
        return self

    def apply(self, fn: Callable[[torch.nn.Module], None]) -> OptimizedModule:
        self._orig_mod.apply(fn)
        return self

    def register_forward_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.register_forward_hook(*args, **kwargs)

    def register_forward_pre_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.register_forward_pre_hook(*args, **kwargs)

    @property
    def training(self) -> bool:  # type: ignore[override]  # forwards to the original
        return self._orig_mod.training
