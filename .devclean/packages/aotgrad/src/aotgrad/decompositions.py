"""Which decompositions the ATen tracer applies: tables taken from `torch._decomp`.

`"core"` is PyTorch's core ATen decomposition set (the op set backends such as inductor
lower); `"none"` records ops as they reach the dispatcher. Every choice also applies the few
rewrites in `_ALWAYS`, which keep the trace's fake tensors truthful.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch

__all__ = ["DECOMPOSITION_CHOICES", "get_decompositions"]

DECOMPOSITION_CHOICES = ("core", "none")

# NOTE: decompositions whose outputs differ from the op's (torch says so in their comments)
# stay out of the table: the op's autograd formula, recorded above the dispatch level where we
# decompose, reads those outputs. The flash-attention-for-cpu rule returns the attention
# weights where the backward expects the logsumexp (wrong gradients otherwise).
_EXCLUDED: tuple[Any, ...] = (
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
)


def _unique_via_unique2(self: torch.Tensor, sorted: bool = True,  # NOTE: ATen's name
                        return_inverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    out, inverse, _ = torch.ops.aten._unique2.default(self, sorted, return_inverse, False)
    return out, inverse


# NOTE: ops whose fake implementation is missing in some torch releases (2.11 has none for
# `aten._unique`): the fake mode then runs the real kernel on zero-filled inputs, which gives
# a data-dependent op a made-up static size (1 for `unique`). Their equivalents with a fake
# implementation give unbacked sizes instead.
_ALWAYS: dict[Any, Callable[..., Any]] = {
    torch.ops.aten._unique.default: _unique_via_unique2,
}


@functools.cache
def _core() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    for op in _EXCLUDED:
        table.pop(op, None)
    table.update(_ALWAYS)
    return table


def get_decompositions(
    choice: str | Mapping[Any, Callable[..., Any]] | None,
) -> Mapping[Any, Callable[..., Any]]:
    """The table for a choice name ("core", "none") or a user-given table (returned as is)."""
    if choice is None or choice == "none":
        return _ALWAYS
    if isinstance(choice, str):
        if choice == "core":
            return _core()
        raise ValueError(f"unknown decomposition choice {choice!r}; one of {DECOMPOSITION_CHOICES}")
    return {**_ALWAYS, **choice}


def is_aten_op(target: object) -> bool:
    return isinstance(target, torch._ops.OpOverload)
