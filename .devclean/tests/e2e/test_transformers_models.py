"""GPT-2, BERT, T5 and Llama from `transformers` (2 layers, small sizes, random weights from a
config; no downloads), called with their default arguments (GPT-2 and T5 build and return their
key/value cache): inference and training steps compile with fullgraph=True and the eager
backend into exactly one graph, with outputs (cache tensors included) and gradients equal to
eager, and capture at least 90% of the ops torch.compile captures, in no more graphs."""

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


def _t5(dropout: float = 0.0) -> torch.nn.Module:
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, dropout_rate=dropout, decoder_start_token_id=0, pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.T5ForConditionalGeneration(config)


def _decoder_ids() -> torch.Tensor:
    return torch.randint(1, VOCAB, (2, 5), generator=torch.Generator().manual_seed(2))


# NOTE: T5 with its defaults: use_cache=True builds an EncoderDecoderCache whose
# DynamicCaches deep-copy the config (`get_text_config`) and is returned in the output.
@pytest.mark.parametrize("via", VIA)
def test_t5_inference(via):
    check_inference(_t5(), {"input_ids": _ids(), "decoder_input_ids": _decoder_ids()}, via)


@pytest.mark.parametrize("via", VIA)
def test_t5_training_step(via):
    labels = _decoder_ids()
    check_training_step(_t5(), {"input_ids": _ids(), "labels": labels}, _loss, via)


def _llama() -> torch.nn.Module:
    # NOTE: grouped-query attention (4 query heads, 2 key/value heads): transformers' SDPA path
    # reads os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] on every call (unset: a guarded KeyError)
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=32,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


@pytest.mark.parametrize("via", VIA)
def test_llama_inference(via):
    check_inference(_llama(), {"input_ids": _ids(), "attention_mask": _mask()}, via)


@pytest.mark.parametrize("via", VIA)
def test_llama_training_step(via):
    ids = _ids()
    check_training_step(_llama(), {"input_ids": ids, "labels": ids}, _loss, via)


def _ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


MODELS = {
    "gpt2": (_gpt2, lambda: {"input_ids": _ids()}, lambda: {"input_ids": _ids(), "labels": _ids()}),
    "bert": (_bert, lambda: {"input_ids": _ids(), "attention_mask": _mask()},
             lambda: {"input_ids": _ids(), "attention_mask": _mask(), "labels": _ids()}),
    "t5": (_t5, lambda: {"input_ids": _ids(), "decoder_input_ids": _decoder_ids()},
           lambda: {"input_ids": _ids(), "labels": _decoder_ids()}),
    "llama": (_llama, lambda: {"input_ids": _ids()},
              lambda: {"input_ids": _ids(), "labels": _ids()}),
}


def _torch_compile_graphs(model: torch.nn.Module, kwargs, training: bool,
                          ) -> list[torch.fx.GraphModule]:
    theirs: list[torch.fx.GraphModule] = []

    def count(gm, example_inputs):
        theirs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=count)
        if training:
            model.train()
            compiled(**kwargs).loss.backward()
        else:
            model.eval()
            with torch.no_grad():
                compiled(**kwargs)
    finally:
        torch._dynamo.reset()
    return theirs


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_captures_what_torch_compile_captures(name, mode):
    """Called as users call them (default arguments: GPT-2 and T5 build and return their
    key/value cache): no more graphs than torch.compile and at least 90% of its ops, counted
    in this run; outputs (the cache's tensors included) and gradients equal eager's."""
    make, inference_kwargs, training_kwargs = MODELS[name]
    if mode == "inference":
        kwargs = inference_kwargs()
        ours = check_inference(make(), kwargs, "capture", calls=1)
    else:
        kwargs = training_kwargs()
        ours = check_training_step(make(), kwargs, _loss, "capture", steps=1)
    theirs = _torch_compile_graphs(make(), kwargs, mode == "training")
    mine, total = sum(map(_ops, ours.graphs)), sum(map(_ops, theirs))
    print(f"{name} {mode}: capture {len(ours.graphs)} graph(s), {mine} ops; "
          f"torch.compile {len(theirs)} graph(s), {total} ops")
    assert len(ours.graphs) <= len(theirs)
    assert mine >= 0.9 * total, f"{mine} ops captured, torch.compile {total}"
