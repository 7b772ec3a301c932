"""Real models under the `aot_eager` and `inductor` backends (random weights, no downloads):
inference and training steps compiled with `compiler.compile(..., fullgraph=True)` give
outputs, losses, every parameter's gradient and buffers equal to eager, and an optimizer step
between two calls causes no recompile.

Models: GPT-2 and BERT from `transformers` (2 layers, small sizes); an MLP, a conv net with
BatchNorm in train mode, an LSTM, a hand-written attention block and a model with in-place
ops and writes through views; timm's resnet18, mobilenetv3_small_100 and
vit_tiny_patch16_224 (marker `models`; timm only exists in `.venv-models`).

    .venv/bin/python -m pytest tests/e2e/test_backend_models.py -q              # fast subset
    .venv/bin/python -m pytest tests/e2e/test_backend_models.py -q -m slow      # slow ones
    .venv-models/bin/python -m pytest -m models tests/e2e/test_backend_models.py -q

Known compiler gaps stay as strict xfails pointing at .notes/TRIAGE_backends.md.
"""

from __future__ import annotations

import math

import pytest
import torch
from _backend_models_support import check_function, check_inference, check_training
from torch import nn

BACKENDS = ["aot_eager", "inductor"]
TRIAGE = "see .notes/TRIAGE_backends.md"

# Known compiler gaps: (test kind, model, backend) -> short cause. Each stays a strict xfail.
# Empty now: the gaps found (SDPA grads under inductor, LSTM capture, LSTM training) are fixed;
# the triage file keeps their repros.
XFAIL: dict[tuple[str, str, str], str] = {}

# Over ~10 s each on this 2-core machine with a cold inductor cache or under load (C++ builds
# of big graphs): -m slow. GPT-2 training and BERT inference under aot_eager (~8 s with the
# transformers import) stay in the default run as its real-model representatives. The timm
# models (7-100 s each) run only with -m models, which selects them whatever their marks.
SLOW: set[tuple[str, str, str]] = {
    ("inference", "gpt2", "aot_eager"), ("inference", "gpt2", "inductor"),
    ("training", "gpt2", "inductor"), ("inference", "bert", "inductor"),
    ("training", "bert", "aot_eager"), ("training", "bert", "inductor"),
}


def cases(kind: str, names: list[str]) -> list[object]:
    """(name, backend) parameters with the xfail and slow marks of the tables above."""
    out: list[object] = []
    for name in names:
        for backend in BACKENDS:
            marks = []
            reason = XFAIL.get((kind, name, backend))
            if reason is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=f"{reason}; {TRIAGE}"))
            if (kind, name, backend) in SLOW:
                marks.append(pytest.mark.slow)
            out.append(pytest.param(name, backend, marks=marks, id=f"{name}-{backend}"))
    return out
VOCAB = 96
SEQ = 8


# ----------------------------------------------------------------------------- transformers


def _transformers():  # type: ignore[no-untyped-def]
    return pytest.importorskip("transformers")


def _gpt2() -> nn.Module:
    tf = _transformers()
    config = tf.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=32,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )
    torch.manual_seed(0)
    return tf.GPT2LMHeadModel(config)  # type: ignore[no-any-return]


def _bert() -> nn.Module:
    tf = _transformers()
    config = tf.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=32, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0,
    )
    torch.manual_seed(0)
    return tf.BertForMaskedLM(config)


def _ids() -> torch.Tensor:
    return torch.randint(1, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


def _mask() -> torch.Tensor:
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0
    return mask


def _hf_loss(out):  # type: ignore[no-untyped-def]
    return out.loss


@pytest.mark.parametrize(("name", "backend"), cases("inference", ["gpt2"]))
def test_gpt2_inference(name: str, backend: str) -> None:
    check_inference(_gpt2(), (), backend, kwargs={"input_ids": _ids()})


@pytest.mark.parametrize(("name", "backend"), cases("training", ["gpt2"]))
def test_gpt2_training(name: str, backend: str) -> None:
    ids = _ids()
    check_training(_gpt2(), (), _hf_loss, backend,
                   kwargs={"input_ids": ids, "labels": ids})


@pytest.mark.parametrize(("name", "backend"), cases("inference", ["bert"]))
def test_bert_inference(name: str, backend: str) -> None:
    check_inference(_bert(), (), backend,
                    kwargs={"input_ids": _ids(), "attention_mask": _mask()})


@pytest.mark.parametrize(("name", "backend"), cases("training", ["bert"]))
def test_bert_training(name: str, backend: str) -> None:
    ids = _ids()
    labels = ids.clone()
    labels[:, ::2] = -100
    check_training(_bert(), (), _hf_loss, backend,
                   kwargs={"input_ids": ids, "attention_mask": _mask(), "labels": labels})


# ----------------------------------------------------------------------------- small models


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = nn.functional.max_pool2d(x, 2)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # NOTE: indexing rather than unpacking keeps this symbolic_trace-able (backend_only).
        res = self.lstm(x)
        out, h, c = res[0], res[1][0], res[1][1]
        return self.head(out[:, -1]) + h[-1].sum(-1, keepdim=True) + c[-1].mean(-1, keepdim=True)


class AttentionBlock(nn.Module):
    """A pre-norm causal self-attention block with an MLP, written out by hand."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        y = (attn @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.down(nn.functional.gelu(self.up(self.ln2(x)), approximate="tanh"))


class InPlaceViews(nn.Module):
    """In-place ops on activations and writes through views."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc1(x)
        y.add_(1.0)
        y[:, 0] = y[:, 1] * 2.0
        y.view(-1)[3] = 0.0
        y.transpose(0, 1).mul_(0.5)
        y = torch.relu_(y)
        z = self.fc2(y)
        z[:, 1:3] += y[:, :2]
        return z


def _mlp_data() -> tuple[torch.Tensor]:
    return (torch.randn(6, 16, generator=torch.Generator().manual_seed(3)),)


def _conv_data() -> tuple[torch.Tensor]:
    return (torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(4)),)


def _seq_data() -> tuple[torch.Tensor]:
    return (torch.randn(3, 7, 8, generator=torch.Generator().manual_seed(5)),)


def _attn_data() -> tuple[torch.Tensor]:
    return (torch.randn(2, SEQ, 32, generator=torch.Generator().manual_seed(6)),)


def _inplace_data() -> tuple[torch.Tensor]:
    return (torch.randn(5, 8, generator=torch.Generator().manual_seed(7)),)


def _seeded(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls()


def _mean_sq(out: torch.Tensor) -> torch.Tensor:
    return (out.float() ** 2).mean()


SMALL = {
    "mlp": (MLP, _mlp_data),
    "convbn": (ConvBN, _conv_data),
    "lstm": (LSTMNet, _seq_data),
    "attention": (AttentionBlock, _attn_data),
    "inplace_views": (InPlaceViews, _inplace_data),
}


@pytest.mark.parametrize(("name", "backend"), cases("inference", list(SMALL)))
def test_small_inference(name: str, backend: str) -> None:
    cls, data = SMALL[name]
    check_inference(_seeded(cls), data(), backend)


@pytest.mark.parametrize(("name", "backend"), cases("training", list(SMALL)))
def test_small_training(name: str, backend: str) -> None:
    cls, data = SMALL[name]
    check_training(_seeded(cls), data(), _mean_sq, backend)


@pytest.mark.parametrize(("name", "backend"), cases("inference_backend_only", ["lstm"]))
def test_lstm_backend_only_inference(name: str, backend: str) -> None:
    """nn.LSTM through the backend alone (symbolic_trace, no capture): see test_small_*."""
    check_inference(_seeded(LSTMNet), _seq_data(), backend, via="backend_only")


@pytest.mark.parametrize(("name", "backend"), cases("training_backend_only", ["lstm"]))
def test_lstm_backend_only_training(name: str, backend: str) -> None:
    check_training(_seeded(LSTMNet), _seq_data(), _mean_sq, backend, via="backend_only")


def mutate_inputs(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """In-place ops and writes through views on graph inputs (written back to the caller)."""
    x.add_(y)
    x[:, 0] = y[:, 1] * 3.0
    x.view(-1)[3] = 0.0
    y.transpose(0, 1).mul_(2.0)
    return x.sum(0) + y[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_views_on_inputs(backend: str) -> None:
    g = torch.Generator().manual_seed(8)
    check_function(mutate_inputs, (torch.randn(4, 4, generator=g),
                                   torch.randn(4, 4, generator=g)), backend)


# ----------------------------------------------------------------------------- timm


TIMM = {
    "resnet18": {"size": 64},
    "mobilenetv3_small_100": {"size": 64},
    # NOTE: img_size=64 keeps the ViT at 16 patches (plus the class token) on this machine.
    "vit_tiny_patch16_224": {"size": 64, "img_size": 64},
}


def _timm_model(name: str) -> nn.Module:
    timm = pytest.importorskip("timm")
    extra = {k: v for k, v in TIMM[name].items() if k != "size"}
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10, **extra)


def _images(name: str) -> tuple[torch.Tensor]:
    size = TIMM[name]["size"]
    return (torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(2)),)


def _ce(out: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(out, torch.tensor([1, 7]))


# NOTE: through 18-layer conv nets with BatchNorm (and the ViT's 12 blocks) the float32
# rounding of reordered sums compounds; outputs and grads get atol/rtol 1e-4 and 1e-3.
TIMM_OUT_TOL = {"rtol": 1e-4, "atol": 1e-4}
TIMM_GRAD_TOL = {"rtol": 1e-3, "atol": 1e-3}


@pytest.mark.models
@pytest.mark.parametrize(("name", "backend"), cases("inference", list(TIMM)))
def test_timm_inference(name: str, backend: str) -> None:
    check_inference(_timm_model(name), _images(name), backend, tol=TIMM_OUT_TOL)


@pytest.mark.models
@pytest.mark.parametrize(("name", "backend"), cases("training", list(TIMM)))
def test_timm_training(name: str, backend: str) -> None:
    check_training(_timm_model(name), _images(name), _ce, backend,
                   out_tol=TIMM_OUT_TOL, grad_tol=TIMM_GRAD_TOL)

