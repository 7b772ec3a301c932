"""Batch norm in eval mode reads its running statistics and writes nothing, as in eager: the
compiled graph computes it functionally (no copy back into the buffers, no version bump, so
an autograd graph recorded before the call still runs its backward), while training mode
still updates the statistics as eager does."""

from __future__ import annotations

from typing import Any

import aotgrad
import torch
from torch import nn


def _keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4))


def _versions(m: nn.Module) -> dict[str, int]:
    return {n: b._version for n, b in m.named_buffers()}


def test_eval_batch_norm_leaves_its_statistics_alone() -> None:
    net, ref = _net().eval(), _net().eval()
    compiled = aotgrad.aot_module(net, _keep)
    x = torch.randn(2, 3, 8, 8)
    before = _versions(net)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), ref(x))
    assert _versions(net) == before
    for (name, b), (_, r) in zip(net.named_buffers(), ref.named_buffers(), strict=True):
        assert torch.equal(b, r), name


def test_a_graph_recorded_before_a_compiled_eval_call_still_backpropagates() -> None:
    net = _net().eval()
    compiled = aotgrad.aot_module(net, _keep)
    x = torch.randn(2, 3, 8, 8)
    loss = net(x).sum()  # NOTE: eager autograd saves the running statistics it read
    compiled(x)
    loss.backward()  # NOTE: raised "modified by an inplace operation" when they were copied
    assert all(p.grad is not None for p in net.parameters())


def test_eval_batch_norm_gradients_equal_eager() -> None:
    net, ref = _net().eval(), _net().eval()
    compiled = aotgrad.aot_module(net, _keep, _keep)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    compiled(x).square().sum().backward()
    ref(x_ref).square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_training_batch_norm_still_updates_its_statistics() -> None:
    net, ref = _net().train(), _net().train()
    compiled = aotgrad.aot_module(net, _keep, _keep)
    x = torch.randn(2, 3, 8, 8)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), ref(x))
    for (name, b), (_, r) in zip(net.named_buffers(), ref.named_buffers(), strict=True):
        torch.testing.assert_close(b, r, msg=name)
    assert any(v > 0 for v in _versions(net).values())
