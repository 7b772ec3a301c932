"""Read a joint graph: which nodes are forward or backward, what each value costs to keep.

IR in: the joint GraphModule of INTERFACES.md (`primals_*`, `tangents_*` placeholders; output
tuple = forward outputs then one gradient per primal). Out: a `JointInfo` and op classes
(random, view, pointwise, recomputable) used by every partitioner.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Sequence

import torch
from torch import fx

from aotgrad.gradmode import GRAD_MODE_OPS

aten = torch.ops.aten

# NOTE: not pointwise or views, but as cheap as a copy and safe to run twice, so min_cut may
# recompute them in the backward rather than save their result.
_CHEAP_OPS: frozenset[object] = frozenset(
    {
        aten.clone.default,
        aten._to_copy.default,
        aten.to.dtype,
        aten.to.dtype_layout,
        aten.to.device,
        aten.to.other,
        aten.type_as.default,
        aten.copy.default,
        aten.alias.default,
        aten.detach.default,
        aten.lift_fresh_copy.default,
        aten.full.default,
        aten.full_like.default,
        aten.zeros.default,
        aten.zeros_like.default,
        aten.ones.default,
        aten.ones_like.default,
        aten.empty.memory_format,
        aten.empty_like.default,
        aten.new_zeros.default,
        aten.new_ones.default,
        aten.new_full.default,
        aten.new_empty.default,
        aten.scalar_tensor.default,
        aten.arange.default,
        aten.arange.start,
        aten.arange.start_step,
        aten.cat.default,
        aten.expand_copy.default,
        aten.view_copy.default,
        aten.permute_copy.default,
    }
)


def _op_tags(node: fx.Node) -> Sequence[torch.Tag]:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        tags: Sequence[torch.Tag] = target.tags
        return tags
    return ()


def _argument(node: fx.Node, name: str) -> object:
    """The value of the argument `name` of an OpOverload call (its default if not passed)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    for i, arg in enumerate(target._schema.arguments):
        if arg.name != name:
            continue
        if name in node.kwargs:
            return node.kwargs[name]
        if not arg.kwarg_only and i < len(node.args):
            return node.args[i]
        return arg.default_value if arg.has_default_value() else None
    return None


def is_random(node: fx.Node) -> bool:
    """An op whose result depends on the random generator: never run twice.

    NOTE: attention ops are tagged as seeded for their dropout; with `dropout_p` 0 (a
    constant) they draw nothing and are as deterministic as a matmul.
    """
    if torch.Tag.nondeterministic_seeded not in _op_tags(node):
        return False
    target = node.target
    assert isinstance(target, torch._ops.OpOverload)
    names = {a.name for a in target._schema.arguments}
    if "dropout_p" in names:
        p = _argument(node, "dropout_p")
        return not (isinstance(p, (int, float)) and p == 0)
    return True


def is_view(node: fx.Node) -> bool:
    """A view op (or getitem, which only picks an element of a multi-output op)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.is_view


# NOTE: ops whose result is the input itself when nothing needs converting, else a copy.
_MAYBE_ALIAS = frozenset({"to", "contiguous", "reshape", "type_as"})


def _returns_alias(node: fx.Node) -> bool:
    """The node's (first) result is a view of its first argument's storage."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not target.is_view:
        return False
    if target._schema.name.split("::")[-1] not in _MAYBE_ALIAS:
        return True
    out, base = example_value(node), node.args[0] if node.args else None
    base_value = example_value(base) if isinstance(base, fx.Node) else None
    if not isinstance(out, torch.Tensor) or not isinstance(base_value, torch.Tensor):
        return False
    return (out.dtype == base_value.dtype and out.device == base_value.device
            and base_value.is_contiguous())


def storage_root(node: fx.Node) -> fx.Node:
    """The node whose storage `node`'s value lives in: through view ops (`view`, `t`,
    `permute`, ...) and the elements of aliasing multi-output ops (`split`, `unbind`) to the
    first node that allocates. Saving several views of one root keeps one storage alive.
    """
    while node.op == "call_function":
        source: object = node
        if node.target is operator.getitem:
            source = node.args[0]
        if not isinstance(source, fx.Node) or not _returns_alias(source) or not source.args:
            break
        base = source.args[0]
        if not isinstance(base, fx.Node):
            break
        node = base
    return node


def is_pointwise(node: fx.Node) -> bool:
    return torch.Tag.pointwise in _op_tags(node)


def is_reduction(node: fx.Node) -> bool:
    return torch.Tag.reduction in _op_tags(node)


_SCALARS = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


def is_cheap(node: fx.Node) -> bool:
    """Pointwise, view, copy-like or scalar (size) arithmetic: `min_cut` may recompute it."""
    if node.op != "call_function" or is_random(node):
        return False
    if isinstance(example_value(node), _SCALARS):
        return True  # NOTE: sym_size and friends: shape arithmetic is free to redo
    return is_view(node) or is_pointwise(node) or node.target in _CHEAP_OPS


# NOTE: the ops whose FLOPs dwarf the bytes they move; recomputing them is what a budget
# below the relaxed cuts pays for (`budget.BudgetPlanner.relaxed_cuts`). The CPU flash
# attention kernel is not among them, as in torch's partitioner: its relaxed cut recomputes
# attention on the CPU (saving q, k, v instead of the output and its logsumexp), and a
# budget must never save more than torch.compile's at the same value.
_COMPUTE_INTENSIVE = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "_convolution",
    "convolution_backward", "mkldnn_convolution", "_scaled_mm",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_flash_attention_forward", "_efficient_attention_forward", "upsample_bilinear2d",
})


def is_compute_intensive(node: fx.Node) -> bool:
    """A matmul, convolution or attention kernel."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    return target._schema.name.split("::")[-1] in _COMPUTE_INTENSIVE


def is_rerunnable(node: fx.Node) -> bool:
    """Anything deterministic: `memory_budget` may recompute it when the budget asks.

    NOTE: not an op whose outputs depend on grad mode (`aotgrad.gradmode`): the backward runs
    with grad mode off.
    """
    if node.op != "call_function" or is_random(node) or node.target in GRAD_MODE_OPS:
        return False
    target = node.target
    return not (isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable)


def example_value(node: fx.Node) -> object:
    return node.meta.get("example_value")


def value_bytes(node: fx.Node) -> int:
    """Bytes that keeping this node's value alive costs (numel * itemsize)."""
    return bytes_of(example_value(node))


def _concrete(n: int | torch.SymInt) -> int:
    """A size as an int; a symbolic size counts as its hint (the example's value)."""
    if isinstance(n, torch.SymInt):
        sym = n.node
        # NOTE: torch 2.14 types the hint as any number or symbol; a size's hint is an int.
        hint = sym.hint if sym.has_hint() else None
        # NOTE: 4096 prices an unbacked size (no hint) as a moderately large tensor.
        return int(hint) if isinstance(hint, (int, float, torch.SymInt)) else 4096
    return int(n)


def bytes_of(value: object) -> int:
    if isinstance(value, torch.Tensor):
        return _concrete(value.numel()) * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(bytes_of(v) for v in value)
    if isinstance(value, _SCALARS):
        return 8
    return 0


def is_saveable(node: fx.Node) -> bool:
    """Only tensors and scalars can be handed from forward to backward (not tuples)."""
    value = example_value(node)
    return not isinstance(value, (tuple, list))


@dataclasses.dataclass(slots=True)
class JointInfo:
    """The joint graph's structure, computed once per partition call."""

    gm: fx.GraphModule
    num_fwd_outputs: int
    primals: list[fx.Node]
    tangents: list[fx.Node]
    fwd_outputs: list[fx.node.Argument]
    grad_outputs: list[fx.node.Argument]
    order: dict[fx.Node, int]
    # nodes that read a tangent, directly or not: they can only run in the backward
    tangent_dependent: set[fx.Node]
    # nodes the forward outputs need (from primals only)
    required_fw: set[fx.Node]
    # nodes the gradients need (any of them, forward-computable or not)
    required_bw: set[fx.Node]

    def is_forward_computable(self, node: fx.Node) -> bool:
        return node not in self.tangent_dependent and node.op != "output"


def _nodes_in(values: Iterable[fx.node.Argument]) -> list[fx.Node]:
    found: list[fx.Node] = []

    def visit(node: fx.Node) -> fx.Node:
        found.append(node)
        return node

    for value in values:
        fx.node.map_arg(value, visit)
    return found


def ancestors(roots: Iterable[fx.Node]) -> set[fx.Node]:
    """The roots and every node they read, transitively."""
    seen: set[fx.Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def analyze(gm: fx.GraphModule, num_fwd_outputs: int) -> JointInfo:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    primals = [n for n in placeholders if not n.name.startswith("tangents")]
    tangents = [n for n in placeholders if n.name.startswith("tangents")]
    outputs = [n for n in graph.nodes if n.op == "output"]
    if len(outputs) != 1:
        raise ValueError(f"joint graph must have one output node, found {len(outputs)}")
    flat = outputs[0].args[0]
    if not isinstance(flat, (tuple, list)):
        raise TypeError("joint graph must return a flat tuple (forward outputs, gradients)")
    flat = list(flat)
    if not 0 <= num_fwd_outputs <= len(flat):
        raise ValueError(f"num_fwd_outputs={num_fwd_outputs} but the joint returns {len(flat)}")
    fwd_outputs = flat[:num_fwd_outputs]
    grad_outputs = flat[num_fwd_outputs:]
    if len(grad_outputs) != len(primals):
        raise ValueError(
            f"joint returns {len(grad_outputs)} gradients for {len(primals)} primals"
        )
    order = {node: i for i, node in enumerate(graph.nodes)}
    tangent_dependent: set[fx.Node] = set(tangents)
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if any(arg in tangent_dependent for arg in node.all_input_nodes):
            tangent_dependent.add(node)
    required_fw = ancestors(_nodes_in(fwd_outputs))
    leaked = required_fw & tangent_dependent
    if leaked:
        names = sorted(n.name for n in leaked)[:5]
        raise ValueError(f"forward outputs depend on tangents through {names}")
    required_bw = ancestors(_nodes_in(grad_outputs))
    return JointInfo(
        gm=gm,
        num_fwd_outputs=num_fwd_outputs,
        primals=primals,
        tangents=tangents,
        fwd_outputs=fwd_outputs,
        grad_outputs=grad_outputs,
        order=order,
        tangent_dependent=tangent_dependent,
        required_fw=required_fw,
        required_bw=required_bw,
    )


def nodes_in(values: Iterable[fx.node.Argument]) -> list[fx.Node]:
    """Every fx.Node inside (possibly nested) output values."""
    return _nodes_in(values)
