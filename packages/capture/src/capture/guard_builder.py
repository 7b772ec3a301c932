"""Guard records collected while tracing -> a `guards.GuardTree`."""

from __future__ import annotations

from collections.abc import Iterable

import guards
from guards.checks import is_guardable_constant

from capture.output_graph import GuardKind, GuardRecord


def build_tree(records: Iterable[GuardRecord], global_state: guards.GlobalStateMatch) -> guards.GuardTree:
    """The guard tree for `records` plus the global-state check taken before tracing."""
    builder = guards.GuardBuilder()
    builder.add_global(global_state)
    for record in records:
        kind = record.kind
        expected = record.expected
        if kind is GuardKind.TENSOR_MATCH:
            builder.add(record.source, guards.TensorMatch.from_tensor(expected))
        elif kind is GuardKind.ID_MATCH:
            builder.add(record.source, guards.IdMatch.of(expected))
        elif kind is GuardKind.CONST_EQ:
            if is_guardable_constant(expected):
                builder.add(record.source, guards.EqualsMatch(expected))
            else:
                builder.add(record.source, guards.TypeMatch(type(expected)))
        elif kind is GuardKind.TYPE_MATCH:
            builder.add(record.source, guards.TypeMatch(expected))
        elif kind is GuardKind.LEN:
            builder.add(record.source, guards.LengthMatch(expected))
        elif kind is GuardKind.DICT_KEYS:
            builder.add(record.source, guards.DictKeysMatch(tuple(expected)))
    return builder.build()
