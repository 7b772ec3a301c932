"""Bytecode that replays the recorded side effects after the graph call, so the user sees
the state eager Python would have left: container contents, attribute writes and deletes,
closure cell writes, global writes.

In: the `SideEffects` record of an `OutputGraph`. Out: instructions appended to a
`CodeBuilder` (every target and value loaded first, the mutations applied after).
"""

from __future__ import annotations

from collections.abc import Callable

import guards
from guards.sources import LocalSource, Source

from capture.bytecode import codegen, versions
from capture.output_graph import OutputGraph
from capture.side_effects import DELETED
from capture.values import DictValue, ListValue, SetValue, Value


def replay_side_effects(cg: codegen.CodeBuilder, output: OutputGraph) -> None:
    """Emit the recorded mutations, in two phases.

    Every object a mutation targets and every value it stores is loaded first (into
    temporaries), while the state is still the one the sources describe; the mutations are
    applied after. So replaying one mutation never changes what another reads (`A.append(B[0]);
    B.pop(0)` appends B's old first item), whatever order they are emitted in."""
    effects = output.side_effects
    apply: list[Callable[[], None]] = []

    def keep(value: Value | None = None, source: Source | None = None) -> str:
        if source is not None:
            cg.load_source(source)
        else:
            assert value is not None
            cg.reconstruct(value)
        name = cg.new_temp()
        cg.store_fast(name)
        return name

    def call_helper(helper: object, *temps: str) -> Callable[[], None]:
        def emit() -> None:
            cg.load_callable(helper)
            for temp in temps:
                cg.load_fast(temp)
            cg.call_function(len(temps))
            cg.instrs.append(codegen.Instr("POP_TOP"))

        return emit

    for value in effects.containers.values():
        assert value.source is not None
        added = _added_items(value)
        if added is not None:
            # NOTE: a list or set never read whole in the trace: only what was added is
            # replayed (the real container may hold items the trace never saw).
            add, new_items = added
            target = keep(source=value.source)
            for item in new_items:
                cg.reconstruct(item)
            cg.build_tuple(len(new_items))
            items = cg.new_temp()
            cg.store_fast(items)
            apply.append(call_helper(add, target, items))
            continue
        if isinstance(value, DictValue) and not value.is_loaded:
            target = keep(source=value.source)
            stored = DictValue(dict(value.stored))
            items = keep(stored)
            apply.append(call_helper(codegen.update_dict, target, items))
            continue
        helper: object
        if isinstance(value, ListValue):
            helper = codegen.replace_list
        elif isinstance(value, DictValue):
            helper = codegen.replace_dict
        elif isinstance(value, SetValue):
            helper = codegen.replace_set
        else:
            continue
        target = keep(source=value.source)
        source = value.source
        value.source = None
        try:
            items = keep(value)
        finally:
            value.source = source
        apply.append(call_helper(helper, target, items))

    def store_attr(owner_tmp: str, name: str, value_tmp: str | None) -> Callable[[], None]:
        def emit() -> None:
            if value_tmp is None:
                cg.load_fast(owner_tmp)
                cg.instrs.append(codegen.Instr("DELETE_ATTR", name))
                return
            cg.load_fast(value_tmp)
            cg.load_fast(owner_tmp)
            cg.instrs.append(codegen.Instr("STORE_ATTR", name))

        return emit

    for owner, attrs in effects.attr_writes.values():
        owner_tmp = keep(owner)
        for name, attr_value in attrs.items():
            value_tmp = None if attr_value is DELETED else keep(attr_value)
            apply.append(store_attr(owner_tmp, name, value_tmp))

    for cell, contents in effects.cell_writes.values():
        contents_tmp = keep(contents)
        cell_source = cell.source
        if isinstance(cell_source, LocalSource):
            def store_deref(tmp: str = contents_tmp, local: str = cell_source.local) -> None:
                cg.load_fast(tmp)
                cg.instrs.append(codegen.Instr("STORE_DEREF", codegen.FreeVar(local)))

            apply.append(store_deref)
        else:
            assert isinstance(cell_source, guards.ClosureSource)
            cg.load_source(cell_source.source)
            cg.emit(versions.load_attr("__closure__"))
            cg.load_const(cell_source.index)
            cg.instrs.append(codegen.Instr("BINARY_SUBSCR"))
            cell_tmp = cg.new_temp()
            cg.store_fast(cell_tmp)
            apply.append(store_attr(cell_tmp, "cell_contents", contents_tmp))

    for f_globals, name, gvalue in effects.global_writes.values():
        value_tmp = keep(gvalue)

        def store_global(tmp: str = value_tmp, g: dict[str, object] = f_globals,
                         key: str = name) -> None:
            cg.load_fast(tmp)
            if g is output.root_globals:
                cg.instrs.append(codegen.Instr("STORE_GLOBAL", key))
            else:
                cg.load_object(g)
                cg.load_const(key)
                cg.instrs.append(codegen.Instr("STORE_SUBSCR"))

        apply.append(store_global)

    for emit in apply:
        emit()


def _added_items(value: Value) -> tuple[object, list[Value]] | None:
    """(the helper that adds items, the items) for a list only appended to or a set only
    added to in the trace; None for other containers."""
    if isinstance(value, ListValue) and not value.is_loaded:
        return codegen.extend_list, list(value.appended)
    if isinstance(value, SetValue) and not value.is_loaded:
        return codegen.update_set, [item for _, item in value.added]
    return None
