"""Iterators whose items come from guarded sources: a deque read by index, and a loop's
iterator handed over a graph break (`capture.contexts.LiveIterator`) read through the
container it iterates.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from guards.sources import AttrSource, ItemSource, Source

from capture.contexts import LiveIterator
from capture.graph_break import GraphBreakKind, unsupported
from capture.interp import dispatch
from capture.output_graph import GuardKind
from capture.values import DictIteratorValue, DictValue, IteratorValue, Value
from capture.values.wrap import wrap

if TYPE_CHECKING:
    from capture.interp.translator import Translator

#: Iterables whose items cannot change (their identity is guarded with the object).
IMMUTABLE_ITERABLES = (tuple, frozenset, str, bytes, range)


def live_iterator(tx: Translator, live: LiveIterator, source: Source) -> IteratorValue:
    """A loop's iterator handed over a graph break (`capture.contexts.LiveIterator`): the
    container read through its guarded source, iterated from the same position."""
    for attr in ("kind", "index", "size"):
        tx.output.add_guard(AttrSource(source, attr), GuardKind.CONST_EQ, getattr(live, attr))
    container = wrap(tx.output, live.container, AttrSource(source, "container"))
    if not isinstance(live.container, list) and len(live.container) != live.size:
        raise unsupported(GraphBreakKind.EXCEPTION,
                          f"RuntimeError: {type(live.container).__name__} changed size "
                          "during iteration")
    if isinstance(container, DictValue):
        it: IteratorValue = DictIteratorValue(container, live.kind)
    else:
        it = dispatch.iterate(tx, container)
    it.index = live.index
    return it


def deque_items(tx: Translator, value: Value, dq: collections.deque[Any],
                source: Source) -> IteratorValue:
    """A deque's items, each read through its index and guarded, and its length guarded."""
    tx.output.add_guard(source, GuardKind.LEN, len(dq))
    return IteratorValue([wrap(tx.output, item, ItemSource(source, i))
                          for i, item in enumerate(dq)], value)
