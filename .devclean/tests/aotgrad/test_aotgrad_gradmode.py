"""Ops whose outputs depend on grad mode: the CPU LSTM/GRU kernel (`mkldnn_rnn_layer`)
returns the workspace its backward needs only with grad mode on, and the training forward runs
inside `autograd.Function.forward` (grad mode off). Training steps of LSTM/GRU modules under
every partitioner equal eager; inference still works; the fast path and grad mode agree."""

from __future__ import annotations

import copy
from typing import Any

import aotgrad
import pytest
import torch
from _aotgrad_checks import assert_no_mutable_ops
from aotgrad import config as aot_config
from aotgrad.backend import run_graph_as_is
from aotgrad.gradmode import GRAD_MODE_OPS, needs_grad_mode
from torch import fx, nn

PARTITIONS = [("default", 1.0), ("min_cut", 1.0), ("memory_budget", 0.0),
              ("memory_budget", 0.5)]


def _rnn(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "lstm":
        return nn.LSTM(16, 32, num_layers=2, batch_first=True)
    return nn.GRU(16, 24, batch_first=True)


def _step(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    out, _ = model(x)
    loss = (out * out).sum()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return loss.detach(), grads


CASES = [("lstm", partition, budget, decomps) for partition, budget in PARTITIONS
         for decomps in ("none", "core")]
# NOTE: the GRU (no grad-mode op on CPU; unrolled per step, slower to trace): two cases.
CASES += [("gru", "default", 1.0, "none"), ("gru", "memory_budget", 0.0, "core")]


@pytest.mark.parametrize("kind,partition,budget,decompositions", CASES)
def test_rnn_training_matches_eager(kind: str, partition: str, budget: float,
                                    decompositions: str) -> None:
    eager = _rnn(kind)
    model = copy.deepcopy(eager)
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return run_graph_as_is(gm, example_inputs)

    with aot_config.patch(activation_memory_budget=budget):
        compiled = aotgrad.aot_module(model, keep, partition_fn=partition,
                                      decompositions=decompositions)
        x = torch.randn(3, 6, 16)
        for _ in range(2):  # the second call takes the cached fast path
            model.zero_grad()
            eager.zero_grad()
            out, _ = compiled(x)
            loss = (out * out).sum()
            loss.backward()
            got = [p.grad.clone() for p in model.parameters()]
            want_loss, want = _step(eager, x)
            torch.testing.assert_close(loss.detach(), want_loss)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    for gm in graphs:
        assert_no_mutable_ops(gm)
    if kind == "lstm" and decompositions == "none" and GRAD_MODE_OPS:
        # NOTE: the CPU LSTM kernel stays in the forward graph and is never recomputed
        # (the GRU runs other ops on CPU).
        forward, *backward = graphs
        assert needs_grad_mode(forward)
        assert not any(needs_grad_mode(gm) for gm in backward)


def test_rnn_inference_under_no_grad_matches_eager() -> None:
    eager = _rnn("lstm")
    model = copy.deepcopy(eager)
    compiled = aotgrad.aot_module(model, run_graph_as_is, decompositions="none")
    x = torch.randn(3, 7, 16)
    with torch.no_grad():
        out, (h, c) = compiled(x)
        want, (wh, wc) = eager(x)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(h, wh)
    torch.testing.assert_close(c, wc)


def test_rnn_input_gradient_matches_eager() -> None:
    eager = _rnn("lstm")
    model = copy.deepcopy(eager)
    compiled = aotgrad.aot_module(model, run_graph_as_is, decompositions="none")
    x = torch.randn(2, 5, 16, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, (h, _) = compiled(x)
    (out.sum() + h.sum()).backward()
    want, (wh, _) = eager(x2)
    (want.sum() + wh.sum()).backward()
    assert x.grad is not None and x2.grad is not None
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
