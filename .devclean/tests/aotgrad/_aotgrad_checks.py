"""Shared checks of aotgrad's tests: functionalize a function's ATen graph, assert that no
node mutates (by the op's schema), and compare with eager, final input state included."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from aotgrad.backend import run_graph_as_is
from aotgrad.decompositions import get_decompositions
from aotgrad.functionalize import FunctionalGraph, functionalize
from aotgrad.runtime import InferenceRunner
from aotgrad.trace import fake_inputs, new_fake_mode, trace
from torch.utils._pytree import tree_flatten, tree_unflatten


def assert_no_mutable_ops(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            assert not target._schema.is_mutable, f"mutable op left: {node.format_node()}"


def clone_args(args: Sequence[Any]) -> list[Any]:
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


def assert_same(actual: Any, expected: Any) -> None:
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    assert spec_a == spec_e, (spec_a, spec_e)
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e)
        else:
            assert a == e


def _aliases(value: torch.Tensor, other: torch.Tensor) -> bool:
    return value.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()


def check_functionalized(fn: Callable[..., Any], *args: Any,
                         decompositions: str = "none") -> FunctionalGraph:
    """Functionalize `fn`'s ATen graph and check it against eager (outputs, inputs after the
    call, and outputs aliasing inputs as in eager)."""
    mode = new_fake_mode()
    raw, spec = trace(fn, fake_inputs(mode, args), fake_mode=mode,
                      decompositions=get_decompositions(decompositions))
    functional = functionalize(raw, mode)
    assert_no_mutable_ops(functional.gm)
    eager_args = clone_args(args)
    our_args = clone_args(args)
    expected = fn(*eager_args)
    runner = InferenceRunner(functional, run_graph_as_is)
    tensors = [a for a in our_args if isinstance(a, torch.Tensor)]
    actual = tree_unflatten(runner(tensors), spec)
    assert_same(actual, expected)
    assert_same(our_args, eager_args)
    flat_expected, _ = tree_flatten(expected)
    flat_actual, _ = tree_flatten(actual)
    for e, a in zip(flat_expected, flat_actual):
        if not isinstance(e, torch.Tensor):
            continue
        for ea, oa in zip(eager_args, our_args):
            if isinstance(ea, torch.Tensor):
                assert _aliases(e, ea) == _aliases(a, oa), "output aliasing differs from eager"
    return functional
