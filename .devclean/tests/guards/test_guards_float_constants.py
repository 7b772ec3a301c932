"""EqualsMatch on floats: `-0.0` and `0.0` are different constants (they compare equal), NaN
matches NaN (it compares unequal to itself), and `1`, `1.0` and `True` never match each other;
the compiled check and `constant_matches` agree."""

from __future__ import annotations

import math

import guards
import pytest
from guards.checks import EqualsMatch, constant_matches
from guards.interpret import interpret
from guards.sources import LocalSource

VALUES = [0.0, -0.0, math.nan, 1.0, 1, True, -1.0, math.inf, -math.inf, (0.0, 1), (-0.0, 1)]


def _same_constant(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        assert type(b) is tuple
        return len(a) == len(b) and all(_same_constant(x, y) for x, y in zip(a, b))
    if type(a) is float:
        assert type(b) is float
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


@pytest.mark.parametrize("expected", VALUES, ids=repr)
def test_equals_match_tells_float_constants_apart(expected: object) -> None:
    builder = guards.GuardBuilder()
    builder.add(LocalSource("c"), EqualsMatch(expected))
    tree = builder.build()
    check = guards.compile_guard(tree, native=False).fn
    for value in VALUES:
        want = _same_constant(value, expected)
        assert constant_matches(value, expected) is want, (value, expected)
        assert bool(check({"c": value}, {})) is want, (value, expected)
        assert (interpret(tree, {"c": value}, {}) is None) is want, (value, expected)
