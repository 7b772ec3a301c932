"""Stable names of callables in the compiled-graph cache's keys and pickles
(`aotgrad.serialize`): torch's functions made inside a factory and renamed (`F.max_pool2d`
is `boolean_dispatch.<locals>.fn`) are named by the module attribute that holds them, so a
graph calling them is written to disk (ResNet-50 training was captured and compiled again in
every warm process: its max pooling had "no stable name"); other local functions are not."""

from __future__ import annotations

import pytest
import torch.nn.functional as F
from aotgrad import serialize
from aotgrad.cache import Uncacheable


@pytest.mark.parametrize("fn", [F.max_pool2d, F.max_pool1d, F.adaptive_max_pool2d])
def test_a_renamed_factory_function_has_its_module_attribute_name(fn: object) -> None:
    assert "<locals>" in fn.__qualname__  # type: ignore[attr-defined]
    name = fn.__name__  # type: ignore[attr-defined]
    assert serialize.stable_text(fn) == f"callable:torch.nn.functional.{name};"
    assert serialize.loads(serialize.dumps(fn)) is fn


def _factory() -> object:
    def inner() -> None:
        pass

    return inner


def test_other_local_functions_have_no_stable_name() -> None:
    with pytest.raises(Uncacheable, match="no stable name"):
        serialize.stable_text(_factory())
    with pytest.raises(Uncacheable):
        serialize.dumps(_factory())
