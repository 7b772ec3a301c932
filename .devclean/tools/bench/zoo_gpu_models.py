"""The GPU zoo's models at realistic sizes (issue 12): `python tools/bench/zoo.py --suite gpu`.

Each entry builds a model with random weights (seeded by the caller) and its example inputs,
on the CPU; the zoo moves both to the device and dtype it measures. Models come from the
current `transformers` and `timm` releases, called with default arguments (the cache left at
its default); a model whose library is missing is reported as skipped by the zoo.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Maker = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]


class MLPLarge(nn.Module):
    """Four 2048-wide layers with GELU and layer norm: matmuls with fused epilogues."""

    def __init__(self, d: int = 2048) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(4))
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + torch.nn.functional.gelu(layer(self.norm(x)))
        return x


class AttentionBlock(nn.Module):
    """A pre-norm transformer block: layer norm, QKV projection, SDPA, output projection, MLP."""

    def __init__(self, d: int = 768, heads: int = 12) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class _Field(nn.Module):
    """Calls a transformers model with default arguments and returns one output field."""

    def __init__(self, m: nn.Module, field: str, names: tuple[str, ...] = ("input_ids",)) -> None:
        super().__init__()
        self.m = m
        self.field = field
        self.names = names

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.m(**dict(zip(self.names, args)))
        return getattr(out, self.field)  # type: ignore[no-any-return]


def _gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=6, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return _Field(GPT2LMHeadModel(cfg), "logits"), (torch.randint(0, 50257, (8, 256)),)


def _bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=6, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return _Field(BertModel(cfg), "last_hidden_state"), (torch.randint(0, 30522, (8, 256)),)


def _t5() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(num_layers=4, num_decoder_layers=4, dropout_rate=0.0)
    ids = torch.randint(0, 32128, (8, 256))
    dec = torch.randint(0, 32128, (8, 64))
    model = T5ForConditionalGeneration(cfg)
    return _Field(model, "logits", ("input_ids", "decoder_input_ids")), (ids, dec)


def _timm(name: str, batch: int) -> Maker:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import timm

        return timm.create_model(name, pretrained=False), (torch.randn(batch, 3, 224, 224),)

    return make


MODELS_GPU: dict[str, Maker] = {
    "mlp_large": lambda: (MLPLarge(), (torch.randn(1024, 2048),)),
    "attention_block": lambda: (AttentionBlock(), (torch.randn(8, 512, 768),)),
    "resnet50": _timm("resnet50", 32),
    "mobilenetv3": _timm("mobilenetv3_large_100", 32),
    "vit_small": _timm("vit_small_patch16_224", 32),
    "gpt2": _gpt2,
    "bert": _bert,
    "t5": _t5,
}
