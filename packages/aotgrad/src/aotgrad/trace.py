"""The dispatch-level tracer: runs a callable (or a GraphModule, node by node) on fake tensors
and records every ATen op that reaches the Python dispatch key into a new FX graph.

IR in: a Python callable or a torch-level `fx.GraphModule`. IR out: an ATen `fx.GraphModule`
(may still contain mutating and aliasing ops; `aotgrad.functionalize` removes them), with
`meta["example_value"]` on every node and `stack_trace`/`nn_module_stack`/`source_fn` copied
from the torch-level node that produced each op.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["COPIED_META_KEYS", "AtenTracer", "TraceError", "new_fake_mode", "trace"]

COPIED_META_KEYS = ("stack_trace", "nn_module_stack", "source_fn")

DecompTable = Mapping[Any, Callable[..., Any]]


class TraceError(RuntimeError):
    """Tracing to ATen cannot represent what the program does (data-dependent values...)."""


def new_fake_mode() -> FakeTensorMode:
    """A fake mode for tracing; real tensors met during tracing become graph constants.

    Inputs get static shapes; the ShapeEnv only gives data-dependent results (`nonzero`,
    `unique`, `.item()`) unbacked symbolic sizes and values, so that they can be recorded.
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _sym_key(value: Any) -> str:
    # NOTE: Python wrappers of one symbolic value are not unique objects; its expression is.
    return str(value.node.expr)


def _is_tensor(value: object) -> bool:
    return isinstance(value, torch.Tensor)



def _changes_metadata(func: Any) -> bool:
    """An in-place view op (`squeeze_`, `t_`, `transpose_`, `as_strided_`...)."""
    if not isinstance(func, torch._ops.OpOverload):
        return False
    schema = func._schema
    name = schema.name.split("::")[-1]
    if not (schema.is_mutable and name.endswith("_") and not name.endswith("__")):
        return False
    packet = getattr(torch.ops.aten, name[:-1], None)
    view = getattr(packet, func._overloadname, None) if packet is not None else None
    if view is None:
        return False
    return any(r.alias_info is not None for r in view._schema.returns)


class AtenTracer(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch: untyped
    """Records ATen ops into `self.graph`; tensors are matched to nodes by identity."""

    def __init__(self, fake_mode: FakeTensorMode, decompositions: DecompTable) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch: untyped __init__
        self.fake_mode = fake_mode
        self.decompositions = decompositions
        self.graph = fx.Graph()
        self.root = torch.nn.Module()
        self.current_meta: dict[str, Any] = {}
        self._nodes: dict[int, fx.Node] = {}
        # NOTE: ids are only unique while the objects live; keep every traced value alive.
        self._keepalive: list[object] = []
        self._num_constants = 0
        self._sym_nodes: dict[str, fx.Node] = {}  # symbolic expression -> node
        self._backward_meta: dict[int, dict[str, Any]] = {}  # autograd seq nr -> metadata

    # ---------------------------------------------------------------- value <-> node

    def bind(self, value: object, node: fx.Node) -> None:
        self._nodes[id(value)] = node
        self._keepalive.append(value)

    def placeholders(self, names: Sequence[str], values: Sequence[object]) -> None:
        for name, value in zip(names, values):
            self.placeholder(name, value)

    def placeholder(self, name: str, value: object) -> fx.Node:
        node = self.graph.placeholder(name)
        node.meta["example_value"] = value
        if _is_tensor(value):
            self.bind(value, node)
        return node

    def node_of(self, value: torch.Tensor) -> fx.Node:
        node = self._nodes.get(id(value))
        if node is not None:
            return node
        return self._lift_constant(value)

    def _lift_constant(self, value: torch.Tensor) -> fx.Node:
        if isinstance(value, FakeTensor):
            constant = value.constant
            if constant is None:
                raise TraceError(
                    "a fake tensor that is neither a traced input nor produced by a traced op "
                    "reached the tracer; pass it as an input of the traced function"
                )
            real = constant
        else:
            real = value
        name = f"_tensor_constant{self._num_constants}"
        self._num_constants += 1
        with _disable_current_modes():
            real = real.detach().clone()
        setattr(self.root, name, real)
        node = self.graph.get_attr(name)
        with self.fake_mode:
            fake = self.fake_mode.from_tensor(real, static_shapes=True)
        node.meta["example_value"] = fake
        self.bind(value, node)
        return node

    def _to_arg(self, value: object) -> object:
        if _is_tensor(value):
            assert isinstance(value, torch.Tensor)
            return self.node_of(value)
        if isinstance(value, _SYMBOLIC):
            node = self._sym_nodes.get(_sym_key(value))
            if node is None:
                node = self._symbolic_expression(value)
            return node
        return value

    def _symbolic_expression(self, value: Any) -> fx.Node:
        """A data-dependent number computed in Python from `.item()` results: recorded as
        ATen ops on the tensors those results were read from."""
        from aotgrad.symbolic import UnsupportedExpression, expression_node

        def emit(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> fx.Node:
            node = self.graph.call_function(target, args, kwargs)
            if target is torch.ops.aten._local_scalar_dense.default:
                self._annotate(node, value)
                return node
            examples = tree_map(
                lambda a: a.meta["example_value"] if isinstance(a, fx.Node) else a, args)
            with self.fake_mode:
                self._annotate(node, target(*examples, **kwargs))
            return node

        try:
            node = expression_node(value.node.expr, self._sym_nodes, emit)
        except UnsupportedExpression as exc:
            raise TraceError(
                f"a data-dependent value ({value}) computed in Python reached an op and "
                f"cannot be recorded ({exc})"
            ) from exc
        self._sym_nodes[_sym_key(value)] = node
        return node

    # ---------------------------------------------------------------- dispatch

    def __torch_dispatch__(
        self,
        func: Any,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.ops.aten.native_batch_norm.default and args[3] is not None:
            # NOTE: native_batch_norm updates running_mean/var without saying so in its schema;
            # the _legit overload marks them (a!) so functionalization sees the writes.
            func = torch.ops.aten._native_batch_norm_legit.default
        decomp = self.decompositions.get(func)
        if decomp is not None:
            with self:
                out = decomp(*args, **kwargs)
            if out is not NotImplemented:
                return out
        if func is torch.ops.aten.lift_fresh.default and not isinstance(args[0], FakeTensor):
            # torch.tensor(...) inside the traced program: the value is a constant.
            out = func(*args, **kwargs)
            self.bind(out, self._lift_constant(args[0]))
            return out
        fx_args = tree_map(self._to_arg, tuple(args))
        fx_kwargs = tree_map(self._to_arg, kwargs)
        if _changes_metadata(func) and isinstance(fx_args[0], fx.Node):
            # NOTE: the op changes its argument's shape/strides in place (squeeze_, t_, ...):
            # keep the argument node's example value as it was before.
            fx_args[0].meta["example_value"] = torch.ops.aten.alias.default(args[0])
        try:
            out = func(*args, **kwargs)
        except Exception as exc:
            name = type(exc).__name__
            if "DataDependent" in name or "DynamicOutputShape" in name:
                raise TraceError(
                    f"{func} has a data-dependent output (shape or value); the ATen tracer "
                    "needs static shapes"
                ) from exc
            raise
        if isinstance(out, _SYMBOLIC):  # `.item()`: a data-dependent Python number
            node = self.graph.call_function(func, fx_args, fx_kwargs)
            self._annotate(node, out)
            self._sym_nodes[_sym_key(out)] = node
            return out
        if not any(_is_tensor(v) for v in tree_flatten(out)[0]):
            # NOTE: ops returning Python values (prim.device, sizes) are baked as constants.
            return out
        node = self.graph.call_function(func, fx_args, fx_kwargs)
        self._annotate(node, out)
        if isinstance(out, (tuple, list)):
            for index, item in enumerate(out):
                if _is_tensor(item):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    self._annotate(item_node, item)
                    self.bind(item, item_node)
        elif _is_tensor(out):
            self.bind(out, node)
        return out

    def _annotate(self, node: fx.Node, value: object) -> None:
        node.meta["example_value"] = value
        meta = self.current_meta
        if self._backward_meta:
            running = torch._C._current_autograd_node()
            if running is not None:
                meta = self._backward_meta.get(running._sequence_nr(), meta)
        for key in COPIED_META_KEYS:
            if key in meta:
                node.meta[key] = meta[key]

    def start_backward(self) -> None:
        """Before `torch.autograd.grad`: ops run by the backward of a traced forward op get
        that op's metadata (matched through the autograd node's sequence number)."""
        for value in self._keepalive:
            grad_fn = getattr(value, "grad_fn", None)
            node = self._nodes.get(id(value))
            if grad_fn is None or node is None:
                continue
            meta = {k: node.meta[k] for k in COPIED_META_KEYS if k in node.meta}
            if meta:
                self._backward_meta.setdefault(grad_fn._sequence_nr(), meta)

    @contextlib.contextmanager
    def node_meta(self, meta: Mapping[str, Any]) -> Iterator[None]:
        saved = self.current_meta
        self.current_meta = {k: meta[k] for k in COPIED_META_KEYS if k in meta}
        try:
            yield
        finally:
            self.current_meta = saved

    # ---------------------------------------------------------------- results

    def output(self, value: object) -> None:
        self.output_flat(tree_flatten(value)[0])

    def output_flat(self, flat: Sequence[object]) -> None:
        """Output node returning `flat` as a tuple (None entries kept)."""
        fx_flat: list[Any] = [self._to_arg(v) for v in flat]
        node = self.graph.output(tuple(fx_flat))
        node.meta["example_value"] = tuple(flat)

    def graph_module(self) -> fx.GraphModule:
        self.graph.lint()
        return fx.GraphModule(self.root, self.graph)


class _MetaInterpreter(fx.Interpreter):
    """Runs a GraphModule node by node so the tracer knows which FX node produced each op."""

    def __init__(self, gm: fx.GraphModule, tracer: AtenTracer) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.tracer = tracer

    def run_node(self, n: fx.Node) -> Any:
        with self.tracer.node_meta(n.meta):
            return super().run_node(n)


def run_with_meta(fn: Callable[..., Any], args: Sequence[Any], tracer: AtenTracer) -> Any:
    """Call `fn(*args)`; a GraphModule runs node by node to carry its nodes' metadata.

    A callable with a `run_traced(args, tracer)` method (a module lifted to a function of its
    parameters, a flattened user function) is run through that method instead.
    """
    run_traced = getattr(fn, "run_traced", None)
    if run_traced is not None:
        return run_traced(args, tracer)
    if isinstance(fn, fx.GraphModule):
        return _MetaInterpreter(fn, tracer).run(*args)
    return fn(*args)


def trace(
    fn: Callable[..., Any],
    fake_args: Sequence[object],
    *,
    fake_mode: FakeTensorMode,
    decompositions: DecompTable,
    arg_names: Sequence[str] | None = None,
    grad_enabled: bool = False,
) -> tuple[fx.GraphModule, Any]:
    """Trace `fn(*fake_args)` to an ATen graph returning the flat outputs as a tuple.

    Returns the graph and the pytree spec of fn's result (to rebuild the structure).
    """
    tracer = AtenTracer(fake_mode, decompositions)
    for index, value in enumerate(fake_args):
        name = arg_names[index] if arg_names is not None else f"arg{index}"
        tracer.placeholder(name, value)
    with fake_mode, tracer, torch.set_grad_enabled(grad_enabled):
        result = run_with_meta(fn, list(fake_args), tracer)
    flat, spec = tree_flatten(result)
    for value in flat:
        if value is not None and not isinstance(value, (torch.Tensor, int, float, bool,
                                                         *_SYMBOLIC)):
            raise TraceError(f"unsupported output of type {type(value).__name__}")
    tracer.output(tree_unflatten(flat, spec))
    return tracer.graph_module(), spec


def fake_inputs(fake_mode: FakeTensorMode, args: Sequence[object]) -> list[object]:
    """Fake copies (same metadata, requires_grad included) of the tensors among `args`."""
    out: list[object] = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            out.append(fake_mode.from_tensor(arg, static_shapes=True))
        else:
            out.append(arg)
    return out
