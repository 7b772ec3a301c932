"""The partitioners on joint graphs built by aotgrad's own tracer (`aotgrad.joint`), from
`torch.fx.symbolic_trace`d modules: fw then bw equals eager autograd."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from aotgrad.joint import build_joint
from aotgrad.partition import PartitionConfig, get_partitioner, saved_bytes
from torch import fx

CONFIGS = [
    ("default", PartitionConfig()),
    ("min_cut", PartitionConfig()),
    ("memory_budget", PartitionConfig(activation_memory_budget=1.0)),
    ("memory_budget", PartitionConfig(activation_memory_budget=0.5)),
    ("memory_budget", PartitionConfig(activation_memory_budget=0.2, solver="greedy")),
    ("memory_budget", PartitionConfig(activation_memory_budget=0.0)),
]
IDS = ["default", "min_cut", "budget1", "budget0.5", "budget0.2greedy", "budget0"]


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 24)
        self.fc2 = torch.nn.Linear(24, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Block(torch.nn.Module):
    """A transformer block written with plain torch ops."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


def _functional(module: torch.nn.Module) -> tuple[Callable[..., Any], list[torch.Tensor]]:
    """`module` traced by symbolic_trace, as a function of (params..., x)."""
    gm = fx.symbolic_trace(module)
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]

    def fn(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        state = dict(zip(names, flat[: len(names)]))
        out = torch.func.functional_call(gm, state, (flat[len(names)],))
        return (out, out.detach().amax())  # the second output needs no gradient

    return fn, params


MODULES: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...]]] = {
    "mlp": (Mlp, (5, 12)),
    "block": (Block, (2, 6, 16)),
}


@pytest.mark.parametrize("config_index", range(len(CONFIGS)), ids=IDS)
@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_partitions_of_build_joint_match_eager(module_name: str, config_index: int) -> None:
    torch.manual_seed(0)
    factory, shape = MODULES[module_name]
    fn, params = _functional(factory())
    x = torch.randn(*shape, requires_grad=True)
    inputs = [*params, x]
    joint = build_joint(fn, inputs)
    name, config = CONFIGS[config_index]
    fw, bw = get_partitioner(name)(joint.gm, num_fwd_outputs=joint.num_fwd_outputs,
                                   config=config)
    detached = [t.detach() for t in inputs]
    fw_out = list(fw(*detached))
    outs, saved = fw_out[: joint.num_fwd_outputs], fw_out[joint.num_fwd_outputs :]
    tangents = [torch.randn_like(outs[i]) for i in joint.tangent_outputs]
    grads = list(bw(*saved, *tangents))

    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    ref = fn(*leaves)
    ref_grads = torch.autograd.grad([ref[i] for i in joint.tangent_outputs], leaves, tangents)
    for got, want in zip(outs, ref):
        torch.testing.assert_close(got, want.detach())
    assert len(grads) == len(leaves)
    for got_g, want_g in zip(grads, ref_grads):
        assert got_g is not None
        torch.testing.assert_close(got_g, want_g, rtol=1e-4, atol=1e-5)
    assert saved_bytes(fw, joint.num_fwd_outputs) >= 0


def test_budget_halves_saved_bytes_of_a_block() -> None:
    torch.manual_seed(0)
    fn, params = _functional(Block())
    joint = build_joint(fn, [*params, torch.randn(2, 6, 16, requires_grad=True)])
    partition = get_partitioner("memory_budget")
    n = joint.num_fwd_outputs
    sizes = {}
    for budget in (1.0, 0.5, 0.2, 0.0):
        fw, _ = partition(joint.gm, num_fwd_outputs=n,
                          config=PartitionConfig(activation_memory_budget=budget))
        sizes[budget] = saved_bytes(fw, n)
    assert sizes[1.0] >= sizes[0.5] >= sizes[0.2] >= sizes[0.0]
    assert sizes[0.5] <= 0.5 * sizes[1.0]
    mc, _ = get_partitioner("min_cut")(joint.gm, num_fwd_outputs=n, config=PartitionConfig())
    df, _ = get_partitioner("default")(joint.gm, num_fwd_outputs=n, config=PartitionConfig())
    assert sizes[1.0] == saved_bytes(mc, n) <= saved_bytes(df, n)


@pytest.mark.parametrize("budget", [1.0, 0.3, 0.0])
@pytest.mark.parametrize("name", ["default", "min_cut", "memory_budget"])
def test_training_step_through_aot_module(name: str, budget: float) -> None:
    import aotgrad
    from aotgrad.backend import run_graph_as_is

    torch.manual_seed(0)
    module = Block()
    x = torch.randn(2, 6, 16)
    module(x).pow(2).mean().backward()
    expected = [p.grad.clone() for p in module.parameters()]  # type: ignore[union-attr]
    module.zero_grad(set_to_none=True)
    with aotgrad.config.patch(activation_memory_budget=budget):
        compiled = aotgrad.aot_module(module, run_graph_as_is, partition_fn=name)
        compiled(x).pow(2).mean().backward()
    for p, want in zip(module.parameters(), expected):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_min_cut_on_build_joint_recomputes_only_cheap_ops(module_name: str) -> None:
    from aotgrad.partition.analysis import analyze, is_cheap
    from aotgrad.partition.mincut import partition_min_cut

    torch.manual_seed(0)
    factory, shape = MODULES[module_name]
    fn, params = _functional(factory())
    joint = build_joint(fn, [*params, torch.randn(*shape, requires_grad=True)])
    result = partition_min_cut(analyze(joint.gm, joint.num_fwd_outputs))
    # NOTE: the MLP recomputed only its weights' transposes, which now are saved instead:
    # they live in the weights' storage, so saving them is free (`storage_root`).
    if module_name != "mlp":
        assert result.recomputed, "expected min_cut to recompute some pointwise op"
    for node in result.recomputed:
        assert is_cheap(node), f"min_cut recomputes {node.name} ({node.target})"


@pytest.mark.parametrize("name", ["default", "min_cut", "memory_budget"])
def test_constants_of_a_symbolic_traced_module_are_not_saved(name: str) -> None:
    """symbolic_trace keeps parameters as attributes: the joint reads them with get_attr."""
    torch.manual_seed(0)
    module = Mlp()
    gm = fx.symbolic_trace(module)
    x = torch.randn(5, 12, requires_grad=True)
    joint = build_joint(gm, [x])
    fw, bw = get_partitioner(name)(joint.gm, num_fwd_outputs=joint.num_fwd_outputs,
                                   config=PartitionConfig(activation_memory_budget=0.0))
    out = list(fw(x.detach()))
    n = joint.num_fwd_outputs
    tangent = torch.randn_like(out[0])
    (grad,) = bw(*out[n:], tangent)
    (expected,) = torch.autograd.grad(module(x), [x], tangent)
    torch.testing.assert_close(grad, expected)


def test_symbolic_sizes_are_priced_by_their_hint() -> None:
    from aotgrad.partition.analysis import bytes_of
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    fake = mode.from_tensor(torch.randn(5, 3), symbolic_context=context)
    assert isinstance(fake.shape[0], torch.SymInt)
    assert bytes_of(fake) == 5 * 3 * 4
