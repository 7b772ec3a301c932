"""Options: defaults, environment variables, patch()."""

from __future__ import annotations

import pytest
import torch
from guards import GuardsConfig, TensorMatch, get_config, patch_config
from guards.config import list_options


def test_defaults_env_and_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert GuardsConfig().cache_size_limit == 8
    monkeypatch.setenv("GUARDS_CACHE_SIZE_LIMIT", "3")
    assert GuardsConfig.from_env().cache_size_limit == 3
    assert set(list_options()) == {"cache_size_limit", "tensor_dispatch_keys", "native"}
    with patch_config(cache_size_limit=5):
        assert get_config().cache_size_limit == 5
    assert get_config().cache_size_limit == 8


def test_dispatch_keys_option() -> None:
    t = torch.randn(2)
    assert TensorMatch.from_tensor(t).dispatch_keys is not None
    with patch_config(tensor_dispatch_keys=0):
        assert TensorMatch.from_tensor(t).dispatch_keys is None
        assert TensorMatch.from_tensor(t, dispatch_keys=True).dispatch_keys is not None


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("1", 1), ("2", 2), ("sync", 2),
                                             ("SYNC", 2), ("off", 0)])
def test_native_option_words(text: str, value: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUARDS_NATIVE", text)
    assert GuardsConfig.from_env().native == value


def test_unknown_word_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUARDS_NATIVE", "later")
    with pytest.raises(ValueError, match="later"):
        GuardsConfig.from_env()
