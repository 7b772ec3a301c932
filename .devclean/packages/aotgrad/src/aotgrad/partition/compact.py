"""Saved views of a much larger storage are saved as compact copies.

A saved value keeps its whole storage alive: the CLS token `x[:, 0]` of a ViT's last
layer norm (8 x 192 floats) held the 8 x 65 x 192 output it is a view of, 399 KB for 6 KB,
while `min_cut` priced it at the view's bytes. inductor computes such a view into a buffer
of its own when nothing else needs the larger value; aot_eager returned the view. `split`
saves a contiguous copy instead wherever the views of one storage that are saved (and not
the storage's own value) take at most half its bytes; the accounting of saved bytes
(`split.activation_bytes`) follows the same rule, so the plan, the Pareto plot and what
saved-tensor hooks measure agree on every backend.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import fx

from aotgrad.partition.analysis import example_value, storage_root, value_bytes


def compact_copies(nodes: Iterable[fx.Node]) -> set[fx.Node]:
    """The saved views among `nodes` that are saved as contiguous copies."""
    saved = set(nodes)
    views: dict[fx.Node, list[fx.Node]] = {}
    for node in saved:
        root = storage_root(node)
        if root is node or root.op == "placeholder":
            continue
        if isinstance(example_value(node), torch.Tensor):
            views.setdefault(root, []).append(node)
    copies: set[fx.Node] = set()
    for root, group in views.items():
        if root in saved:
            continue  # NOTE: the storage is saved anyway: its views cost nothing more
        if 2 * sum(value_bytes(v) for v in group) <= value_bytes(root):
            copies.update(group)
    return copies


def saved_storage_bytes(nodes: Iterable[fx.Node]) -> int:
    """Bytes of what saving `nodes` keeps alive: each storage once (views of one value
    share it), primals' excluded (alive anyway), compact copies at their own bytes."""
    saved = list(nodes)
    copies = compact_copies(saved)
    roots = {storage_root(n) for n in saved if n not in copies}
    return (sum(value_bytes(r) for r in roots if r.op != "placeholder")
            + sum(value_bytes(n) for n in copies))


def contiguous_copy(graph: fx.Graph, value: fx.Node, of: fx.Node) -> fx.Node:
    """A node of `graph` that copies `value` (the forward's copy of joint node `of`) into
    contiguous memory, with its example value."""
    copy = graph.call_function(
        torch.ops.aten.clone.default, (value,), {"memory_format": torch.contiguous_format})
    copy.meta = dict(of.meta)
    example = example_value(of)
    assert isinstance(example, torch.Tensor)
    copy.meta["example_value"] = contiguous_like(example)
    return copy


def contiguous_like(example: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor like `example` (a fake tensor stays fake)."""
    return example.clone(memory_format=torch.contiguous_format)
