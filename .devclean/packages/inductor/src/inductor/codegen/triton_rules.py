"""The Triton target's rules for its kernels' shapes: which nodes one kernel may hold
(`triton_can_fuse`: one r dimension per kernel, the device table's fusion rule), whether a
group has symbolic sizes, and the candidate launch configurations a kernel is tuned over
(`triton_configs`)."""

from __future__ import annotations

import math

from inductor.ir.nodes import Buffer, ComputedBuffer
from inductor.scheduler.fusion import FusedGroup, split_node
from inductor.sizevars import is_static
from inductor.symbols import size_symbols

PERSISTENT_MAX = 1024  # NOTE: longest row a persistent reduction holds in one block


def inner_ranges(group: FusedGroup, node: ComputedBuffer) -> tuple[int, ...]:
    """The sizes of `node`'s loops inside the group's outer ones (its r dimension)."""
    assert node.body is not None
    sp = split_node(node.body, group.outer)
    assert sp is not None
    return tuple(sp.inner_ranges)


def inner_numel(group: FusedGroup, node: ComputedBuffer) -> int:
    """The elements of `node`'s r dimension."""
    return math.prod(inner_ranges(group, node))


def more_than_one(numel: object) -> bool:
    """A row of more than one element (a symbolic size is >= 2: `inductor.symbols`)."""
    return not is_static(numel) or int(numel) > 1  # type: ignore[call-overload]


def symbolic_group(group: FusedGroup, buffers: dict[str, Buffer]) -> bool:
    """Whether a group's loops or the layouts of the buffers it touches have symbolic
    sizes (its kernel then takes the size symbols as arguments)."""
    if size_symbols(*group.outer):
        return True
    for n in group.nodes:
        assert n.body is not None
        sp = split_node(n.body, group.outer)
        if sp is not None and size_symbols(*sp.inner_ranges):
            return True
        for name, _ in n.body.reads():
            lay = buffers[name].layout
            if size_symbols(*lay.size, *lay.stride, lay.offset):
                return True
        lay = n.layout
        if size_symbols(*lay.size, *lay.stride, lay.offset):
            return True
    return False


def triton_can_fuse(group: FusedGroup, node: ComputedBuffer, outer: tuple[int, ...]) -> bool:
    """One r dimension per kernel: every node's inner loops cover the same number of
    elements (or none)."""
    sizes: set[int] = set()
    for n in [*group.nodes, node]:
        assert n.body is not None
        sp = split_node(n.body, outer)
        if sp is None:
            return False
        numel = math.prod(sp.inner_ranges)
        if sp.inner_ranges and more_than_one(numel):
            sizes.add(numel)
    return len(sizes) <= 1


def next_pow2(n: int) -> int:
    """The least power of two at least `n` (1 for n <= 1)."""
    return 1 << max(0, (n - 1).bit_length())


POINTWISE_TUNE_MIN = 1 << 20  # NOTE: pointwise kernels over more elements are tuned


def triton_configs(xnumel: int, rnumel: int, reduction: bool, persistent: bool,
                   interpret: bool) -> tuple[tuple[int, int, int], ...]:
    """Candidate (XBLOCK, RBLOCK, warps) of a kernel over `xnumel` rows of `rnumel`."""
    if not reduction:
        total = xnumel * rnumel
        if interpret:
            return ((min(next_pow2(total), 4096), 1, 4),)
        cap = max(16, min(next_pow2(total), 1024))
        if total <= POINTWISE_TUNE_MIN:
            # NOTE: a small pointwise kernel takes about a launch in any block size: one
            # candidate, so a cold start neither compiles nor times the others
            return ((min(1024 if total >= 1 << 18 else 256, cap), 1, 4),)
        cands = [(1024, 1, 4), (512, 1, 4), (256, 1, 4), (128, 1, 4)]
        return tuple(dict.fromkeys((min(x, cap), 1, wp) for x, _, wp in cands))
    rb = next_pow2(rnumel)
    xcap = next_pow2(xnumel)
    if interpret:
        r = rb if persistent else min(rb, 1024)
        return ((max(1, min(xcap, 4096 // r)), r, 4),)
    if persistent:
        out = []
        for elems, warps in ((4096, 8), (2048, 4), (1024, 4), (8192, 8)):
            x = max(1, min(xcap, elems // rb))
            out.append((x, rb, warps if rb >= 256 else 4))
        return tuple(dict.fromkeys(out))
    return tuple(dict.fromkeys((min(x, xcap), min(r, max(16, rb)), wp) for x, r, wp in (
        (1, 2048, 8), (1, 1024, 4), (8, 256, 4), (64, 64, 4), (4, 512, 8))))
