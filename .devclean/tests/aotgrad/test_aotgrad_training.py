"""Training steps under aot_eager: symbolic_trace-able models (an MLP, a conv net with
BatchNorm in train mode, a transformer block in plain torch ops); losses, gradients and
BatchNorm running statistics equal eager within float32 tolerance."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import aotgrad
import pytest
import torch
from torch import fx, nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.ReLU(),
                                    nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.ones_like(scores[0, 0], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = self.drop(torch.softmax(scores, dim=-1))
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


MODELS: list[tuple[Callable[[], nn.Module], Callable[[], torch.Tensor]]] = [
    (MLP, lambda: torch.randn(6, 8)),
    (ConvNet, lambda: torch.randn(4, 3, 9, 9)),
    (TransformerBlock, lambda: torch.randn(2, 5, 16)),
]


def _train(model: nn.Module, run: Callable[[torch.Tensor], torch.Tensor],
           inputs: list[torch.Tensor]) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    history = []
    for x in inputs:
        optimizer.zero_grad()
        loss = run(x).pow(2).mean()
        loss.backward()
        history.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        optimizer.step()
    return history


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
@pytest.mark.parametrize("make_model, make_input", MODELS,
                         ids=[m[0].__name__ for m in MODELS])
def test_training_steps_match_eager(make_model: Callable[[], nn.Module],
                                    make_input: Callable[[], torch.Tensor],
                                    partitioner: str) -> None:
    torch.manual_seed(0)
    eager = make_model()
    ours = copy.deepcopy(eager)
    gm = fx.symbolic_trace(ours)
    inputs = [make_input() for _ in range(3)]
    from aotgrad.backend import run_graph_as_is

    backend = aotgrad.make_backend(run_graph_as_is, partition_fn=partitioner)
    compiled = backend(gm, [inputs[0]])
    expected = _train(eager, eager, inputs)
    actual = _train(gm, compiled, inputs)
    for (loss_a, grads_a), (loss_e, grads_e) in zip(actual, expected):
        torch.testing.assert_close(loss_a, loss_e, rtol=1e-4, atol=1e-5)
        for ga, ge in zip(grads_a, grads_e):
            torch.testing.assert_close(ga, ge, rtol=1e-4, atol=1e-5)
    for a, e in zip(gm.buffers(), eager.buffers()):
        torch.testing.assert_close(a, e)  # BatchNorm running stats, num_batches_tracked
    assert compiled.saved_bytes.calls == 3
    eager.eval()
    gm.eval()
    with torch.no_grad():
        x = make_input()
        torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)


def test_aot_module_training_with_batchnorm() -> None:
    torch.manual_seed(0)
    eager = ConvNet()
    ours = copy.deepcopy(eager)
    from aotgrad.backend import run_graph_as_is

    compiled = aotgrad.aot_module(ours, run_graph_as_is)
    inputs = [torch.randn(4, 3, 9, 9) for _ in range(2)]
    expected = _train(eager, eager, inputs)
    actual = _train(ours, compiled, inputs)
    for (loss_a, grads_a), (loss_e, grads_e) in zip(actual, expected):
        torch.testing.assert_close(loss_a, loss_e, rtol=1e-4, atol=1e-5)
        for ga, ge in zip(grads_a, grads_e):
            torch.testing.assert_close(ga, ge, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours.bn1.running_var, eager.bn1.running_var)
    assert int(ours.bn2.num_batches_tracked) == 2


def test_sdpa_gradients_with_core_decompositions() -> None:
    from aotgrad.backend import run_graph_as_is

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    compiled = aotgrad.aot_function(fn, run_graph_as_is, decompositions="core")
    args = [torch.randn(2, 2, 8, 4, requires_grad=True) for _ in range(3)]
    weight = torch.randn(2, 2, 8, 4)
    got = torch.autograd.grad((compiled(*args) * weight).sum(), args)
    want = torch.autograd.grad((fn(*args) * weight).sum(), args)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(ids)))


def test_tied_weights_get_both_gradient_contributions() -> None:
    from aotgrad.backend import run_graph_as_is

    torch.manual_seed(0)
    eager = TiedLM()
    ours = copy.deepcopy(eager)
    ids = torch.randint(0, 10, (3, 4))
    inputs = [ids, ids]
    expected = _train(eager, lambda x: eager(x), inputs)
    compiled = aotgrad.aot_module(ours, run_graph_as_is)
    actual = _train(ours, compiled, inputs)
    for (loss_a, grads_a), (loss_e, grads_e) in zip(actual, expected):
        torch.testing.assert_close(loss_a, loss_e)
        for ga, ge in zip(grads_a, grads_e):
            torch.testing.assert_close(ga, ge)


@pytest.mark.slow
@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_gpt2_training_step(partitioner: str) -> None:
    transformers = pytest.importorskip("transformers")
    from aotgrad.backend import run_graph_as_is

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=50,
                                     n_positions=16, attn_pdrop=0.0, resid_pdrop=0.0,
                                     embd_pdrop=0.0, use_cache=False)
    eager = transformers.GPT2LMHeadModel(config)
    ours = copy.deepcopy(eager)
    ids = torch.randint(0, 50, (2, 8))
    compiled = aotgrad.aot_module(ours, run_graph_as_is, partition_fn=partitioner,
                                  decompositions="core")
    loss = compiled(input_ids=ids, labels=ids)["loss"]
    want = eager(input_ids=ids, labels=ids).loss
    torch.testing.assert_close(loss, want)
    loss.backward()
    want.backward()
    for (name, p), q in zip(ours.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
