"""Guard records collected while tracing -> a `guards.GuardTree`."""

from __future__ import annotations

from collections.abc import Iterable

import guards
import torch
from guards.checks import is_guardable_constant
from guards.sources import BufferSource, ParamSource, Source

from capture.output_graph import GuardKind, GuardRecord, Identity, OutputGraph
from capture.shape_guards import ShapeGuards


def build_tree(records: Iterable[GuardRecord], global_state: guards.GlobalStateMatch,
               shapes: ShapeGuards | None = None) -> guards.GuardTree:
    """The guard tree for `records` plus the global-state check taken before tracing, and
    the size guards of symbolic inputs (`shapes`)."""
    builder = guards.GuardBuilder()
    builder.add_global(global_state)
    identities: list[Identity] = []
    dynamic = shapes.dynamic_dims if shapes is not None else {}
    for record in records:
        kind = record.kind
        expected = record.expected
        if kind is GuardKind.TENSOR_MATCH:
            dims = dynamic.get(record.source, frozenset())
            builder.add(record.source, guards.TensorMatch.from_tensor(
                expected, dims, pinned=pinned(record.source, dims)))
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
        elif kind is GuardKind.KEY_ABSENT:
            builder.add(record.source, guards.KeyAbsent(expected))
        elif kind is GuardKind.IDENTITY:
            identities.append(expected)
    if shapes is not None:
        shapes.add_to(builder)
    _add_aliasing(builder, identities)
    return builder.build()


def _add_aliasing(builder: guards.GuardBuilder, identities: list[Identity]) -> None:
    """Guard how the traced objects alias: the sources of one object stay one object, and
    the objects of one group (tensors that could be one object, objects of one type) stay
    distinct objects."""
    groups: dict[object, list[list[Source]]] = {}
    for identity in identities:
        if identity.group is None:
            if len(identity.sources) > 1:
                builder.add_aliasing([identity.sources])
            continue
        groups.setdefault(identity.group, []).append(identity.sources)
    for members in groups.values():
        if len(members) > 1 or len(members[0]) > 1:
            builder.add_aliasing(members)


def pinned(source: Source, dynamic_dims: frozenset[int]) -> bool:
    """Whether the TensorMatch at `source` also pins the tensor's placement (every stride,
    storage offset, leafness): for a module's parameters and buffers without dynamic sizes,
    whose placement does not change from call to call."""
    return isinstance(source, (ParamSource, BufferSource)) and not dynamic_dims


def guarded_inputs(output: OutputGraph) -> tuple[bool | str, ...]:
    """Per graph input (placeholder order): whether the entry's guards check its tensor
    metadata in full before every call: a TensorMatch (exact class, dtype, device, layout,
    requires_grad, sizes, strides where a size is not 1) with no symbolic size or stride.
    `PINNED` instead of True: the TensorMatch pins its placement too (`pinned`).

    Backends may read it as `gm.meta["guarded_inputs"]` and skip re-reading those facts per
    call (aotgrad's call key does): the compiled graph is called first thing by the entry's
    code, right after its guard passed, with the values read at the guarded sources.
    """
    # NOTE: every tensor traced with symbolic sizes counts as dynamic here, a superset of
    # the dimensions `build_tree` leaves unpinned (`shape_guards`), so a PINNED mark always
    # stands for a pinned TensorMatch.
    symbolic = output.symbolic.tensors
    marks: list[bool | str] = []
    for source, example, value in output.inputs:
        fake = getattr(value, "fake", None)
        guarded = (
            isinstance(example, torch.Tensor) and isinstance(fake, torch.Tensor)
            and (source, GuardKind.TENSOR_MATCH) in output.guards
            and all(type(s) is int for s in (*fake.shape, *fake.stride())))
        if guarded and pinned(source, symbolic[source][1] if source in symbolic
                              else frozenset()):
            marks.append(PINNED)
        else:
            marks.append(guarded)
    return tuple(marks)


#: A `guarded_inputs` mark: the guards pin the input's placement as well.
PINNED = "pinned"
