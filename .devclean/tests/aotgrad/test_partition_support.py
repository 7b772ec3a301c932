"""Joint graphs for the partitioner tests, and the check that a split matches eager autograd.

`trace_joint` records the ATen ops of a function and of its `torch.autograd.grad` with a
small `TorchDispatchMode` over real tensors (tests only: aotgrad's own tracer builds joint
graphs in production). It follows the joint-graph convention of INTERFACES.md.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from aotgrad.partition import PartitionConfig, get_partitioner
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map


def _functional_variant(func: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    schema = func._schema
    if not schema.is_mutable:
        return None
    if func is torch.ops.aten.bernoulli_.float:
        return torch.ops.aten.bernoulli.p
    name = schema.name.split("::")[1]
    if not name.endswith("_"):
        raise NotImplementedError(f"test tracer cannot functionalize {func}")
    packet = getattr(torch.ops.aten, name[:-1])
    return getattr(packet, func._overloadname)  # type: ignore[no-any-return]


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: fx.Graph, env: dict[int, fx.Node]) -> None:
        super().__init__()
        self.graph = graph
        self.env = env
        self.keep: list[object] = []
        self.fake = FakeTensorMode(allow_non_fake_inputs=True)

    def fake_of(self, value: object) -> object:
        if isinstance(value, torch.Tensor):
            return self.fake.from_tensor(value)
        if isinstance(value, (tuple, list)):
            return tuple(self.fake_of(v) for v in value)
        return value

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.ops.aten.bernoulli_.float and len(args) < 2:
            args = (args[0], kwargs.pop("p", 0.5))  # NOTE: bernoulli.p has no default p
        out = func(*args, **kwargs)

        def to_arg(x: object) -> object:
            if isinstance(x, torch.Tensor):
                if id(x) not in self.env:
                    raise NotImplementedError(f"{func}: tensor from outside the trace")
                return self.env[id(x)]
            return x

        target = _functional_variant(func) or func
        node = self.graph.call_function(target, tree_map(to_arg, args), tree_map(to_arg, kwargs))
        node.meta["example_value"] = self.fake_of(out)
        self.keep.append(out)
        if isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    item_node = self.graph.call_function(operator.getitem, (node, i))
                    item_node.meta["example_value"] = self.fake_of(item)
                    self.env[id(item)] = item_node
        elif isinstance(out, torch.Tensor):
            self.env[id(out)] = node
        return out


def trace_joint(
    fn: Callable[..., Sequence[torch.Tensor]], inputs: Sequence[torch.Tensor]
) -> tuple[fx.GraphModule, int]:
    """Return (joint GraphModule, num_fwd_outputs) for `fn(*inputs)` (a tuple of tensors)."""
    graph = fx.Graph()
    env: dict[int, fx.Node] = {}
    recorder = _Recorder(graph, env)
    primals = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    for i, p in enumerate(primals):
        env[id(p)] = graph.placeholder(f"primals_{i + 1}")
        env[id(p)].meta["example_value"] = recorder.fake_of(p)
    with recorder:
        outs = tuple(fn(*primals))
    diff = [o for o in outs if o.requires_grad]
    tangents = [torch.randn_like(o) for o in diff]
    for i, t in enumerate(tangents):
        env[id(t)] = graph.placeholder(f"tangents_{i + 1}")
        env[id(t)].meta["example_value"] = recorder.fake_of(t)
    wanted = [p for p in primals if p.requires_grad]
    with recorder:
        grads = torch.autograd.grad(diff, wanted, tangents, allow_unused=True) if diff else ()
    by_primal = dict(zip(map(id, wanted), grads))
    flat: list[object] = [env[id(o)] for o in outs]
    for p in primals:
        g = by_primal.get(id(p))
        flat.append(None if g is None else env[id(g)])
    # NOTE: placeholders must come first; the recorder appended them as the trace went.
    tangent_nodes = [n for n in graph.nodes if n.op == "placeholder" and "tangents" in n.name]
    first = next(n for n in graph.nodes if n.op != "placeholder")
    for t in tangent_nodes:
        first.prepend(t)
    graph.output(tuple(flat))
    graph.lint()
    return fx.GraphModule(torch.nn.Module(), graph), len(outs)


def run_split(
    fw: fx.GraphModule,
    bw: fx.GraphModule,
    num_fwd_outputs: int,
    inputs: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    fw_out = list(fw(*inputs))
    outs, saved = fw_out[:num_fwd_outputs], fw_out[num_fwd_outputs:]
    grads = list(bw(*saved, *tangents))
    return outs, grads


def eager_reference(
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    outs = list(fn(*leaves))
    diff = [o for o in outs if o.requires_grad]
    wanted = [p for p in leaves if p.requires_grad]
    grads = torch.autograd.grad(diff, wanted, tangents, allow_unused=True) if diff else ()
    by_leaf = dict(zip(map(id, wanted), grads))
    return [o.detach() for o in outs], [by_leaf.get(id(p)) for p in leaves]


def check_partition_matches_eager(
    name: str,
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[torch.Tensor],
    config: PartitionConfig | None = None,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Trace, partition, run fw then bw on fresh inputs, compare with eager autograd."""
    joint, nfwd = trace_joint(fn, inputs)
    fw, bw = get_partitioner(name)(joint, num_fwd_outputs=nfwd, config=config or PartitionConfig())
    fresh = [torch.randn_like(x) if x.is_floating_point() else x.clone() for x in inputs]
    for x, f in zip(inputs, fresh):
        f.requires_grad_(x.requires_grad)
    n_tangents = sum(1 for n in joint.graph.nodes if n.op == "placeholder" and "tangents" in n.name)
    tangents = _tangents_like(fn, fresh)
    assert len(tangents) == n_tangents
    ref_out, ref_grads = eager_reference(fn, fresh, tangents)
    fresh = [f.detach() for f in fresh]
    outs, grads = run_split(fw, bw, nfwd, fresh, tangents)
    assert len(outs) == len(ref_out)
    for got, want in zip(outs, ref_out):
        torch.testing.assert_close(got, want)
    assert len(grads) == len(ref_grads)
    for got_g, want_g in zip(grads, ref_grads):
        if want_g is None:
            assert got_g is None
        else:
            assert got_g is not None
            torch.testing.assert_close(got_g, want_g)
    return fw, bw


def _tangents_like(
    fn: Callable[..., Sequence[torch.Tensor]], inputs: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    outs = fn(*leaves)
    return [torch.randn_like(o) for o in outs if o.requires_grad]


def test_trace_joint_follows_the_convention() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    joint, nfwd = trace_joint(lambda a, b: (torch.relu(a @ b),), [x, w])
    names = [n.name for n in joint.graph.nodes if n.op == "placeholder"]
    assert names == ["primals_1", "primals_2", "tangents_1"]
    assert nfwd == 1
    out = next(n for n in joint.graph.nodes if n.op == "output")
    assert len(out.args[0]) == 3
    for node in joint.graph.nodes:
        if node.op != "output":
            assert "example_value" in node.meta, node


@pytest.mark.parametrize("name", ["default"])
def test_support_split_runs(name: str) -> None:
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, requires_grad=True)
    check_partition_matches_eager(name, lambda a, b: (torch.relu(a @ b).sin(),), [x, w])
