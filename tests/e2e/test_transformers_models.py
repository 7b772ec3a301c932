"""GPT-2 and BERT from `transformers` (2 layers, small sizes, random weights from a config; no
downloads): inference and training steps compile with fullgraph=True and the eager backend into
exactly one graph, with outputs and gradients equal to eager."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from _harness import check_inference, check_training_step

VOCAB = 96
SEQ = 8


def _gpt2(dropout: float = 0.0) -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=32,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
        bos_token_id=0, eos_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def _bert(dropout: float = 0.0) -> torch.nn.Module:
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=32, type_vocab_size=2,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(config)


def _ids() -> torch.Tensor:
    return torch.randint(1, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


def _mask() -> torch.Tensor:
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0
    return mask


def _loss(out):
    return out.loss


# NOTE: each model takes seconds to capture; the default run checks each model once through
# capture, the `slow` run also through compiler.compile and the extra variants.
VIA = ["capture", pytest.param("compiler", marks=pytest.mark.slow)]


@pytest.mark.parametrize("via", VIA)
def test_gpt2_inference(via):
    check_inference(_gpt2(), {"input_ids": _ids()}, via)


@pytest.mark.parametrize("via", VIA)
def test_gpt2_training_step(via):
    ids = _ids()
    check_training_step(_gpt2(), {"input_ids": ids, "labels": ids}, _loss, via)


@pytest.mark.slow
def test_gpt2_training_step_with_dropout():
    ids = _ids()
    check_training_step(_gpt2(dropout=0.1), {"input_ids": ids, "labels": ids}, _loss, "capture")


@pytest.mark.parametrize("via", VIA)
def test_bert_inference(via):
    check_inference(_bert(), {"input_ids": _ids(), "attention_mask": _mask()}, via)


@pytest.mark.parametrize("via", VIA)
def test_bert_training_step(via):
    ids = _ids()
    labels = ids.clone()
    labels[:, ::2] = -100
    check_training_step(_bert(), {"input_ids": ids, "attention_mask": _mask(),
                                  "labels": labels}, _loss, via)


@pytest.mark.slow
def test_bert_inference_with_token_type_ids():
    types = torch.zeros(2, SEQ, dtype=torch.long)
    types[:, SEQ // 2:] = 1
    check_inference(_bert(), {"input_ids": _ids(), "attention_mask": _mask(),
                              "token_type_ids": types}, "capture")
