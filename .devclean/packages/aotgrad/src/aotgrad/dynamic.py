"""Symbolic sizes in aotgrad: a captured graph whose placeholders have symbolic example
values (capture made those sizes dynamic) is traced once on those fakes, in capture's own
fake mode and ShapeEnv, so one forward (and backward) graph serves every size.

The ShapeEnv is capture's: a relation the ATen trace relies on (a decomposition that
branches on a size) is recorded there while the backend is called, before capture builds
the entry's guards, so the guards check it. That is why the symbolic trace happens only
in that call (`AotCompiled.prepare`); a later compile (another grad mode, say) traces the
concrete sizes of its call, keyed by them, as for static graphs.

An int argument capture made symbolic (a placeholder whose example value is a SymInt) is an
input of the ATen graphs (forward and backward), not a constant: the compiled graphs take it
as an argument and serve every value (`SymbolicSignature.inputs`).

IR in: the captured GraphModule's placeholder example values. IR out: per flat argument
position the symbolic fake or SymInt (or None), a cache key where symbolic sizes, strides
and ints are left out (the symbolic signature), and the fakes to trace with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

__all__ = ["SymbolicSignature", "fake_mode_of", "symbolic_signature"]


def _symbolic(value: object) -> bool:
    if _symbolic_int(value):
        return True
    return isinstance(value, FakeTensor) and any(
        not isinstance(s, int) for s in (*value.shape, *value.stride()))


def _symbolic_int(value: object) -> bool:
    """An int argument capture made a size symbol (its example value is a SymInt)."""
    return isinstance(value, torch.SymInt) and bool(
        getattr(value.node.expr, "is_Symbol", False))


class SymbolicSignature:
    """Per flat argument of a compiled captured graph: the fake with symbolic sizes (or the
    SymInt) capture traced it with, or None (a concrete argument)."""

    def __init__(self, examples: Sequence[object], mode: FakeTensorMode | None = None) -> None:
        self.examples = list(examples)
        #: capture's fake mode (its ShapeEnv holds the symbols), for a graph whose symbols
        #: are ints only: its tensors are static, and the trace must still use that mode
        self.mode = mode
        #: flat argument positions of the symbolic ints
        self.ints = frozenset(i for i, e in enumerate(self.examples) if _symbolic_int(e))
        self.masks: list[tuple[frozenset[int], frozenset[int]] | None] = [
            (frozenset(i for i, s in enumerate(e.shape) if not isinstance(s, int)),
             frozenset(i for i, s in enumerate(e.stride()) if not isinstance(s, int)))
            if isinstance(e, FakeTensor) else None for e in self.examples]

    def key(self, key: tuple[Any, ...], leaves: Sequence[Any]) -> tuple[Any, ...] | None:
        """`key` (an `AotCompiled` key ending with one part per leaf) with the symbolic
        sizes and strides left out; None when `leaves` are not the graph's flat arguments."""
        if len(leaves) != len(self.examples) or len(key) < len(leaves):
            return None
        head = key[:len(key) - len(leaves)]
        parts = list(key[len(key) - len(leaves):])
        for i, (leaf, mask) in enumerate(zip(leaves, self.masks)):
            if i in self.ints:
                if type(leaf) is not int:
                    return None
                parts[i] = ("symbolic", int)
                continue
            if mask is None:
                continue
            example = self.examples[i]
            if not isinstance(leaf, torch.Tensor) or not isinstance(example, torch.Tensor) or (
                    leaf.dim() != example.dim()):
                return None
            part = list(parts[i])
            sizes, strides = mask
            part[2] = tuple(None if d in sizes else s for d, s in enumerate(part[2]))
            part[3] = tuple(None if d in strides else s for d, s in enumerate(part[3]))
            parts[i] = ("symbolic", *part)
        return (*head, *parts)

    def inputs(self, leaves: Sequence[Any]) -> list[int]:
        """The positions of the compiled graphs' inputs among `leaves`: the tensors and the
        symbolic ints, in order."""
        return [i for i, leaf in enumerate(leaves)
                if isinstance(leaf, torch.Tensor) or i in self.ints]

    def fakes(self, leaves: Sequence[Any]) -> list[Any]:
        """`leaves` with each symbolic argument replaced by its fake (requires_grad and
        leafness as the real argument's) or its SymInt."""
        out = list(leaves)
        for i in self.ints:
            out[i] = self.examples[i]
        if self.mode is not None and not any(isinstance(e, FakeTensor) for e in self.examples):
            # NOTE: symbolic ints only: one tensor made a fake of capture's mode, where the
            # trace then runs (`fake_mode_of`)
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, torch.Tensor) and not isinstance(leaf, FakeTensor):
                    out[i] = _fake_like(self.mode, leaf)
                    break
        for i, example in enumerate(self.examples):
            if isinstance(example, FakeTensor):
                real = leaves[i]
                fake: torch.Tensor = example
                if bool(real.requires_grad) != bool(fake.requires_grad) or (
                        real.is_leaf != fake.is_leaf):
                    fake = _fake_like(example.fake_mode, real, example)
                out[i] = fake
        return out


def _fake_like(mode: FakeTensorMode, real: torch.Tensor,
               meta: torch.Tensor | None = None) -> torch.Tensor:
    """A fake of `mode` with the metadata of `meta` (default: `real`), requires_grad and
    leafness as `real`'s."""
    meta = real if meta is None else meta
    with mode:
        fake = torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype,
                                   device=meta.device, requires_grad=bool(real.requires_grad))
        if real.requires_grad and not real.is_leaf:
            # NOTE: a history under the caller's no_grad too (a graph that turns grad on)
            with torch.enable_grad():
                fake = fake.clone()
    return fake


def symbolic_signature(gm: fx.GraphModule, num_state: int) -> SymbolicSignature | None:
    """The signature of `gm` called with `num_state` parameters and buffers first, when
    one of its placeholders has symbolic sizes (None otherwise)."""
    examples: list[object] = [None] * num_state
    mode: FakeTensorMode | None = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value = node.meta.get("example_value")
            examples.append(value if _symbolic(value) else None)
            if isinstance(value, FakeTensor) and mode is None:
                mode = value.fake_mode
    if not any(e is not None for e in examples):
        return None
    return SymbolicSignature(examples, mode)


def fake_mode_of(values: Sequence[object]) -> FakeTensorMode | None:
    """The fake mode of the first fake tensor among `values` (None if there is none)."""
    for value in values:
        if isinstance(value, FakeTensor):
            mode: FakeTensorMode = value.fake_mode
            return mode
    return None
