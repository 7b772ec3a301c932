"""The facade's docstring examples run as doctests (they are its user documentation)."""

from __future__ import annotations

import doctest
import importlib

import compiler
import pytest

MODULES = [
    "compiler.api", "compiler.backends", "compiler.options", "compiler.config", "compiler.explain",
    "compiler.tracing", "compiler.precompile", "compiler.dynamic",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    compiler.reset()
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
