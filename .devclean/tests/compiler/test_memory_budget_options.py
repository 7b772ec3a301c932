"""The activation memory budget as a compile option (issue 16): `compiler.compile(...,
options=...)` and `compiler.config` on aot_eager and inductor, saved bytes measured with
saved-tensor hooks (each storage once, parameters and inputs excluded) against eager
autograd and torch.compile; gradients against eager; option errors; the Pareto SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import compiler
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

BACKENDS = ["aot_eager", "inductor"]


@contextmanager
def _count_saved(exclude: Sequence[torch.Tensor]) -> Iterator[list[int]]:
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}
    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, FakeTensor):  # NOTE: a first call traces with fake tensors
            storage = t.untyped_storage()
            if storage.data_ptr() not in excluded:
                seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield total
    total[0] = sum(seen.values())


def _step(fn: Callable[..., torch.Tensor], model: torch.nn.Module,
          *inputs: torch.Tensor) -> tuple[list[torch.Tensor], int]:
    """(gradients, saved activation bytes) of one training step."""
    params = list(model.parameters())
    for p in params:
        p.grad = None
    with _count_saved([*params, *inputs]) as saved:
        loss = fn(*inputs)
    loss.backward()
    return [p.grad.clone() for p in params if p.grad is not None], saved[0]


def _assert_same_grads(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def _mlp() -> tuple[torch.nn.Module, Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 8))

    def loss(x: torch.Tensor) -> torch.Tensor:
        return model(x).pow(2).mean()

    return model, loss, torch.randn(32, 16)


class _Attention(torch.nn.Module):
    """One SDPA block (dropout_p 0): the attention output and its logsumexp are
    recomputable, so budget 0.0 saves nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.out = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(att.transpose(1, 2).reshape(2, 16, 32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_budget_option_trades_saved_bytes_for_recompute(backend: str) -> None:
    model, loss, x = _mlp()
    want, eager_bytes = _step(loss, model, x)
    saved: dict[float, int] = {}
    for budget in (1.0, 0.5, 0.0):
        compiled = compiler.compile(loss, backend=backend,
                                    options={"activation_memory_budget": budget})
        _step(compiled, model, x)  # compiles
        got, saved[budget] = _step(compiled, model, x)
        _assert_same_grads(got, want)
    assert 0 < saved[1.0] <= eager_bytes
    assert saved[0.5] <= 0.5 * saved[1.0]
    assert saved[0.0] == 0  # everything is recomputable from the input and the weights


def test_budget_from_the_global_config_reaches_aot_eager() -> None:
    model, loss, x = _mlp()
    want, _ = _step(loss, model, x)
    with compiler.config.patch(activation_memory_budget=0.0):
        compiled = compiler.compile(loss, backend="aot_eager")
        _step(compiled, model, x)
        got, saved = _step(compiled, model, x)
    _assert_same_grads(got, want)
    assert saved == 0
    plain = compiler.compile(lambda x: loss(x) * 1.0, backend="aot_eager")
    _step(plain, model, x)
    assert _step(plain, model, x)[1] > 0  # the patch did not leak


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_with_sdpa_is_recomputed_at_budget_zero(backend: str) -> None:
    torch.manual_seed(0)
    model = _Attention()
    x = torch.randn(2, 16, 32)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return model(x).pow(2).sum()

    want, _ = _step(loss, model, x)
    compiled = compiler.compile(loss, backend=backend, options={"activation_memory_budget": 0.0})
    _step(compiled, model, x)
    got, saved = _step(compiled, model, x)
    _assert_same_grads(got, want)
    assert saved == 0


def test_budget_one_saves_no_more_than_eager_or_torch_compile() -> None:
    """A GPT-2 step (SDPA attention, cross-entropy over the vocabulary) on aot_eager:
    budget 1.0 saves at most eager's bytes and torch.compile's (within 2%); budget 0.0
    saves nothing; gradients equal eager's."""
    transformers = pytest.importorskip("transformers")
    import torch._dynamo
    import torch._functorch.config as functorch_config

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=4, n_positions=16,
                                     vocab_size=64, bos_token_id=0, eos_token_id=0,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config._attn_implementation = "sdpa"
    model = transformers.GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))

    def loss(ids: torch.Tensor) -> torch.Tensor:
        return model(ids, labels=ids, use_cache=False).loss  # type: ignore[no-any-return]

    want, eager_bytes = _step(loss, model, ids)
    for budget in (1.0, 0.0):
        ours = compiler.compile(loss, backend="aot_eager",
                                options={"activation_memory_budget": budget})
        _step(ours, model, ids)
        got, saved = _step(ours, model, ids)
        _assert_same_grads(got, want)
        torch._dynamo.reset()
        with functorch_config.patch(activation_memory_budget=budget):
            theirs = torch.compile(loss, backend="aot_eager")
            _step(theirs, model, ids)
            torch_bytes = _step(theirs, model, ids)[1]
        torch._dynamo.reset()
        assert saved <= torch_bytes * 1.02, (budget, saved, torch_bytes)
        if budget == 1.0:
            assert saved <= eager_bytes
        else:
            assert saved == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_pareto_svg_from_the_public_api_marks_the_measured_point(
        backend: str, tmp_path: Path) -> None:
    model, loss, x = _mlp()
    path = tmp_path / "pareto.svg"
    compiled = compiler.compile(loss, backend=backend,
                                options={"activation_memory_budget": 0.5,
                                         "pareto_svg": str(path)})
    _step(compiled, model, x)
    _, saved = _step(compiled, model, x)
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(path).getroot()
    chosen = root.find(f"{ns}circle[@id='chosen']")
    assert chosen is not None
    assert float(chosen.get("data-budget", "nan")) == 0.5
    assert int(chosen.get("data-saved-bytes", "-1")) == saved
    assert len(root.findall(f"{ns}circle")) == 22  # budgets 0, 0.05, ..., 1 and the mark


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("options", "match"), [
    ({"activation_memory_budget": 1.5}, r"activation_memory_budget must be in \[0, 1\]"),
    ({"activation_memory_budget": -0.1}, r"activation_memory_budget must be in \[0, 1\]"),
    ({"solver": "simplex"}, "unknown solver 'simplex'"),
    ({"estimator": "guess"}, "unknown estimator 'guess'"),
])
def test_bad_values_are_errors_at_compile(backend: str, options: dict[str, object],
                                          match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compiler.compile(lambda x: x.sin(), backend=backend, options=options)


def test_budget_options_are_listed_with_help() -> None:
    listed = compiler.list_options()
    for name in ("activation_memory_budget", "solver", "estimator", "pareto_svg",
                 "partitioner"):
        assert f"aotgrad.{name}" in listed
    assert "[0, 1]" in listed["aotgrad.activation_memory_budget"]
    assert "dp, greedy or ilp" in listed["aotgrad.solver"]


def _buffers_of(model: torch.nn.Module) -> list[torch.Tensor]:
    return [b.detach().clone() for b in model.buffers()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_running_stats_are_not_saved_at_budget_zero(backend: str) -> None:
    """A training-mode batch norm recomputed in the backward needs no running statistics
    (its output, mean and rstd come from the input, weight and bias): budget 0.0 saves
    nothing, where aot_eager saved a copy of each running-stat buffer (the forward
    overwrites them); running statistics and gradients equal eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).train()
    x = torch.randn(4, 3, 16, 16)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return model(x).pow(2).mean()

    start = _buffers_of(model)

    def restore() -> None:
        with torch.no_grad():
            for b, s in zip(model.buffers(), start):
                b.copy_(s)

    want, _ = _step(loss, model, x)
    want_buffers = _buffers_of(model)
    compiled = compiler.compile(loss, backend=backend,
                                options={"activation_memory_budget": 0.0})
    restore()
    _step(compiled, model, x)  # compiles
    restore()
    with _count_saved([*model.parameters(), *model.buffers(), x]) as saved:
        out = compiled(x)
    for p in model.parameters():
        p.grad = None
    out.backward()
    _assert_same_grads([p.grad.clone() for p in model.parameters() if p.grad is not None],
                       want)
    for got_b, want_b in zip(model.buffers(), want_buffers):
        torch.testing.assert_close(got_b, want_b)
    assert saved[0] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("budget", [1.0, 0.5])
def test_a_small_view_of_a_large_value_is_saved_as_a_copy(backend: str, budget: float) -> None:
    """The second layer's weight gradient reads `h[:, 0]`, a view of the first layer's
    output `h`, which the backward does not need otherwise: the forward returns a copy of
    the view (1 KB), not the view that keeps all of `h` alive (65 KB, what eager autograd
    saves), and the second layer's output (0.5 KB, for pow's gradient)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 16))
    x = torch.randn(8, 65, 32)

    def loss(x: torch.Tensor) -> torch.Tensor:
        h = model[0](x)
        return model[1](h[:, 0]).pow(2).sum()

    want, eager_bytes = _step(loss, model, x)
    compiled = compiler.compile(loss, backend=backend,
                                options={"activation_memory_budget": budget})
    _step(compiled, model, x)
    got, saved = _step(compiled, model, x)
    _assert_same_grads(got, want)
    view, out = 8 * 32 * 4, 8 * 16 * 4
    assert eager_bytes == 8 * 65 * 32 * 4 + out
    if budget == 1.0:
        assert saved == view + out
    else:
        assert saved <= (view + out) / 2
