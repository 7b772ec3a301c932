"""The only accessors of `node.meta` keys (see INTERFACES.md, "Graph metadata").

Keys: `example_value`, `stack_trace`, `nn_module_stack`, `source_fn`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.fx

EXAMPLE_VALUE = "example_value"
STACK_TRACE = "stack_trace"
NN_MODULE_STACK = "nn_module_stack"
SOURCE_FN = "source_fn"

ModuleStack = dict[str, tuple[str, type]]


@dataclass(frozen=True, slots=True)
class NodeMeta:
    """The typed view of a node's metadata."""

    example_value: Any
    stack_trace: str | None
    nn_module_stack: ModuleStack | None
    source_fn: tuple[str, object] | None


def get_example_value(node: torch.fx.Node) -> Any:
    """The fake value recorded for `node`."""
    return node.meta.get(EXAMPLE_VALUE)


def set_example_value(node: torch.fx.Node, value: Any) -> None:
    """Record the fake value of `node`."""
    node.meta[EXAMPLE_VALUE] = value


def get_stack_trace(node: torch.fx.Node) -> str | None:
    """The user stack trace of `node` in FX's format."""
    value = node.meta.get(STACK_TRACE)
    return value if isinstance(value, str) else None


def set_user_meta(
    node: torch.fx.Node,
    stack_trace: str | None,
    nn_module_stack: ModuleStack | None,
    source_fn: tuple[str, object] | None,
) -> None:
    """Set the three user-facing keys at once."""
    if stack_trace is not None:
        node.meta[STACK_TRACE] = stack_trace
    if nn_module_stack is not None:
        node.meta[NN_MODULE_STACK] = dict(nn_module_stack)
    if source_fn is not None:
        node.meta[SOURCE_FN] = source_fn


def read(node: torch.fx.Node) -> NodeMeta:
    """All four keys of `node`."""
    return NodeMeta(
        node.meta.get(EXAMPLE_VALUE),
        get_stack_trace(node),
        node.meta.get(NN_MODULE_STACK),
        node.meta.get(SOURCE_FN),
    )


def copy_user_meta(src: torch.fx.Node, dst: torch.fx.Node) -> None:
    """Copy stack_trace / nn_module_stack / source_fn from `src` to `dst`."""
    for key in (STACK_TRACE, NN_MODULE_STACK, SOURCE_FN):
        if key in src.meta:
            dst.meta[key] = src.meta[key]
