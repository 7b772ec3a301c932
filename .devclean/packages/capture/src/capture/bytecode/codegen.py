"""Emit the transformed code object of a captured frame.

In: the original code object, the compiled graph callable with its input sources, the
return value, and the recorded side effects. Out: a code object with the original's
signature that loads the graph inputs from its arguments, calls the graph (a constant of
the code object), rebuilds the return value, replays side effects and returns.
"""

from __future__ import annotations

import collections
import itertools
import types
from typing import TYPE_CHECKING, Any

from bytecode import Bytecode
from bytecode.instr import FreeVar, Instr
from guards.sources import (
    AttrSource,
    BufferSource,
    ClosureSource,
    ConstSource,
    DefaultSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ParamSource,
    Source,
    SubmoduleSource,
)

from capture.bytecode import versions
from capture.graph_break import GraphBreakKind, unsupported

if TYPE_CHECKING:
    from capture.values import ObjectValue, SymNodeValue, TensorValue, Value

__all__ = ["CodeBuilder", "FreeVar", "Instr", "assemble"]

GRAPH_OUT = "__capture_graph_out"
RETURN_TMP = "__capture_return"


def rebuild_object(cls: type, attrs: dict[str, Any], items: dict[Any, Any] | None) -> object:
    """Recreate an object made inside the compiled function (no __init__ call)."""
    new: Any = cls.__new__
    obj: Any = new(cls)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    if items is not None:
        setitem = collections.OrderedDict.__setitem__ if isinstance(obj, collections.OrderedDict) else dict.__setitem__
        for key, value in items.items():
            setitem(obj, key, value)
    return obj


def replace_list(target: list[Any], items: list[Any]) -> None:
    target[:] = items


def extend_list(target: list[Any], items: tuple[Any, ...]) -> None:
    """Replay appends to a list whose other items the program never read."""
    target.extend(items)


def update_set(target: set[Any], items: tuple[Any, ...]) -> None:
    """Replay `s.add(k)` on a set whose contents the program never read."""
    for item in items:
        target.add(item)


def update_dict(target: dict[Any, Any], items: dict[Any, Any]) -> None:
    """Replay `d[k] = v` on a dict whose other keys the program never read."""
    for key, value in items.items():
        target[key] = value


def replace_dict(target: dict[Any, Any], items: dict[Any, Any]) -> None:
    target.clear()
    target.update(items)


def replace_set(target: set[Any], items: set[Any]) -> None:
    """Make `target` hold `items` by removing and adding only what changed, so the real set's
    table (and so its iteration order) changes as little as eager's did."""
    target.difference_update([key for key in target if key not in items])
    for key in items:
        target.add(key)


class CodeBuilder:
    """Instruction list under construction for one transformed code object."""

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.freevars = set(code.co_freevars)
        self.instrs: list[Instr] = []
        self.graph_outputs: list[TensorValue | SymNodeValue] = []
        self._output_index: dict[int, int] = {}
        # Objects made inside the function, rebuilt once: id(value) -> (value, local name).
        self._rebuilt: dict[int, tuple[Value, str]] = {}
        self._temps = 0
        # Modules read once by `load_sources`: source -> uses, and source -> local name.
        self._shared: collections.Counter[Source] = collections.Counter()
        self._kept: dict[Source, str] = {}

    # -- primitives ----------------------------------------------------------------------
    def emit(self, instrs: list[Instr]) -> None:
        self.instrs.extend(instrs)

    def load_const(self, value: object) -> None:
        self.instrs.append(Instr("LOAD_CONST", value))

    def load_object(self, obj: object) -> None:
        """Push an arbitrary object (travels as a constant of the code object)."""
        self.instrs.append(Instr("LOAD_CONST", obj))

    def load_callable(self, obj: object) -> None:
        """Push `obj` ready to be called with `call_function`."""
        if not versions.null_after_callable():
            self.emit(versions.push_null())
        self.load_object(obj)
        if versions.null_after_callable():
            self.emit(versions.push_null())

    def call_function(self, nargs: int) -> None:
        self.emit(versions.call(nargs))

    def call_function_kw(self, nargs: int, names: tuple[str, ...]) -> None:
        if names:
            self.emit(versions.call_kw(nargs, names))
        else:
            self.call_function(nargs)

    def build_tuple(self, n: int) -> None:
        self.instrs.append(Instr("BUILD_TUPLE", n))

    def build_list(self, n: int) -> None:
        self.instrs.append(Instr("BUILD_LIST", n))

    def build_set(self, n: int) -> None:
        self.instrs.append(Instr("BUILD_SET", n))

    def build_map(self, n: int) -> None:
        self.instrs.append(Instr("BUILD_MAP", n))

    def store_fast(self, name: str) -> None:
        self.instrs.append(Instr("STORE_FAST", name))

    def load_fast(self, name: str) -> None:
        self.instrs.append(Instr("LOAD_FAST", name))

    def make_function(self, code: types.CodeType, f_globals: dict[str, object], ndefaults: int) -> None:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT, f"returning the function {code.co_name!r} made inside"
        )

    # -- sources -------------------------------------------------------------------------
    def load_sources(self, sources: list[Source]) -> None:
        """Push the value at each of `sources`, in order, reading a module that several of
        them reach through registered children (`_modules[...]`) once.

        NOTE: the reads run back to back with no user code between them, and a child is a
        plain dict lookup (no side effect, the same object each time), so one read stands
        for all; the module is kept in a local only until the last of these loads.
        """
        # NOTE: worth a local where loads go on from it in two or more ways (a module
        # whose only child is kept is read once anyway)
        onward: dict[Source, set[Source]] = collections.defaultdict(set)
        for source in sources:
            for step, nxt in itertools.pairwise(source.chain()):
                if isinstance(step, SubmoduleSource):
                    onward[step].add(nxt)
        self._shared = collections.Counter({s: len(n) for s, n in onward.items()})
        try:
            for source in sources:
                self.load_source(source)
        finally:
            self._shared.clear()
            self._kept.clear()

    def load_source(self, source: Source) -> None:
        """Push the value at `source`, read from the frame's arguments and globals."""
        kept = self._kept.get(source)
        if kept is not None:
            self.load_fast(kept)
            return
        if isinstance(source, LocalSource):
            if source.local in self.freevars:
                self.instrs.append(Instr("LOAD_DEREF", FreeVar(source.local)))
            else:
                self.load_fast(source.local)
        elif isinstance(source, GlobalSource):
            self.emit(versions.load_global(source.global_name, False))
        elif isinstance(source, ConstSource):
            self.load_object(source.obj)  # NOTE: a fixed object (class, module dict, function)
        elif isinstance(source, AttrSource):
            self.load_source(source.source)
            self.emit(versions.load_attr(source.attr))
        elif isinstance(source, ItemSource):
            self.load_source(source.source)
            self.load_const(source.key)
            self.instrs.append(Instr("BINARY_SUBSCR"))
        elif isinstance(source, (ParamSource, BufferSource, SubmoduleSource)):
            table, key = {
                ParamSource: ("_parameters", "param"),
                BufferSource: ("_buffers", "buffer"),
                SubmoduleSource: ("_modules", "child"),
            }[type(source)]
            self.load_source(source.source)
            self.emit(versions.load_attr(table))
            self.load_const(getattr(source, key))
            self.instrs.append(Instr("BINARY_SUBSCR"))
            if self._shared[source] > 1:
                self._temps += 1
                name = self._kept[source] = f"__capture_module{self._temps}"
                self.instrs.append(Instr("COPY", 1))
                self.store_fast(name)
        elif isinstance(source, ClosureSource):
            self.load_source(source.source)
            self.emit(versions.load_attr("__closure__"))
            self.load_const(source.index)
            self.instrs.append(Instr("BINARY_SUBSCR"))
            self.emit(versions.load_attr("cell_contents"))
        elif isinstance(source, DefaultSource):
            self.load_source(source.source)
            if isinstance(source.key, int):
                self.emit(versions.load_attr("__defaults__"))
            else:
                self.emit(versions.load_attr("__kwdefaults__"))
            self.load_const(source.key)
            self.instrs.append(Instr("BINARY_SUBSCR"))
        else:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT, f"cannot reload {source.name()} in bytecode"
            )

    # -- values --------------------------------------------------------------------------
    def reconstruct(self, value: Value) -> None:
        value.reconstruct(self)

    def load_graph_output(self, value: TensorValue | SymNodeValue) -> None:
        """Push graph output for `value` (a tensor or a data-dependent number computed by
        the graph), allocating an output slot on first use."""
        key = id(value.node)
        index = self._output_index.get(key)
        if index is None:
            index = len(self.graph_outputs)
            self._output_index[key] = index
            self.graph_outputs.append(value)
        self.load_fast(GRAPH_OUT)
        self.load_const(index)
        self.instrs.append(Instr("BINARY_SUBSCR"))

    def new_temp(self) -> str:
        """A fresh local name for a value kept between instructions."""
        self._temps += 1
        return f"__capture_tmp{self._temps}"

    def load_rebuilt(self, value: Value) -> bool:
        """Push the object already rebuilt for `value` (made inside the function), if any.

        A new list, dict, set or object is rebuilt once: where the program stored it in two
        places (returned and appended to a global list), both hold the same object."""
        entry = self._rebuilt.get(id(value))
        if entry is None:
            return False
        self.load_fast(entry[1])
        return True

    def remember_rebuilt(self, value: Value) -> None:
        """Keep the object just rebuilt for `value` (top of the stack) for later uses."""
        name = self.new_temp()
        self._rebuilt[id(value)] = (value, name)
        self.instrs.append(Instr("COPY", 1))
        self.store_fast(name)

    def rebuild_new_object(self, value: ObjectValue) -> None:
        if self.load_rebuilt(value):
            return
        self._rebuild_new_object(value)
        self.remember_rebuilt(value)

    def _rebuild_new_object(self, value: ObjectValue) -> None:
        self.load_callable(rebuild_object)
        self.load_object(value.cls)
        for name, attr in value.attrs.items():
            self.load_const(name)
            self.reconstruct(attr)
        self.build_map(len(value.attrs))
        if value.dict_items is not None:
            self.reconstruct(value.dict_items)
        else:
            self.load_const(None)
        self.call_function(3)


def assemble(
    original: types.CodeType,
    body: list[Instr],
) -> types.CodeType:
    """A code object with `original`'s signature and free variables running `body`."""
    bc = Bytecode.from_code(original)
    new = Bytecode(versions.prologue(len(original.co_freevars)) + body)
    new.argcount = bc.argcount
    new.posonlyargcount = bc.posonlyargcount
    new.kwonlyargcount = bc.kwonlyargcount
    new.argnames = list(bc.argnames)
    new.freevars = list(bc.freevars)
    new.cellvars = []
    new.name = bc.name
    new.qualname = getattr(bc, "qualname", bc.name)
    new.filename = bc.filename
    new.first_lineno = bc.first_lineno
    new.flags = bc.flags & ~versions.generator_flags()
    new.docstring = None
    for instr in new:
        if isinstance(instr, Instr):
            instr.lineno = bc.first_lineno
    return new.to_code()
