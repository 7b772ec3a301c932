"""What to do with each callable: inline it, put it in the graph, or refuse.

Rules go by module prefix and callable kind, plus a short override table; user code is
inlined by default, torch callables go in the graph.
"""

from __future__ import annotations

import enum
import inspect
import types

import torch


class Decision(enum.Enum):
    INLINE = "inline"
    GRAPH = "graph"
    SKIP = "skip"


# Python functions under these torch modules are inlined rather than put in the graph
# (module code, decorators and helpers whose bodies are ordinary Python).
_INLINE_TORCH_PREFIXES = (
    "torch.nn.modules.",
    "torch.utils._contextlib",
    "torch.nn.utils.parametrize",
    "torch.nn.utils.clip_grad",  # reads and scales `.grad`: state a graph op cannot see
    "torch.autograd.grad_mode",
    "torch.amp.autocast_mode",
    "torch.utils._pytree",
    "torch._jit_internal",
)
# Modules whose functions must never be traced into (they touch interpreter state).
_SKIP_PREFIXES = ("threading", "logging", "warnings", "inspect", "importlib", "abc", "typing")

_disallowed: set[int] = set()
_allowed: set[int] = set()
_disabled_codes: set[types.CodeType] = set()


def allow_in_graph(fn: object) -> None:
    """Always put calls to `fn` in the graph as one node."""
    _allowed.add(id(fn))


def disallow_in_graph(fn: object) -> None:
    """Never put `fn` in the graph (calls to it are unsupported)."""
    _disallowed.add(id(fn))


def mark_disabled(code: types.CodeType) -> None:
    """Calls reaching `code` run eagerly (`capture.disable`)."""
    _disabled_codes.add(code)


def is_disabled(code: types.CodeType) -> bool:
    return code in _disabled_codes


def module_of(fn: object) -> str:
    mod = getattr(fn, "__module__", None)
    if isinstance(mod, str):
        return mod
    self_obj = getattr(fn, "__self__", None)
    if isinstance(self_obj, types.ModuleType):
        return self_obj.__name__
    objclass = getattr(fn, "__objclass__", None)
    if objclass is not None:
        return str(getattr(objclass, "__module__", ""))
    return ""


def is_tensor_method(fn: object) -> bool:
    """A method descriptor or Python function defined on torch.Tensor / TensorBase."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return False
    for cls in (torch.Tensor, torch._C.TensorBase):
        if cls.__dict__.get(name) is fn:
            return True
    return False


def decide(fn: object) -> Decision:
    """The decision for a real callable that has no special handler."""
    key = id(fn)
    if key in _allowed:
        return Decision.GRAPH
    if key in _disallowed:
        return Decision.SKIP
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return Decision.GRAPH
    mod = module_of(fn)
    if inspect.isfunction(fn):
        if fn.__code__ in _disabled_codes:
            return Decision.SKIP
        if mod.startswith("torch"):
            if mod.startswith(_INLINE_TORCH_PREFIXES):
                return Decision.INLINE
            return Decision.GRAPH
        if mod.startswith(_SKIP_PREFIXES):
            return Decision.SKIP
        return Decision.INLINE
    if mod.startswith("torch") or is_tensor_method(fn):
        return Decision.GRAPH
    return Decision.SKIP
