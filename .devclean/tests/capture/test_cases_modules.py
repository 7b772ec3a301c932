"""Differential cases: nn.Module capture (submodules, containers, training flag, hooks) and the
module wrapper (attribute access, parameters(), state_dict(), train()/eval(), to(), optimizers)."""

from __future__ import annotations

import copy

import capture
import pytest
import torch
import torch.nn.functional as F
from _differential import CountingBackend, assert_same, check, check_module, t
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Stack(nn.Module):
    def __init__(self, n: int = 3, d: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = x + layer(x) * (i + 1)
        return self.norm(x)


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(8, 3), "reg": nn.Linear(8, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["both"] = self.heads["cls"](x).sum(-1, keepdim=True) + self.heads["reg"](x)
        return out


class Attention(nn.Module):
    def __init__(self, d: int = 8, n_heads: int = 2) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, n, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.n_heads) ** 0.5)
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 2 * d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TrainingBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if self.training:
            return y * 2
        return y - 1


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0, 4.0]))
        self.w = nn.Parameter(torch.linspace(-1, 1, 4))

    def forward(self, x):
        return x * self.scale + self.w


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(self.emb(idx))


class FunctionalParams(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 3))
        self.bias = nn.Parameter(torch.zeros(5))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias).relu()


class HelperMethod(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 0.5

    def _project(self, x, times):
        for _ in range(times):
            x = self.fc(x) * self.scale
        return x

    def forward(self, x, times=2):
        return self._project(x, times)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8),
            nn.Hardswish(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.features(x))))


class GetattrLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def forward(self, x):
        for i in range(3):
            x = getattr(self, f"layer{i}")(x).tanh()
        return x


class Children(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.ReLU()
        self.c = nn.Identity()

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x


class DictOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 8)
        self.ln = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.1)

    def forward(self, idx, scale=1.0):
        h = self.drop(self.ln(self.emb(idx))) * scale
        return {"hidden": h, "pooled": h.mean(1)}


class MHA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        out, weights = self.attn(x, x, x, need_weights=True)
        return out, weights


def _eval(m: nn.Module) -> nn.Module:
    return m.eval()


MODULE_CASES = [
    pytest.param(lambda: nn.Linear(4, 3), (t(2, 4),), True, id="linear"),
    pytest.param(lambda: MLP(), (t(3, 8, requires_grad=True),), True, id="mlp_grad"),
    pytest.param(lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)),
                 (t(3, 8),), True, id="sequential"),
    pytest.param(lambda: Stack(), (t(2, 8),), True, id="module_list_loop"),
    pytest.param(lambda: Heads(), (t(2, 8),), True, id="module_dict"),
    pytest.param(lambda: Block(), (t(2, 5, 8),), True, id="transformer_block"),
    pytest.param(lambda: WithBuffer(), (t(4),), True, id="buffer_and_parameter"),
    pytest.param(lambda: Tied(), (torch.tensor([[1, 2, 3]]),), True, id="tied_weights"),
    pytest.param(lambda: FunctionalParams(), (t(2, 3),), True, id="functional_on_parameters"),
    pytest.param(lambda: HelperMethod(), (t(2, 4),), True, id="helper_method"),
    pytest.param(lambda: ConvNet(), (t(2, 3, 8, 8),), True, id="convnet_train_batchnorm"),
    pytest.param(lambda: _eval(ConvNet()), (t(2, 3, 8, 8),), True, id="convnet_eval"),
    pytest.param(lambda: GetattrLayers(), (t(2, 4),), True, id="getattr_layers"),
    pytest.param(lambda: Children(), (t(2, 4),), True, id="children_iteration"),
    pytest.param(lambda: _eval(DictOutput()), (torch.tensor([[1, 5, 7]]),), True,
                 id="dict_output_eval_dropout"),
    pytest.param(lambda: DictOutput(), (torch.tensor([[1, 5, 7]]),), True,
                 id="dict_output_train_dropout_seeded"),
    pytest.param(lambda: TrainingBranch(), (t(2, 4),), True, id="training_branch_train"),
    pytest.param(lambda: _eval(TrainingBranch()), (t(2, 4),), True, id="training_branch_eval"),
    pytest.param(lambda: _eval(MHA()), (t(2, 3, 8),), False, id="multihead_attention_eval"),
]


@pytest.mark.parametrize(("make", "args", "grad"), MODULE_CASES)
def test_module(make, args, grad):
    torch.manual_seed(0)
    check_module(make(), *args, grad=grad)


def test_module_kwargs_in_forward():
    torch.manual_seed(0)
    m = _eval(DictOutput())
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(copy.deepcopy(m), backend=backend, fullgraph=True)
    idx = torch.tensor([[3, 4]])
    assert_same(compiled(idx, scale=3.0), m(idx, scale=3.0))
    assert backend.frame_count == 1


def test_parameters_are_graph_inputs_not_constants():
    torch.manual_seed(0)
    m = MLP()
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(m, backend=backend, fullgraph=True)
    compiled(t(2, 8))
    gm = backend.graphs[0]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1 + len(list(m.parameters()))
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]
    param_ids = {id(p) for p in m.parameters()}
    assert param_ids <= {id(v) for v in backend.example_inputs[0]}


def test_wrapper_forwards_attributes_parameters_state_dict():
    m = MLP()
    capture.reset()
    compiled = capture.optimize(m, backend=CountingBackend(), fullgraph=True)
    assert compiled.fc1 is m.fc1
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in m.parameters()]
    assert list(compiled.state_dict()) == list(m.state_dict())
    assert dict(compiled.named_modules())["fc2"] is m.fc2


def test_wrapper_train_eval_forwarded_and_respected():
    torch.manual_seed(0)
    m = TrainingBranch()
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(m, backend=backend, fullgraph=True)
    x = t(2, 4)
    assert_same(compiled(x), m(x))
    compiled.eval()
    assert m.training is False
    assert_same(compiled(x), m(x))
    compiled.train()
    assert m.training is True
    assert_same(compiled(x), m(x))
    assert backend.frame_count == 2, "one graph per value of the training flag"


def test_wrapper_to_dtype():
    torch.manual_seed(0)
    m = MLP()
    eager = copy.deepcopy(m).to(torch.float64)
    capture.reset()
    compiled = capture.optimize(m, backend=CountingBackend(), fullgraph=True)
    compiled(t(2, 8))
    result = compiled.to(torch.float64)
    assert m.fc1.weight.dtype == torch.float64
    x = t(2, 8).double()
    assert_same((result if result is not None else compiled)(x), eager(x))


def test_optimizer_step_needs_no_recompile():
    torch.manual_seed(0)
    eager = MLP()
    twin = copy.deepcopy(eager)
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(twin, backend=backend, fullgraph=True)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = torch.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x = t(4, 8, seed=step)
        for model, opt in ((eager, opt_e), (compiled, opt_c)):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        assert_same(compiled(x), eager(x), f"step {step}")
    assert backend.frame_count == 1


def test_forward_hooks_respected():
    torch.manual_seed(0)
    m = MLP()
    calls = []
    m.fc1.register_forward_hook(lambda mod, inp, out: out * 0.5)
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    m.register_forward_hook(lambda mod, inp, out: calls.append(1))
    eager = copy.deepcopy(m)
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(m, backend=backend, fullgraph=True)
    x = t(2, 8)
    calls.clear()
    expected = eager(x)
    n_eager = len(calls)
    calls.clear()
    assert_same(compiled(x), expected)
    assert len(calls) == n_eager == 1
    assert backend.frame_count >= 1, "the hooked module was not captured at all"


def test_module_as_function_argument():
    torch.manual_seed(0)
    m = MLP()

    def apply(model, x):
        return model(x).sum(-1)

    check(apply, m, t(3, 8))


def test_compiled_method_of_module():
    torch.manual_seed(0)
    m = HelperMethod()
    backend = CountingBackend()
    capture.reset()
    compiled = capture.optimize(m._project, backend=backend, fullgraph=True)
    x = t(2, 4)
    assert_same(compiled(x, 3), m._project(x, 3))
    assert backend.frame_count == 1
