"""The size-relation expression language: parsing, rendering, evaluation."""

from __future__ import annotations

import pytest
from guards import Relation, Sym, parse_expr, parse_relation


def test_parse_render_evaluate() -> None:
    rel = parse_relation("2 <= s0 <= 1024")
    assert rel.render() == "2 <= s0 <= 1024"
    assert rel.evaluate({"s0": 8})
    assert not rel.evaluate({"s0": 2048})
    assert parse_relation("s0 % 8 == 0").render() == "(s0 % 8) == 0"
    expr = parse_expr("s0 * 2 + s1 // 4 - -3")
    assert expr.evaluate({"s0": 5, "s1": 9}) == 5 * 2 + 9 // 4 + 3
    assert expr.symbols() == {"s0", "s1"}


def test_operators_and_python_semantics() -> None:
    s0, s1 = Sym("s0"), Sym("s1")
    rel = Relation.of(s0 % 3, "==", s1 // -2)
    env = {"s0": -7, "s1": 5}
    assert rel.evaluate(env) == ((-7 % 3) == (5 // -2))
    assert eval(rel.render(), {}, env) == rel.evaluate(env)
    assert rel.render("sym_") == "(sym_s0 % 3) == (sym_s1 // (-2))"


def test_rejects_unsupported() -> None:
    with pytest.raises(ValueError):
        parse_relation("s0 / 2 == 1")
    with pytest.raises(ValueError):
        parse_relation("s0 + 1")
    with pytest.raises(ValueError):
        Sym("not a name")
