"""The dispatch-level tracer: runs a callable (or a GraphModule, node by node) on fake tensors
and records every ATen op that reaches the Python dispatch key into a new FX graph.

IR in: a Python callable or a torch-level `fx.GraphModule`. IR out: an ATen `fx.GraphModule`
(may still contain mutating and aliasing ops; `aotgrad.functionalize` removes them), with
`meta["example_value"]` on every node and `stack_trace`/`nn_module_stack`/`source_fn` and the
checkpointed region (`checkpoint`) copied from the torch-level node that produced each op.
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

from aotgrad.checked_ops import VALUE_CHECKS, CheckedOps
from aotgrad.overlap import check_write_overlap

__all__ = ["COPIED_META_KEYS", "AtenTracer", "TraceError", "new_fake_mode",
           "saved_tensor_hooks_deferred", "trace"]

# NOTE: "checkpoint" marks the nodes of a `torch.utils.checkpoint` region (its number); the
# partitioners recompute them in the backward instead of saving them.
COPIED_META_KEYS = ("stack_trace", "nn_module_stack", "source_fn", "checkpoint")

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


@contextlib.contextmanager
def saved_tensor_hooks_deferred() -> Iterator[None]:
    """Saved-tensor hooks in effect (`torch.autograd.graph.saved_tensors_hooks`: the
    caller's activation offloading, a byte count) do not run while tracing.

    NOTE: with a hook in effect autograd detaches every tensor it saves before packing it;
    traced, that put a `detach` of every saved value in the joint graph (55 in the GPT-2 of
    tools/bench/memory_budget instead of 14), and the partitioner could no longer tell the
    values eager saves as an op's own result (`partition/analysis.saved_as_result`). The
    hooks still apply at run time, to what the compiled forward saves for the backward.
    """
    prior = torch._C._autograd._saved_tensors_hooks_set_tracing(True)
    try:
        yield
    finally:
        torch._C._autograd._saved_tensors_hooks_set_tracing(prior)
_DETACH = torch.ops.aten.detach.default


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
        # unbacked size symbols of traced tensors -> (tensor node, dim), read on demand
        self._size_syms: dict[str, tuple[fx.Node, int]] = {}
        self._emitted_asserts: set[str] = set()
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
            assert isinstance(value, torch.Tensor)
            self.bind(value, node)
            self._note_sizes(node, value)
        elif isinstance(value, torch.SymInt):
            # NOTE: a symbolic int argument (`aotgrad.dynamic`): ops reading its symbol
            # read this input, not a constant of the graph.
            self._sym_nodes.setdefault(_sym_key(value), node)
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
                self._bind_sizes(value.node.expr.free_symbols)
                node = self._sym_nodes.get(_sym_key(value))
            if node is None:
                node = self._symbolic_expression(value)
            return node
        return value

    def _note_sizes(self, node: fx.Node, value: torch.Tensor) -> None:
        """Remember which dims of a traced tensor have data-dependent (unbacked) sizes."""
        sizes: tuple[object, ...] = tuple(value.shape)
        for dim, size in enumerate(sizes):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                if getattr(expr, "is_Symbol", False):
                    self._size_syms.setdefault(str(expr), (node, dim))

    def _bind_sizes(self, symbols: Any) -> None:
        """Nodes reading the unbacked sizes among `symbols` (`aten.sym_size.int`)."""
        for symbol in symbols:
            key = str(symbol)
            if key in self._sym_nodes or key not in self._size_syms:
                continue
            tensor_node, dim = self._size_syms[key]
            node = self.graph.call_function(torch.ops.aten.sym_size.int, (tensor_node, dim))
            self._annotate(node, tensor_node.meta["example_value"].shape[dim])
            self._sym_nodes[key] = node

    def _own_symbols(self) -> set[str]:
        return set(self._size_syms) | {
            key for key, node in self._sym_nodes.items()
            if node.target is torch.ops.aten._local_scalar_dense.default
            and getattr(node.meta.get("example_value"), "node", None) is not None
            and str(node.meta["example_value"].node.expr) == key}

    def emit_runtime_asserts(self) -> None:
        """The ShapeEnv's deferred runtime asserts about this trace's data-dependent values
        (`narrow`'s bounds on a `.item()` start, `torch._check(...)` in the program), and the
        value ranges the ops required of `.item()` results, as `aten._assert_async` nodes:
        bad data raises at run time as in eager instead of giving wrong numbers."""
        shape_env = self.fake_mode.shape_env
        if shape_env is None:
            return
        own = self._own_symbols()
        item_symbols = own - set(self._size_syms)
        checks: list[tuple[Any, str]] = []
        for asserts in list(shape_env.deferred_runtime_asserts.values()):
            checks.extend((ra.expr, ra.msg) for ra in asserts)
        for key in sorted(item_symbols):
            checks.extend(_range_checks(shape_env, self._sym_nodes[key]))
        for expr, msg in checks:
            names = {str(s) for s in expr.free_symbols}
            if not names <= own or str(expr) in self._emitted_asserts:
                # NOTE: a check about values this graph never computes: another trace's (the
                # shape env is shared) or sizes of tensors made outside the traced ops.
                continue
            self._emitted_asserts.add(str(expr))
            self._bind_sizes(expr.free_symbols)
            self._assert_node(expr, msg)

    def _emit_on_fakes(self, target: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> fx.Node:
        """Record `target(*args)` and annotate it by running it on the arguments' fakes."""
        node = self.graph.call_function(target, args, kwargs)
        examples = tree_map(
            lambda a: a.meta["example_value"] if isinstance(a, fx.Node) else a, args)
        with self.fake_mode:
            self._annotate(node, target(*examples, **kwargs))
        return node

    def _assert_node(self, expr: Any, msg: str) -> None:
        from aotgrad.symbolic import UnsupportedExpression, condition_node

        try:
            condition = condition_node(expr, self._sym_nodes, self._emit_on_fakes)
        except UnsupportedExpression as exc:
            raise TraceError(f"cannot record the runtime check {expr} ({exc})") from exc
        text = f"runtime check failed: {expr}" + (f" ({msg})" if msg else "")
        node = self.graph.call_function(torch.ops.aten._assert_async.msg, (condition, text))
        node.meta["example_value"] = None

    def _symbolic_expression(self, value: Any) -> fx.Node:
        """A data-dependent number computed in Python from `.item()` results: recorded as
        ATen ops on the tensors those results were read from."""
        from aotgrad.symbolic import UnsupportedExpression, expression_node

        def emit(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> fx.Node:
            if target is not torch.ops.aten._local_scalar_dense.default:
                return self._emit_on_fakes(target, args, kwargs)
            node = self.graph.call_function(target, args, kwargs)
            self._annotate(node, value)
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
        check_write_overlap(func, args, kwargs)
        if func is torch.ops.aten.native_batch_norm.default and args[3] is not None:
            # NOTE: native_batch_norm updates running_mean/var without saying so in its schema;
            # the _legit overload marks them (a!) so functionalization sees the writes.
            func = torch.ops.aten._native_batch_norm_legit.default
        # NOTE: detach stays itself (core decomposes it to alias): an output that is a
        # detached view of an input is replayed by the wrapper, and must not require grad.
        decomp = None if func is _DETACH else self.decompositions.get(func)
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
        if func in VALUE_CHECKS:
            # NOTE: a value check (`checked_ops`): returns nothing, yet must stay in the graph.
            node = self.graph.call_function(func, fx_args, fx_kwargs)
            node.meta["example_value"] = None
            return out
        if not any(_is_tensor(v) for v in tree_flatten(out)[0]) and not (
                isinstance(func, torch._ops.OpOverload) and func._schema.is_mutable):
            # NOTE: ops returning Python values (prim.device, sizes) are baked as constants;
            # mutating ops returning nothing (`_foreach_mul_`) are recorded for their writes.
            return out
        node = self.graph.call_function(func, fx_args, fx_kwargs)
        self._annotate(node, out)
        if isinstance(out, (tuple, list)):
            for index, item in enumerate(out):
                if _is_tensor(item):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    self._annotate(item_node, item)
                    self.bind(item, item_node)
                    self._note_sizes(item_node, item)
        elif _is_tensor(out):
            self.bind(out, node)
            self._note_sizes(node, out)
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
            try:
                grad_fn = getattr(value, "grad_fn", None)
            except RuntimeError:
                # NOTE: a view made under no_grad whose base then changed in place with grad
                # on (`with no_grad(): y[0] = v` on an input, written back after the forward)
                # refuses to give its grad_fn; nothing reads that view again, so it has no
                # backward ops to annotate.
                continue
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
        """Output node returning `flat` as a tuple (None entries kept), after the runtime
        checks of the trace's data-dependent values."""
        fx_flat: list[Any] = [self._to_arg(v) for v in flat]
        self.emit_runtime_asserts()
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
            try:
                return super().run_node(n)
            except RuntimeError as exc:
                if "data is not allocated yet" not in str(exc):
                    raise
            # NOTE: a C++ composite read a fake tensor's data (`tensor_split` with tensor
            # indices); torch's Python implementation reads it with `.item()` instead.
            from torch._dispatch.python import enable_python_dispatcher

            with enable_python_dispatcher():
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
    with (fake_mode, tracer, CheckedOps(), torch.set_grad_enabled(grad_enabled),
          saved_tensor_hooks_deferred()):
        result = run_with_meta(fn, list(fake_args), tracer)
    flat, spec = tree_flatten(result)
    for value in flat:
        if value is not None and not isinstance(value, (torch.Tensor, int, float, bool,
                                                         *_SYMBOLIC)):
            raise TraceError(f"unsupported output of type {type(value).__name__}")
    tracer.output(tree_unflatten(flat, spec))
    return tracer.graph_module(), spec


def _range_checks(shape_env: Any, node: fx.Node) -> list[tuple[Any, str]]:
    """`lower <= u0 <= upper` for a `.item()` result whose range an op narrowed (a size must
    be >= 0...): the ShapeEnv trusts the range, so the graph must check it."""
    value = node.meta.get("example_value")
    if not isinstance(value, torch.SymInt):
        return []
    symbol = value.node.expr
    bounds = shape_env.var_to_range.get(symbol)
    if bounds is None:
        return []
    from torch.utils._sympy.numbers import int_oo

    checks: list[tuple[Any, str]] = []
    if bounds.lower.is_finite and bounds.lower not in (int_oo, -int_oo):
        checks.append((symbol >= bounds.lower, f"{symbol} >= {bounds.lower}"))
    if bounds.upper.is_finite and bounds.upper not in (int_oo, -int_oo):
        checks.append((symbol <= bounds.upper, f"{symbol} <= {bounds.upper}"))
    return checks


def fake_inputs(fake_mode: FakeTensorMode, args: Sequence[object]) -> list[object]:
    """Fake copies (same metadata, requires_grad included) of the tensors among `args`."""
    out: list[object] = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            out.append(fake_mode.from_tensor(arg, static_shapes=True))
        else:
            out.append(arg)
    return out
