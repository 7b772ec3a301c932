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
    "torch.optim.",  # optimizer steps: state dicts, param groups, in-place updates
)
# Modules whose functions must never be traced into (they touch interpreter state).
_SKIP_PREFIXES = ("threading", "logging", "warnings", "inspect", "importlib", "abc", "typing")

# NOTE: rules are keyed by id(); each table keeps its object alive so an id is never reused.
_disallowed: dict[int, object] = {}
_allowed: dict[int, object] = {}
_disabled_codes: set[types.CodeType] = set()
_break_markers: dict[int, object] = {}
_constant_results: dict[int, object] = {}
_substitutes: dict[int, tuple[object, types.FunctionType]] = {}


class Rule(enum.Enum):
    """A user's rule for one callable, consulted before any built-in handling."""

    GRAPH_BREAK = "graph_break"
    CONSTANT_RESULT = "assume_constant_result"
    SUBSTITUTE = "substitute_in_graph"
    ALLOW = "allow_in_graph"
    DISALLOW = "disallow_in_graph"


def allow_in_graph(fn: object) -> None:
    """Always put calls to `fn` in the graph as one node."""
    _disallowed.pop(id(fn), None)
    _allowed[id(fn)] = fn


def disallow_in_graph(fn: object) -> None:
    """Never put `fn` in the graph: a call to it is a graph break.

    Raises ValueError when `fn` would not have gone into a graph anyway (user code is
    inlined, other callables run eagerly): `disable` is what keeps such code out."""
    if id(fn) not in _allowed and decide(fn) is not Decision.GRAPH:
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise ValueError(
            f"disallow_in_graph({name}): it is not a callable that capture puts in a graph "
            "(only torch operations and allow_in_graph callables are); to run a function "
            "eagerly, outside any graph, use compiler.disable(fn) instead"
        )
    _allowed.pop(id(fn), None)
    _disallowed[id(fn)] = fn


def mark_graph_break(fn: object) -> None:
    """A call to `fn` from traced code is a graph break (`graph_break()`)."""
    _break_markers[id(fn)] = fn


def assume_constant_result(fn: object) -> None:
    """Calls to `fn` while tracing run for real; the result is a constant of the graph."""
    _constant_results[id(fn)] = fn


def substitute_in_graph(original: object, polyfill: types.FunctionType) -> None:
    """Trace `polyfill` wherever traced code calls `original`."""
    _substitutes[id(original)] = (original, polyfill)


def user_rule(fn: object) -> tuple[Rule, types.FunctionType | None] | None:
    """The rule the user set for `fn` (with the polyfill for SUBSTITUTE), if any."""
    key = id(fn)
    if not (_break_markers or _constant_results or _substitutes or _allowed or _disallowed):
        return None
    if key in _break_markers:
        return Rule.GRAPH_BREAK, None
    if key in _substitutes:
        return Rule.SUBSTITUTE, _substitutes[key][1]
    if key in _constant_results:
        return Rule.CONSTANT_RESULT, None
    if key in _allowed:
        return Rule.ALLOW, None
    if key in _disallowed:
        return Rule.DISALLOW, None
    return None


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
