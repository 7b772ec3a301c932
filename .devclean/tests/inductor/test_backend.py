"""The `inductor` backend through aotgrad: forward and backward compiled by compile_aten,
options and modes validated."""

from __future__ import annotations

import aotgrad
import pytest
import torch
from inductor import config
from inductor.backend import make_inductor, resolve_options
from inductor.decompositions import decomposition_table
from inductor.pipeline import compile_aten


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.ln = torch.nn.LayerNorm(64)
        self.l2 = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.ln(self.l1(x)))
        return torch.log_softmax(self.l2(h), -1)


def test_training_matches_eager() -> None:
    torch.manual_seed(0)
    m = _Block()
    x = torch.randn(16, 32)
    cm = aotgrad.aot_module(m, compile_aten, compile_aten, partition_fn="min_cut",
                            decompositions=decomposition_table())
    y = cm(x)
    y.sum().backward()
    got = [p.grad.clone() for p in m.parameters()]  # type: ignore[union-attr]
    m.zero_grad()
    expected_y = m(x)
    expected_y.sum().backward()
    torch.testing.assert_close(y, expected_y, atol=1e-5, rtol=1e-5)
    for g, p in zip(got, m.parameters()):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)


def test_backend_contract_on_fx_graph() -> None:
    gm = torch.fx.symbolic_trace(_Block())
    backend = make_inductor()
    x = torch.randn(4, 32)
    fn = backend(gm, [x])
    out = fn(x)
    expected = gm(x)
    torch.testing.assert_close(out[0] if isinstance(out, (tuple, list)) else out, expected)


def test_options_and_modes() -> None:
    assert set(config.list_mode_options()) == {
        "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}
    for name, help_text in config.list_options().items():
        assert help_text and "\n" not in help_text, name
    assert resolve_options({"fusion": False}, "max-autotune")["max_autotune"] is True
    with pytest.raises(ValueError, match="no_such_option"):
        resolve_options({"no_such_option": 1})
    assert resolve_options({"partitioner": "default"}) == {"partitioner": "default"}
    with pytest.raises(TypeError):
        resolve_options({"threads": "two"})
    with pytest.raises(ValueError):
        resolve_options(None, "fastest")


def test_entry_point_registered() -> None:
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group="capture.backends")}
    assert names.get("inductor") == "inductor.backend:inductor"


def test_sdpa_gradients_match_eager() -> None:
    """The flash-attention op is kept whole: its backward reads the logsumexp output."""
    torch.manual_seed(0)
    q = torch.randn(2, 2, 3, 8, requires_grad=True)
    k = torch.randn(2, 2, 6, 8, requires_grad=True)
    v = torch.randn(2, 2, 6, 8, requires_grad=True)
    f = aotgrad.aot_function(torch.nn.functional.scaled_dot_product_attention, compile_aten,
                             compile_aten, partition_fn="min_cut",
                             decompositions=decomposition_table())
    f(q, k, v).sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]  # type: ignore[union-attr]
    for t in (q, k, v):
        t.grad = None
    torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
    for g, t in zip(got, (q, k, v)):
        torch.testing.assert_close(g, t.grad, atol=1e-5, rtol=1e-4)
