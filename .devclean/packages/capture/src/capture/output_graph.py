"""`OutputGraph`: the FX graph being built for one frame, its inputs, guards and side
effects.

In: tensor operations from the translator (as values). Out: an FX `GraphModule` whose
placeholders are the frame's tensors (reached through sources) and which returns a tuple,
plus the list of guard records and the recorded side effects.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from guards.sources import Source
from torch._subclasses.fake_tensor import FakeTensorMode

from capture import node_meta
from capture.shapes import FrameShapes, RecordingShapeEnv, SymbolicInputs
from capture.side_effects import SideEffects
from capture.values import SymNodeValue, TensorValue, Value

if TYPE_CHECKING:
    from capture.interp.translator import Translator


class GuardKind(enum.Enum):
    """What a guard record checks about the value at its source."""

    TENSOR_MATCH = "tensor_match"
    CONST_EQ = "const_eq"
    ID_MATCH = "id_match"
    TYPE_MATCH = "type_match"
    LEN = "len"
    DICT_KEYS = "dict_keys"
    KEY_ABSENT = "key_absent"
    IDENTITY = "identity"


@dataclass(slots=True)
class Identity:
    """One real object the trace holds as a single value: every source it was reached
    through (the first is the value's own), and `group`, the key of the objects it must stay
    distinct from (None: only the sources' sameness is guarded, e.g. for id-matched modules).

    Guarded by `guard_builder` as aliasing: the sources stay one object, and objects of one
    group stay distinct, so an entry never serves another aliasing pattern (`f(x, x)` vs
    `f(x, y)`).
    """

    sources: list[Source]
    group: object


@dataclass(frozen=True, slots=True)
class GuardRecord:
    """One assumption made while tracing: `kind` holds for the value at `source`."""

    source: Source
    kind: GuardKind
    expected: Any = field(compare=False)


class OutputGraph:
    """Everything captured for one frame."""

    def __init__(self, f_globals: dict[str, object], code_name: str,
                 shapes: FrameShapes | None = None) -> None:
        self.graph = torch.fx.Graph()
        # NOTE: the ShapeEnv gives symbols to the input sizes and ints `shapes` makes dynamic
        # (see `capture.shapes`) and to data-dependent results (`.item()`, `nonzero`...).
        self.shape_env = RecordingShapeEnv(self._user_location)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=self.shape_env)
        self.shapes = shapes if shapes is not None else FrameShapes(False)
        self.symbolic = SymbolicInputs()
        self.root_globals = f_globals
        self.code_name = code_name
        # Graph inputs in placeholder order: tensors, and ints that are symbols.
        self.inputs: list[tuple[Source, object, TensorValue | SymNodeValue]] = []
        self.input_by_id: dict[int, TensorValue] = {}
        # NOTE: id of an input's value -> the real tensor (for `p.grad`, `state[p]`).
        self.real_by_value: dict[int, torch.Tensor] = {}
        self.guards: dict[tuple[object, ...], GuardRecord] = {}
        self.side_effects = SideEffects()
        # Values already built for real objects (by id), so aliasing is preserved.
        self.wrapped: dict[int, Value] = {}
        # The first source of each object whose identity is guarded (see note_identity).
        self.identity_sources: dict[int, Source] = {}
        self.keepalive: list[object] = []
        # Sources of modules reached through a module made while tracing (Sequential slices).
        self.known_sources: dict[int, Source] = {}
        self.current_tx: Translator | None = None
        self.uses_grad_mode = False

    # -- guards ------------------------------------------------------------------------
    def add_guard(self, source: Source, kind: GuardKind, expected: Any = None) -> None:
        key: tuple[object, ...] = (source, kind)
        if kind is GuardKind.KEY_ABSENT:
            key = (source, kind, expected)  # NOTE: one namespace, several names
        if key not in self.guards:
            self.guards[key] = GuardRecord(source, kind, expected)

    def note_identity(self, obj: object, source: Source, group: object) -> None:
        """`obj` (held by the trace as one value) was reached through `source`.

        The first call for an object names its own source; each later one with another
        source records that the two sources are one object (and is guarded so).
        """
        first = self.identity_sources.get(id(obj))
        if first is None:
            self.identity_sources[id(obj)] = source
            self.guards[(source, GuardKind.IDENTITY)] = GuardRecord(
                source, GuardKind.IDENTITY, Identity([source], group))
            self.keepalive.append(obj)
            return
        identity: Identity = self.guards[(first, GuardKind.IDENTITY)].expected
        if source not in identity.sources:
            identity.sources.append(source)

    # -- inputs ------------------------------------------------------------------------
    def add_input(self, tensor: torch.Tensor, source: Source) -> TensorValue:
        """A placeholder for the real tensor at `source` (deduplicated by identity)."""
        existing = self.input_by_id.get(id(tensor))
        if existing is not None:
            self.note_identity(tensor, source, tensor_group(tensor, existing.fake))
            return existing
        self.add_guard(source, GuardKind.TENSOR_MATCH, tensor)
        dims = self.shapes.tensor_dims(tensor, source)
        fake = None
        if dims:
            fake = self.symbolic.symbolic_tensor(self.shape_env, self.fake_mode, tensor, source,
                                                 dims)
        if fake is None:
            fake = self.fake_mode.from_tensor(tensor, static_shapes=True)
        self.note_identity(tensor, source, tensor_group(tensor, fake))
        node = self._placeholder(source)
        node_meta.set_example_value(node, fake)
        value = TensorValue(node, fake, source, type(tensor))
        self.inputs.append((source, tensor, value))
        self.input_by_id[id(tensor)] = value
        self.real_by_value[id(value)] = tensor
        self.keepalive.append(tensor)
        return value

    def add_int_input(self, number: int, source: Source) -> SymNodeValue | None:
        """A placeholder for the int at `source` when it is a symbol now (automatic dynamic,
        `dynamic=True`); None when it stays a constant."""
        if not self.shapes.int_dynamic(number, source):
            return None
        symint = self.symbolic.symbolic_int(self.shape_env, number, source)
        if symint is None:
            return None
        node = self._placeholder(source)
        node_meta.set_example_value(node, symint)
        value = SymNodeValue(node, symint)
        self.inputs.append((source, number, value))
        return value

    def _placeholder(self, source: Source) -> torch.fx.Node:
        name = _placeholder_name(source)
        first = self._first_non_placeholder()
        if first is None:
            with self.graph.inserting_after(None):
                return self.graph.placeholder(name)
        with self.graph.inserting_before(first):
            return self.graph.placeholder(name)

    def _user_location(self) -> str:
        tx = self.current_tx
        if tx is None:
            return "?"
        frame = tx.user_frame()
        text = getattr(frame, "text", "")
        return f"{frame.filename}:{frame.lineno}" + (f" ({text.strip()})" if text else "")

    def _first_non_placeholder(self) -> torch.fx.Node | None:
        for node in self.graph.nodes:
            if node.op != "placeholder":
                return node  # type: ignore[no-any-return]  # fx nodes are untyped
        return None

    # -- nodes -------------------------------------------------------------------------
    def create_node(
        self,
        op: str,
        target: Callable[..., Any] | str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        example_value: Any,
    ) -> torch.fx.Node:
        """Add a call node with its example value and user metadata."""
        node = self.graph.create_node(op, target, args, kwargs)
        node_meta.set_example_value(node, example_value)
        tx = self.current_tx
        if tx is not None:
            origin = tx.fx_origin()
            if isinstance(origin, torch.fx.Node) and node_meta.get_stack_trace(origin):
                node_meta.copy_user_meta(origin, node)
            else:
                node_meta.set_user_meta(
                    node, tx.stack_trace(), tx.nn_module_stack(), (node.name, target)
                )
        return node

    def remove_node(self, node: torch.fx.Node) -> None:
        self.graph.erase_node(node)


def tensor_group(tensor: torch.Tensor, fake: torch.Tensor | None = None) -> object:
    """Tensors with equal class, dtype, device, layout, requires_grad and shape could be
    one object; tensors that differ in one of them cannot both pass their TensorMatch.
    With `fake` (the traced value), symbolic sizes count as any size."""
    shape = tuple(tensor.shape) if fake is None else tuple(
        s if type(s) is int else None for s in fake.shape)
    return ("tensor", type(tensor), tensor.dtype, tensor.device, tensor.layout,
            bool(tensor.requires_grad), shape)


def _placeholder_name(source: Source) -> str:
    text = source.name()
    out = []
    for ch in text:
        out.append(ch if ch.isalnum() else "_")
    name = "".join(out).strip("_")
    while "__" in name:
        name = name.replace("__", "_")
    return name or "input"
