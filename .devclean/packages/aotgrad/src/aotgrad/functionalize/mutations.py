"""Functionalization, our own pass: a traced ATen graph with mutating and aliasing ops becomes
a graph without either, plus the metadata the runtime wrapper needs (which inputs to copy
back, which outputs are views of inputs or of other outputs).

IR in: `trace.trace`'s GraphModule. IR out: `FunctionalGraph` whose `gm` returns
`(new values of mutated inputs..., user outputs computed by the graph...)`.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

from aotgrad.functionalize.views import (
    Alias,
    Storage,
    ViewStep,
    is_view_op,
    scatter_into_parent,
    scatter_item_into_grandparent,
    view_chain,
)
from aotgrad.trace import COPIED_META_KEYS

__all__ = ["FunctionalGraph", "FunctionalizationError", "OutputSpec", "functionalize"]

aten = torch.ops.aten


def _size_expression(origin: fx.Node | None) -> Any:
    """The traced SymInt of a node reading back a size expression (`aotgrad.symbolic`'s
    `_local_scalar_dense` of sizes and symbolic int arguments), else None.

    NOTE: running the op again on fakes would make a new data-dependent symbol of it; the
    trace's value is the expression over the input symbols that backends evaluate.
    """
    if origin is None or origin.target is not torch.ops.aten._local_scalar_dense.default:
        return None
    value = origin.meta.get("example_value")
    if not isinstance(value, torch.SymInt):
        return None
    free = value.node.expr.free_symbols
    backed = getattr(value.node.shape_env, "backed_var_to_val", {})
    if not free or not all(s in backed for s in free):
        return None  # NOTE: data-dependent (`.item()`): computed again by the op itself
    return value

class FunctionalizationError(RuntimeError):
    """A mutation or aliasing pattern our functionalization cannot express."""


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """How the runtime wrapper produces one user output.

    kind "graph": `graph_outputs[index]`; "input": a view of input `index` (replay `chain`);
    "output": a view of user output `index`; "view": a view of `graph_outputs[index]` (a
    hidden base, see `FunctionalGraph.hidden_bases`); "constant": the Python value `value`.
    """

    kind: str
    index: int = 0
    chain: tuple[ViewStep, ...] = ()
    value: Any = None


@dataclasses.dataclass
class FunctionalGraph:
    gm: fx.GraphModule
    mutated_inputs: list[int]  # input indices, in the order of the first graph outputs
    outputs: list[OutputSpec]  # one per user output
    num_user_graph_outputs: int
    num_kept: int = 0  # trailing outputs kept as they are (the joint's gradients)

    @property
    def num_graph_outputs(self) -> int:
        """Forward outputs: the new values of mutated inputs, then the user outputs."""
        return len(self.mutated_inputs) + self.num_user_graph_outputs

    output_requires_grad: tuple[bool, ...] = ()  # per user output, as traced
    # per mutated input: whether autograd tracks its new value (set by the forward trace)
    mutated_requires_grad: tuple[bool, ...] = ()
    # (user graph output index, requires grad) of intermediates returned only through
    # several views ("view" specs): graph outputs that are no user output
    hidden_bases: list[tuple[int, bool]] = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------- functional variants


# NOTE: (input, weight, bias, running_mean, running_var, training, momentum, eps)
_BATCH_NORMS = (aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
_BN_ARGS = ("input", "weight", "bias", "running_mean", "running_var", "training", "momentum",
            "eps")


def _bn_arg(node: fx.Node, index: int) -> Any:
    if index < len(node.args):
        return node.args[index]
    return node.kwargs[_BN_ARGS[index]]


def _eval_batch_norm(node: fx.Node) -> bool:
    """Whether a batch norm node runs in eval mode (with running statistics to read)."""
    return (_bn_arg(node, 5) is False and isinstance(_bn_arg(node, 3), fx.Node)
            and isinstance(_bn_arg(node, 4), fx.Node))


def _no_training_args(node: fx.Node) -> tuple[Any, ...]:
    """`_native_batch_norm_legit_no_training`'s arguments: the node's, less `training`."""
    return tuple(_bn_arg(node, i) for i in (0, 1, 2, 3, 4, 6, 7))


def _mutated_arg_indices(op: torch._ops.OpOverload) -> list[int]:
    return [
        i for i, a in enumerate(op._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]


def _overload(packet_name: str, overload: str) -> torch._ops.OpOverload | None:
    packet = getattr(aten, packet_name, None)
    if packet is None:
        return None
    try:
        return getattr(packet, overload)  # type: ignore[no-any-return]
    except AttributeError:
        return None


def _same_arguments(packet_name: str, op: torch._ops.OpOverload) -> Any:
    """The overload of `packet_name` whose arguments have `op`'s names (`transpose_.default`
    -> `transpose.int`)."""
    packet = getattr(aten, packet_name, None)
    if packet is None:
        return None
    wanted = _signature(op)
    for overload_name in packet.overloads():
        candidate = getattr(packet, overload_name)
        if _signature(candidate) == wanted:
            return candidate
    return None


def _signature(op: torch._ops.OpOverload) -> list[tuple[str, str]]:
    """Argument names and types, alias annotations left out."""
    return [(a.name, str(a.type)) for a in op._schema.arguments]


@dataclasses.dataclass(frozen=True)
class _Variant:
    op: torch._ops.OpOverload
    kind: str  # "inplace" | "out" | "functional_suffix"


def functional_variant(op: torch._ops.OpOverload) -> _Variant:
    """The out-of-place op computing what `op` writes, found by name and schema."""
    name = op._schema.name.split("::")[-1]
    overload = op._overloadname
    mutated = _mutated_arg_indices(op)
    args = op._schema.arguments
    if all(args[i].kwarg_only for i in mutated):
        # out= variant: an overload of the same packet with the remaining arguments
        wanted = [a.name for a in args if not (a.alias_info and a.alias_info.is_write)]
        packet = getattr(aten, name)
        for candidate_name in packet.overloads():
            candidate = getattr(packet, candidate_name)
            if candidate._schema.is_mutable:
                continue
            if [a.name for a in candidate._schema.arguments] == wanted:
                return _Variant(candidate, "out")
    if name.endswith("_") and not name.endswith("__"):
        candidate = _overload(name[:-1], overload)
        if candidate is None or _signature(candidate) != _signature(op):
            candidate = _same_arguments(name[:-1], op)
        if candidate is not None and not candidate._schema.is_mutable:
            if is_view_op(candidate):
                return _Variant(candidate, "inplace_view")
            return _Variant(candidate, "inplace")
    if name.endswith("_"):
        # NOTE: `normal_` -> `normal_functional`: same arguments, returns self's new value
        candidate = _overload(name[:-1] + "_functional", overload)
        if (candidate is not None and not candidate._schema.is_mutable
                and _signature(candidate) == _signature(op)
                and len(candidate._schema.returns) == 1):
            return _Variant(candidate, "inplace")
    candidate = _overload(name + "_functional", overload)
    if candidate is not None and not candidate._schema.is_mutable:
        return _Variant(candidate, "functional_suffix")
    raise FunctionalizationError(f"no functional variant found for the mutating op {op}")


# --------------------------------------------------------------------------- the pass


class _Functionalizer:
    def __init__(self, gm: fx.GraphModule, fake_mode: FakeTensorMode) -> None:
        self.gm = gm
        self.fake_mode = fake_mode
        self.graph = fx.Graph()
        self.aliases: dict[fx.Node, Alias] = {}
        self.producers: dict[fx.Node, fx.Node] = {}  # item of a multi-output view -> producer
        self.redirect: dict[fx.Node, fx.Node] = {}  # output of an in-place op -> mutated arg
        self.cache: dict[fx.Node, tuple[fx.Node, int]] = {}  # view -> (value, version)
        self.multi: dict[fx.Node, list[fx.Node | None]] = {}  # functional tuple -> item values
        self.new_multi_views: dict[fx.Node, tuple[fx.Node, int]] = {}
        self.storages: list[Storage] = []
        self.view_targets: dict[fx.Node, Any] = {}  # in-place view op -> its view op
        self.scalars: dict[fx.Node, fx.Node] = {}  # Python-number results (`.item()`)
        self._mutation_items: dict[fx.Node, dict[int, fx.Node]] = {}  # mutating tuple ops
        self.keep_tail = 0
        self.hidden_bases: list[tuple[int, bool]] = []

    # ------------------------------------------------------------ emitting

    def emit(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             origin: fx.Node | None) -> fx.Node:
        node = self.graph.call_function(target, args, kwargs)
        # NOTE: `is None`, not `or`: truth of a SymInt guards on it being nonzero (a
        # data-dependent guard where the expression has an unbacked symbol)
        size = _size_expression(origin)
        node.meta["example_value"] = (self._example(target, args, kwargs) if size is None
                                      else size)
        if origin is not None:
            for key in COPIED_META_KEYS:
                if key in origin.meta:
                    node.meta[key] = origin.meta[key]
        return node

    def _example(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        def value(a: Any) -> Any:
            return a.meta["example_value"] if isinstance(a, fx.Node) else a

        ex_args = tree_map(value, args)
        ex_kwargs = tree_map(value, kwargs)
        if target is operator.getitem:
            return ex_args[0][ex_args[1]]
        with self.fake_mode, torch.no_grad():
            return target(*ex_args, **ex_kwargs)

    def new_storage(self, orig: fx.Node, value: fx.Node, input_index: int | None = None) -> None:
        storage = Storage(orig, value, 0, input_index)
        self.storages.append(storage)
        self.aliases[orig] = Alias(storage, None)

    # ------------------------------------------------------------ reading and writing

    def resolve(self, node: fx.Node) -> fx.Node:
        while node in self.redirect:
            node = self.redirect[node]
        return node

    def read(self, node: fx.Node) -> fx.Node:
        """The current value, in the new graph, of the original tensor node `node`."""
        node = self.resolve(node)
        alias = self.aliases[node]
        storage = alias.storage
        if alias.parent is None:
            return storage.current
        cached = self.cache.get(node)
        if cached is not None and cached[1] == storage.version:
            return cached[0]
        parent_value = self.read(alias.parent)
        producer = self.producers.get(node)
        if producer is not None:
            multi = self._replay(producer, parent_value, storage.version)
            value = self.emit(operator.getitem, (multi, node.args[1]), {}, node)
        else:
            value = self._replay(node, parent_value, storage.version)
        self.cache[node] = (value, storage.version)
        return value

    def _replay(self, view: fx.Node, parent_value: fx.Node, version: int) -> fx.Node:
        if view in self.new_multi_views and self.new_multi_views[view][1] == version:
            return self.new_multi_views[view][0]
        args = (parent_value, *(self.map_arg(a) for a in view.args[1:]))
        kwargs = {k: self.map_arg(v) for k, v in view.kwargs.items()}
        value = self.emit(self.view_targets.get(view, view.target), args, kwargs, view)
        if view in self.producers.values():
            self.new_multi_views[view] = (value, version)
        return value

    def write(self, node: fx.Node, new: fx.Node) -> None:
        """Record that the original tensor `node` now holds `new`; update its storage base."""
        node = self.resolve(node)
        alias = self.aliases[node]
        storage = alias.storage
        if alias.parent is None:
            storage.current = new
            storage.version += 1
            return
        parent_value = self.read(alias.parent)
        producer = self.producers.get(node)
        if producer is not None:
            new_parent = scatter_item_into_grandparent(
                node, producer, alias.parent, parent_value, new, self.emit)
        else:
            new_parent = scatter_into_parent(node, alias.parent, parent_value, new, self.emit,
                                             self.view_targets.get(node))
        self.write(alias.parent, new_parent)
        self.cache[node] = (new, storage.version)

    def map_arg(self, arg: Any) -> Any:
        def one(a: Any) -> Any:
            if isinstance(a, fx.Node) and self._is_tensor_node(a):
                return self.read(a)
            if isinstance(a, fx.Node) and a in self.scalars:
                return self.scalars[a]
            return a

        return tree_map(one, arg)

    def _is_tensor_node(self, node: fx.Node) -> bool:
        return isinstance(node.meta.get("example_value"), torch.Tensor)

    # ------------------------------------------------------------ node kinds

    def run(self) -> FunctionalGraph:
        input_index = 0
        output_node: fx.Node | None = None
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                new = self.graph.placeholder(node.name)
                new.meta.update(node.meta)
                if self._is_tensor_node(node):
                    self.new_storage(node, new, input_index)
                else:  # NOTE: a symbolic int argument (`aotgrad.dynamic`)
                    self.scalars[node] = new
                input_index += 1
            elif node.op == "get_attr":
                new = self.graph.get_attr(node.target)
                new.meta.update(node.meta)
                self.new_storage(node, new)
            elif node.op == "call_function":
                if node.target is operator.getitem:
                    self._getitem(node)
                else:
                    self._call(node)
            elif node.op == "output":
                output_node = node
            else:
                raise FunctionalizationError(f"unexpected node {node.format_node()}")
        assert output_node is not None
        return self._finish(output_node)

    def _call(self, node: fx.Node) -> None:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            raise FunctionalizationError(f"not an ATen op: {node.format_node()}")
        schema = target._schema
        if target in _BATCH_NORMS and _eval_batch_norm(node):
            # NOTE: in eval mode batch norm reads its running statistics: the schema's
            # writes do not happen, and copying them back would bump their versions
            value = self.emit(aten._native_batch_norm_legit_no_training.default,
                              self.map_arg(_no_training_args(node)), {}, node)
            self._bind_result(node, value)
            return
        if schema.is_mutable:
            self._mutation(node, target)
            return
        if is_view_op(target) and _aliases_first_argument(node):
            parent = node.args[0]
            assert isinstance(parent, fx.Node)
            parent = self.resolve(parent)
            storage = self.aliases[parent].storage
            # NOTE: for split/unbind/... (a tuple of views) the items, met as getitem nodes,
            # are the views; they share this record's storage and parent.
            self.aliases[node] = Alias(storage, parent)
            return
        value = self.emit(target, self.map_arg(tuple(node.args)), self.map_arg(dict(node.kwargs)),
                          node)
        self._bind_result(node, value)

    def _bind_result(self, node: fx.Node, value: fx.Node) -> None:
        example = node.meta["example_value"]
        if isinstance(example, torch.Tensor):
            self.new_storage(node, value)
        elif not isinstance(example, (tuple, list)):
            self.scalars[node] = value
        else:
            self.multi[node] = [value]

    def _getitem(self, node: fx.Node) -> None:
        producer, index = node.args
        assert isinstance(producer, fx.Node) and isinstance(index, int)
        if producer in self.aliases:  # an item of a multi-output view
            alias = self.aliases[producer]
            self.aliases[node] = Alias(alias.storage, alias.parent)
            self.producers[node] = producer
            return
        items = self.multi.get(producer)
        if items is None:
            raise FunctionalizationError(f"getitem of an unknown value: {node.format_node()}")
        mutated = self._mutation_items.get(producer)
        if mutated is not None and index in mutated:
            self.redirect[node] = mutated[index]
            return
        whole = items[0]
        assert whole is not None
        value = self.emit(operator.getitem, (whole, index), {}, node)
        self.new_storage(node, value)


    def _mutation(self, node: fx.Node, op: torch._ops.OpOverload) -> None:
        variant = functional_variant(op)
        if variant.kind == "inplace_view":
            self._inplace_view(node, variant.op)
            return
        schema = op._schema
        mutated_idx = _mutated_arg_indices(op)
        arg_values = _bind_arguments(node, schema)
        mutated_nodes = [arg_values[schema.arguments[i].name] for i in mutated_idx]
        if variant.kind == "out":
            kwargs = {k: v for k, v in node.kwargs.items()
                      if k not in {schema.arguments[i].name for i in mutated_idx}}
            result = self.emit(variant.op, self.map_arg(tuple(node.args)), self.map_arg(kwargs),
                               node)
        else:
            args, kwargs = _variant_arguments(node, op, variant.op)
            result = self.emit(variant.op, self.map_arg(args), self.map_arg(kwargs), node)
        num_returns = len(schema.returns)
        example = result.meta["example_value"]
        for j, mutated in enumerate(mutated_nodes):
            if variant.kind == "functional_suffix":
                new = self.emit(operator.getitem, (result, num_returns + j), {}, node)
            elif isinstance(example, torch.Tensor) or (
                    len(mutated_nodes) == 1 and isinstance(mutated, (list, tuple))
                    and isinstance(example, (list, tuple))
                    and all(isinstance(e, torch.Tensor) for e in example)):
                # NOTE: one mutated tensor, or one mutated list (`_foreach_mul_` ->
                # `_foreach_mul` returns the list of new values)
                assert len(mutated_nodes) == 1
                new = result
            else:
                new = self.emit(operator.getitem, (result, j), {}, node)
            if isinstance(mutated, (list, tuple)):
                for i, item in enumerate(mutated):
                    if item is None:
                        continue
                    if not isinstance(item, fx.Node):
                        raise FunctionalizationError(f"mutated argument is not a tensor: {node}")
                    self.write(item, self.emit(operator.getitem, (new, i), {}, node))
                continue
            if not isinstance(mutated, fx.Node):
                raise FunctionalizationError(f"mutated argument is not a tensor: {node}")
            self.write(mutated, new)
        # the op's own results: aliases of the mutated arguments, or fresh values
        write_sets: dict[str, fx.Node] = {}
        for i, arg in zip(mutated_idx, mutated_nodes):
            info = schema.arguments[i].alias_info
            assert info is not None
            if not isinstance(arg, fx.Node):
                continue  # a mutated list: its items were written above
            for name in info.before_set:
                write_sets[name] = arg
        redirects: dict[int, fx.Node] = {}
        for r, ret in enumerate(schema.returns):
            if ret.alias_info is not None and ret.alias_info.is_write:
                for name in ret.alias_info.before_set:
                    if name in write_sets:
                        redirects[r] = write_sets[name]
        if isinstance(node.meta["example_value"], torch.Tensor):
            if 0 in redirects:
                self.redirect[node] = redirects[0]
            else:
                self.new_storage(node, result)
        else:
            self.multi[node] = [result]
            self._mutation_items[node] = redirects

    def _inplace_view(self, node: fx.Node, view_op: Any) -> None:
        """`x.squeeze_()`, `x.t_()`...: from here on `x` is a view of its former self."""
        parent = node.args[0]
        assert isinstance(parent, fx.Node)
        parent = self.resolve(parent)
        alias = self.aliases[parent]
        if alias.parent is None and alias.storage.input_index is not None:
            raise FunctionalizationError(
                f"{node.target} changes the shape or strides of a graph input in place")
        self.aliases[node] = Alias(alias.storage, parent)
        self.view_targets[node] = view_op

    # ------------------------------------------------------------ outputs

    def _finish(self, output_node: fx.Node) -> FunctionalGraph:
        (flat,) = output_node.args
        assert isinstance(flat, (tuple, list))
        tail = list(flat[len(flat) - self.keep_tail:]) if self.keep_tail else []
        flat = flat[:len(flat) - self.keep_tail]
        specs: list[OutputSpec] = []
        user_values: list[fx.Node] = []
        # NOTE: a user output that is a view of another output (before or after it: `return
        # y.view(-1), y`) is made from it by the wrapper, so the two share memory as in eager.
        # Several views of one intermediate that is not returned (`y.view(-1), y[0]`) are
        # made from it too: it becomes a hidden graph output (a "view" spec's base).
        whole_outputs: dict[int, int] = {}  # id(storage) -> user output index (plain base)
        views: dict[int, int] = {}  # id(storage) -> how many outputs view it
        found: list[tuple[Alias, list[ViewStep] | None] | None] = []
        for i, out in enumerate(flat):
            if not isinstance(out, fx.Node) or out in self.scalars:
                found.append(None)
                continue
            resolved = self.resolve(out)
            alias = self.aliases[resolved]
            chain = view_chain(resolved, self.aliases, self.producers, self.view_targets)
            found.append((alias, chain))
            if alias.storage.input_index is None:
                if alias.parent is None:
                    whole_outputs.setdefault(id(alias.storage), i)
                elif chain is not None:
                    views[id(alias.storage)] = views.get(id(alias.storage), 0) + 1
        hidden: dict[int, int] = {}  # id(storage) -> graph output index of its hidden base
        tracking = any(bool(getattr(n.meta.get("example_value"), "requires_grad", False))
                       for n in self.gm.graph.nodes if n.op == "placeholder")
        for i, out in enumerate(flat):
            entry = found[i]
            if not isinstance(out, fx.Node):
                specs.append(OutputSpec("constant", value=out))
                continue
            if entry is None:  # a Python number computed by the graph
                specs.append(OutputSpec("graph", len(user_values)))
                user_values.append(self.scalars[out])
                continue
            alias, chain = entry
            storage = alias.storage
            if chain is not None and tracking and not _requires_grad(out):
                # NOTE: `x.detach()` may reach here as `alias` (decomposed): the replayed
                # view must not require grad either.
                chain.append(ViewStep(aten.detach.default, (), {}))
            if storage.input_index is not None and chain is not None:
                specs.append(OutputSpec("input", storage.input_index, tuple(chain)))
                continue
            base = whole_outputs.get(id(storage))
            if base is not None and base != i and chain is not None:
                specs.append(OutputSpec("output", base, tuple(chain)))
                continue
            if base is None and chain is not None and views.get(id(storage), 0) > 1:
                if id(storage) not in hidden:
                    hidden[id(storage)] = len(user_values)
                    user_values.append(storage.current)
                    self.hidden_bases.append((hidden[id(storage)], _requires_grad(storage.base)))
                specs.append(OutputSpec("view", hidden[id(storage)], tuple(chain)))
                continue
            specs.append(OutputSpec("graph", len(user_values)))
            user_values.append(self.read(out))
        mutated = [s for s in self.storages if s.input_index is not None and s.version > 0]
        mutated.sort(key=lambda s: s.input_index or 0)
        kept = [self.read(t) if isinstance(t, fx.Node) else t for t in tail]
        values = [s.current for s in mutated] + user_values + kept
        out = self.graph.output(tuple(values))
        out.meta["example_value"] = tuple(
            v.meta["example_value"] if isinstance(v, fx.Node) else v for v in values)
        self.graph.eliminate_dead_code()
        self.graph.lint()
        gm = fx.GraphModule(self.gm, self.graph)
        mutated_indices = [s.input_index for s in mutated if s.input_index is not None]
        requires_grad = tuple(
            isinstance(o, fx.Node) and isinstance(o.meta.get("example_value"), torch.Tensor)
            and bool(o.meta["example_value"].requires_grad) for o in flat)
        return FunctionalGraph(gm, mutated_indices, specs, len(user_values), len(kept),
                               requires_grad, hidden_bases=list(self.hidden_bases))


def _requires_grad(node: fx.Node) -> bool:
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor) and bool(value.requires_grad)


def _aliases_first_argument(node: fx.Node) -> bool:
    """Whether a view op's result really shares storage with its first argument: `reshape`
    and `contiguous` copy when they must (then a write to the result stays there)."""
    value = node.meta.get("example_value")
    parent = node.args[0]
    if not isinstance(value, torch.Tensor) or not isinstance(parent, fx.Node):
        return True
    base = parent.meta.get("example_value")
    if not isinstance(base, torch.Tensor):
        return True
    return bool(value.untyped_storage()._cdata == base.untyped_storage()._cdata)


def _variant_arguments(node: fx.Node, op: torch._ops.OpOverload,
                       variant: torch._ops.OpOverload) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`node`'s arguments for the functional `variant` of its op, defaults of `op` filled in.

    NOTE: the in-place op may have defaults its functional variant lacks
    (`bernoulli_.float(self, p=0.5)` but `bernoulli.p(self, p)`: `x.bernoulli_()`, and
    dropout's noise, would otherwise call `bernoulli.p` without `p`).
    """
    bound = _bind_arguments(node, op._schema)
    variant_defaults = {a.name for a in variant._schema.arguments if a.has_default_value()}
    for argument in op._schema.arguments:
        if (argument.name not in bound and argument.has_default_value()
                and argument.name not in variant_defaults):
            bound[argument.name] = argument.default_value
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional = True
    for argument in variant._schema.arguments:
        if argument.name not in bound:
            positional = False  # a gap: later arguments go by name
            continue
        if positional and not argument.kwarg_only:
            args.append(bound[argument.name])
        else:
            kwargs[argument.name] = bound[argument.name]
    return tuple(args), kwargs


def _bind_arguments(node: fx.Node, schema: Any) -> dict[str, Any]:
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
    return bound


def functionalize(gm: fx.GraphModule, fake_mode: FakeTensorMode | None = None, *,
                  keep_tail: int = 0) -> FunctionalGraph:
    """Remove every mutation and every aliasing-then-mutation from a traced ATen graph.

    The graph's outputs become: the new values of mutated inputs, the user outputs that the
    graph computes (views of inputs/outputs are described by `OutputSpec`s instead), then
    the last `keep_tail` outputs of `gm` as they are (None kept; the joint's gradients).
    """
    if fake_mode is None:
        fake_mode = _find_fake_mode(gm.graph.nodes)
    pass_ = _Functionalizer(gm, fake_mode)
    pass_.keep_tail = keep_tail
    return pass_.run()


def _find_fake_mode(nodes: Sequence[fx.Node] | Any) -> FakeTensorMode:
    from torch._subclasses.fake_tensor import FakeTensor

    for node in nodes:
        value = node.meta.get("example_value")
        if isinstance(value, FakeTensor):
            return value.fake_mode
    return FakeTensorMode(allow_non_fake_inputs=True)


def assert_functional(gm: fx.GraphModule) -> None:
    """Raise if any node of `gm` is a mutating ATen op (by its schema)."""
    for node in gm.graph.nodes:
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            raise AssertionError(f"mutating op left in a functional graph: {node.format_node()}")
