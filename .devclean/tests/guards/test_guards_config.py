"""Options: defaults, environment variables, patch()."""

from __future__ import annotations

import pytest
import torch
from guards import GuardsConfig, TensorMatch, config


def test_defaults_env_and_patch() -> None:
    assert GuardsConfig().cache_size_limit == 8
    assert config.load({"GUARDS_CACHE_SIZE_LIMIT": "3"}).cache_size_limit == 3
    assert {"cache_size_limit", "tensor_dispatch_keys", "native"} <= set(config.list_options())
    before = config.options.cache_size_limit
    with config.patch(cache_size_limit=5) as patched:
        assert config.options.cache_size_limit == 5
        assert patched is config.options
    assert config.options.cache_size_limit == before


def test_patch_checks_names_and_types() -> None:
    with pytest.raises(ValueError, match="'cache_size_limit'"), config.patch(cache_size_limt=1):
        pass
    with pytest.raises(TypeError, match="cache_size_limit"), config.patch(cache_size_limit="8"):
        pass
    with pytest.raises(TypeError, match="native"), config.patch(native=True):
        pass


def test_dispatch_keys_option() -> None:
    t = torch.randn(2)
    assert TensorMatch.from_tensor(t).dispatch_keys is not None
    with config.patch(tensor_dispatch_keys=0):
        assert TensorMatch.from_tensor(t).dispatch_keys is None
        assert TensorMatch.from_tensor(t, dispatch_keys=True).dispatch_keys is not None


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("1", 1), ("2", 2), ("sync", 2),
                                             ("SYNC", 2), ("off", 0)])
def test_native_option_words(text: str, value: int) -> None:
    assert config.load({"GUARDS_NATIVE": text}).native == value


def test_unknown_word_is_an_error() -> None:
    with pytest.raises(ValueError, match="later"):
        config.load({"GUARDS_NATIVE": "later"})
