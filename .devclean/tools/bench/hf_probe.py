"""Differential probe of transformers models (26 families) as users call them: tiny configurations,
default arguments (caches on, losses from `labels`), three calls whose last changes the
sizes (so capture's dynamic sizes are exercised), inference and training, ours against
eager: outputs (caches included) and every parameter's gradient. Models are built from
configurations (no download). Usage:

    python tools/bench/hf_probe.py [MODEL ...]      (default: all)

Prints one line per model and mode: `ok`, or `FAIL` with the error. In the `infer` and
`train` modes dropout is off (eval mode) so that eager and compiled runs draw no random
numbers and are compared exactly. The `dropout` mode trains in train mode, as users do
(dropout on): the masks differ from eager's, so it checks that every call compiles and runs,
that the loss is finite and near eager's, and that the same parameters get finite
gradients. (It found an embedding + dropout + layer-norm kernel that did not compile.)
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator
from typing import Any

import compiler
import torch
import transformers as T

_LM: dict[str, Any] = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}

_ENC: dict[str, Any] = {
    "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "max_position_embeddings": 128}

MODELS: dict[str, tuple[Callable[[], torch.nn.Module], str]] = {
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**_LM)), "lm"),
    "mistral": (lambda: T.MistralForCausalLM(T.MistralConfig(**_LM, sliding_window=16)), "lm"),
    "qwen2": (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**_LM)), "lm"),
    "gemma": (lambda: T.GemmaForCausalLM(T.GemmaConfig(**{**_LM, "num_key_value_heads": 1},
                                                       head_dim=16)), "lm"),
    "phi3": (lambda: T.Phi3ForCausalLM(T.Phi3Config(**_LM, pad_token_id=0)), "lm"),
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=256, n_positions=128,
                                                     n_embd=64, n_layer=2, n_head=4)), "lm"),
    "bert_cls": (lambda: T.BertForSequenceClassification(T.BertConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=128)), "cls"),
    "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(
        vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0)), "s2s"),
    "bart": (lambda: T.BartForConditionalGeneration(T.BartConfig(
        vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_position_embeddings=128)), "s2s"),
    "distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(
        vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
        max_position_embeddings=128)), "enc"),
    "vit": (lambda: T.ViTForImageClassification(T.ViTConfig(
        image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128)), "img"),
    # NOTE: more families (encoders, decoders, vision), the same checks
  "roberta": (lambda: T.RobertaForMaskedLM(T.RobertaConfig(**_ENC, pad_token_id=1)), "lm"),
  "albert": (lambda: T.AlbertForMaskedLM(T.AlbertConfig(**_ENC, embedding_size=32)), "lm"),
  "electra": (lambda: T.ElectraForSequenceClassification(T.ElectraConfig(**_ENC, embedding_size=32)), "cls"),
  "gpt_neo": (lambda: T.GPTNeoForCausalLM(T.GPTNeoConfig(vocab_size=256, hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], max_position_embeddings=128, window_size=8)), "lm"),
  "opt": (lambda: T.OPTForCausalLM(T.OPTConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, max_position_embeddings=128, word_embed_proj_dim=64)), "lm"),
  "bloom": (lambda: T.BloomForCausalLM(T.BloomConfig(vocab_size=256, hidden_size=64, n_layer=2, n_head=4)), "lm"),
  "falcon": (lambda: T.FalconForCausalLM(T.FalconConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)), "lm"),
  "deberta_v2": (lambda: T.DebertaV2ForSequenceClassification(T.DebertaV2Config(**_ENC)), "cls"),
  "mobilebert": (lambda: T.MobileBertForSequenceClassification(T.MobileBertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32, max_position_embeddings=128)), "cls"),
  "convnext": (lambda: T.ConvNextForImageClassification(T.ConvNextConfig(num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=2, image_size=32)), "img"),
  "resnet": (lambda: T.ResNetForImageClassification(T.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=2)), "img"),
  "swin": (lambda: T.SwinForImageClassification(T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=2)), "img"),
  "deit": (lambda: T.DeiTForImageClassification(T.DeiTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, num_labels=2)), "img"),
  "mobilevit": (lambda: T.MobileViTForImageClassification(T.MobileViTConfig(image_size=32, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48], num_labels=2)), "img"),
  "segformer": (lambda: T.SegformerForImageClassification(T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=2)), "img"),
}


def inputs(kind: str, b: int, s: int) -> dict[str, torch.Tensor]:
    """Keyword inputs of a `kind` model for batch `b` and sequence length `s`."""
    g = torch.Generator().manual_seed(b * 100 + s)
    ids = torch.randint(1, 256, (b, s), generator=g)
    if kind == "img":
        return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g),
                "labels": torch.randint(0, 2, (b,), generator=g)}
    if kind == "s2s":
        return {"input_ids": ids, "labels": torch.randint(1, 256, (b, s // 2), generator=g)}
    if kind == "cls":
        return {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.long),
                "labels": torch.randint(0, 2, (b,), generator=g)}
    if kind == "enc":
        return {"input_ids": ids}
    return {"input_ids": ids, "labels": ids}


def flat(out: Any) -> list[torch.Tensor]:
    """The tensors of a model output (nested tuples, ModelOutputs and caches)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    if hasattr(out, "to_tuple"):
        return flat(out.to_tuple())
    if isinstance(out, dict):
        return flat(tuple(out.values()))
    try:
        return [t for layer in out for t in flat(layer)]  # NOTE: a Cache iterates layers
    except TypeError:
        return []


def _loss(out: Any) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    return flat(out)[0].float().square().mean()


def _close(got: Any, want: Any, what: str) -> None:
    g, w = flat(got), flat(want)
    assert len(g) == len(w), f"{what}: {len(g)} tensors, eager {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        torch.testing.assert_close(a, b, atol=2e-4, rtol=2e-3,
                                   msg=lambda m, i=i: f"{what}[{i}]: {m}")


def _calls(name: str, dropout: bool) -> Iterator[tuple[torch.nn.Module, torch.nn.Module,
                                                      Any, dict[str, torch.Tensor], str]]:
    """Model `name` (eval mode, or train mode with `dropout`), an eager twin, the compiled
    model and the inputs of each of three calls (the last with other sizes), gradients
    cleared before each; the compile cache is reset at the end."""
    make, kind = MODELS[name]
    torch.manual_seed(0)
    model = make().train() if dropout else make().eval()
    ref = copy.deepcopy(model)
    compiled = compiler.compile(model, backend="inductor")
    for b, s in ((2, 16), (2, 16), (3, 24)):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        yield model, ref, compiled, inputs(kind, b, s), f"{b}x{s}"
    compiler.reset()


def probe(name: str, train: bool) -> None:
    """Three calls of model `name` compiled and eager; raises on the first difference."""
    for model, ref, compiled, kw, what in _calls(name, dropout=False):
        if not train:
            with torch.no_grad():
                _close(compiled(**kw), ref(**kw), what)
            continue
        got = compiled(**kw)
        _loss(got).backward()
        want = ref(**kw)
        _loss(want).backward()
        _close(got, want, what)
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None, f"{n}: a gradient where eager has none"
                continue
            assert p.grad is not None, f"{n}: no gradient"
            torch.testing.assert_close(p.grad, q.grad, atol=2e-4, rtol=2e-3,
                                       msg=lambda m, n=n: f"grad {n}: {m}")


def probe_dropout(name: str) -> None:
    """Three training calls of model `name` in train mode (dropout on), compiled and eager."""
    for model, ref, compiled, kw, what in _calls(name, dropout=True):
        got = _loss(compiled(**kw))
        got.backward()
        want = _loss(ref(**kw))
        want.backward()
        assert torch.isfinite(got), f"{what}: loss {got.item()}"
        assert abs(got.item() - want.item()) <= 0.25 * abs(want.item()) + 0.1, (
            f"{what}: loss {got.item():.4f}, eager {want.item():.4f}")
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            assert (p.grad is None) == (q.grad is None), f"{n}: gradient presence differs"
            assert p.grad is None or torch.isfinite(p.grad).all(), f"{n}: gradient not finite"


def main(names: list[str]) -> int:
    failed = 0
    for name in names or list(MODELS):
        for mode in ("infer", "train", "dropout"):
            try:
                if mode == "dropout":
                    probe_dropout(name)
                else:
                    probe(name, mode == "train")
                print(f"{name:12s} {mode} ok", flush=True)
            except Exception as e:  # noqa: BLE001  # NOTE: a probe reports every failure
                failed += 1
                print(f"{name:12s} {mode} FAIL {type(e).__name__}: {str(e)[:300]}",
                      flush=True)
                compiler.reset()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
