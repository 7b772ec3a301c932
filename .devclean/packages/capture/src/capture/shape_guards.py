"""The ShapeEnv's facts about a frame's symbolic inputs -> size guards of the guard tree.

Each input symbol is bound once from the source it was read from (`s0 = L['x'].shape[0]`);
every size or stride of a symbolic tensor that the tensor match leaves unchecked is bound
too and related to its expression; then every relation the trace relied on is required:
the ShapeEnv's guards (a branch on `x.shape[0] > 4`, a broadcast that needs `s0 == s1`),
its replacements (a size the program specialized) and the symbols' value ranges (sizes
are >= 2, since 0 and 1 stay static; `mark_dynamic`'s bounds). A relation the guard
language cannot express pins its symbols to their values instead: that entry then serves
fewer sizes, never a size the trace did not consider.

IR in: `SymbolicInputs` and the ShapeEnv after tracing. IR out: symbol bindings and
`guards.Relation`s added to a `guards.GuardBuilder`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import guards
import sympy  # type: ignore[import-untyped]  # sympy ships no type information
import torch
from guards.exprs import Const, Expr, Relation, Sym
from guards.sources import SizeSource, Source, StrideSource
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo

from capture.shapes import SymbolicInputs

__all__ = ["ConstraintViolation", "ShapeGuards", "check_marked", "shape_guards"]

_RELATIONS: dict[type, str] = {
    sympy.Eq: "==",
    sympy.Ne: "!=",
    sympy.StrictLessThan: "<",
    sympy.LessThan: "<=",
    sympy.StrictGreaterThan: ">",
    sympy.GreaterThan: ">=",
}
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_BINARY = {"FloorDiv": "//", "PythonMod": "%", "Mod": "%"}


class ConstraintViolation(Exception):
    """A dimension marked dynamic (`mark_dynamic`) that the program specialized to one
    value; names the user's line that did it."""


class _Untranslatable(Exception):
    pass


@dataclass
class ShapeGuards:
    """Size guards for one compiled entry: the dimensions each tensor match leaves
    unchecked, the symbol bindings (name, source) and the relations."""

    dynamic_dims: dict[Source, frozenset[int]] = field(default_factory=dict)
    binds: list[tuple[str, Source]] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)

    def add_to(self, builder: guards.GuardBuilder) -> None:
        """Bind the symbols and require the relations in `builder`."""
        for name, source in self.binds:
            builder.bind_symbol(name, source)
        for relation in self.relations:
            builder.add_relation(relation)


def shape_guards(inputs: SymbolicInputs, env: ShapeEnv) -> ShapeGuards:
    """The guards that keep an entry traced with symbolic `inputs` to the sizes it serves."""
    out = ShapeGuards()
    if not inputs.symbols:
        return out
    bound: dict[Any, str] = {}
    for symbol, source in inputs.symbols.items():
        name = str(symbol)
        bound[symbol] = name
        out.binds.append((name, source))
    facts: list[Any] = []
    extra = 0
    for source, (fake, dims) in inputs.tensors.items():
        out.dynamic_dims[source] = dims
        match = guards.TensorMatch.from_tensor(fake_hint(fake, env), dims, dispatch_keys=False)
        for i, size in enumerate(fake.shape):
            if match.shape[i] is None and not _is_bound_symbol(size, bound):
                extra += 1
                out.binds.append((f"z{extra}", SizeSource(source, i)))
                facts.append(sympy.Eq(sympy.Symbol(f"z{extra}", integer=True), _expr(size)))
        if any(type(s) is int and s == 0 for s in fake.shape):
            continue  # NOTE: strides do not matter without elements (TensorMatch's rule)
        for i, stride in enumerate(fake.stride()):
            size = fake.shape[i]
            if match.strides[i] is None and not (type(size) is int and size == 1) and (
                    not _is_bound_symbol(stride, bound)):
                extra += 1
                out.binds.append((f"z{extra}", StrideSource(source, i)))
                facts.append(sympy.Eq(sympy.Symbol(f"z{extra}", integer=True), _expr(stride)))
    bound.update({sympy.Symbol(n, integer=True): n for n, _ in out.binds if n.startswith("z")})
    facts.extend(g.expr for g in env.guards)
    for symbol in inputs.symbols:
        replaced = env.replacements.get(symbol)
        if replaced is not None and replaced != symbol:
            facts.append(sympy.Eq(symbol, replaced))
        facts.extend(_range_facts(env, symbol))
    pinned: set[Any] = set()
    seen: set[Relation] = set()
    facts = [piece for fact in facts
             for piece in _without_max_min(_example_branch(fact, env), env)]
    for fact in facts:
        try:
            relations = _relations(fact, bound)
        except _Untranslatable:
            pinned |= {s for s in fact.free_symbols if s in inputs.symbols}
            unknown = [s for s in fact.free_symbols if s not in bound]
            if unknown:
                # NOTE: a fact over a symbol not bound from an input: pin every input symbol
                pinned |= set(inputs.symbols)
            continue
        for relation in relations:
            if relation not in seen:
                seen.add(relation)
                out.relations.append(relation)
    for symbol in pinned:
        value = int(env.backed_var_to_val[symbol])
        out.relations.append(Relation.of(Sym(bound[symbol]), "==", value))
    return out


def _without_max_min(fact: Any, env: ShapeEnv) -> list[Any]:
    """`fact` with each `Max`/`Min` (a slice's bound clamped to the size: `Max(1, s0)`)
    replaced by the argument the example's values select, and the facts that make that
    argument the one selected (`s0 >= 1`): the entry serves the sizes on the example's side
    of each clamp, which the guard language (no max/min) can then express."""
    out: list[Any] = []
    hints = env.backed_var_to_val
    for _ in range(8):  # NOTE: nested clamps, innermost first
        clamps = [a for a in _clamps(fact) if _clamps(a) == {a}]
        if not clamps:
            break
        choice: dict[Any, Any] = {}
        for clamp in clamps:
            if not clamp.free_symbols <= set(hints):
                return [fact, *out]  # NOTE: untranslatable as before (pins its symbols)
            largest = type(clamp).__name__ == "Max"
            values = [(arg.xreplace(hints), arg) for arg in clamp.args]
            _, best = (max if largest else min)(values, key=lambda v: v[0])
            out.extend(sympy.Ge(best, arg) if largest else sympy.Le(best, arg)
                       for _, arg in values if arg is not best)
            choice[clamp] = best
        fact = fact.xreplace(choice)
    return [fact, *out]


def _example_branch(fact: Any, env: ShapeEnv) -> Any:
    """`fact` with each disjunction (`~((-s0 >= 0) & (-s0 <= 40))`: a slice bound that is
    not within the size) replaced by a disjunct the example's values satisfy: the guard
    language has conjunctions only, and the entry then serves that side of the choice."""
    if not isinstance(fact, (sympy.Or, sympy.Not)):
        return fact
    hints = env.backed_var_to_val
    if not fact.free_symbols <= set(hints):
        return fact  # NOTE: untranslatable as before (pins its symbols)
    fact = sympy.logic.boolalg.to_nnf(fact, simplify=False)
    if isinstance(fact, sympy.And):
        return sympy.And(*(_example_branch(a, env) for a in fact.args))
    if isinstance(fact, sympy.Or):
        for arg in fact.args:
            if arg.xreplace(hints) is sympy.true:
                return _example_branch(arg, env)
    return fact


def _clamps(expr: Any) -> set[Any]:
    """The `Max`/`Min` sub-expressions of `expr` (sympy's or torch's own classes)."""
    return {e for e in sympy.preorder_traversal(expr) if type(e).__name__ in ("Max", "Min")}


def fake_hint(fake: torch.Tensor, env: ShapeEnv) -> Any:
    """A stand-in with the concrete sizes and strides of the example (for `TensorMatch`)."""

    class _Hinted:
        shape = tuple(_hint(s, env) for s in fake.shape)
        dtype = fake.dtype
        device = fake.device
        requires_grad = fake.requires_grad
        layout = fake.layout

        def stride(self) -> tuple[int, ...]:
            return tuple(_hint(s, env) for s in fake.stride())

    return _Hinted()


def _hint(value: Any, env: ShapeEnv) -> int:
    if isinstance(value, torch.SymInt):
        return int(value.node.expr.xreplace(env.backed_var_to_val))
    return int(value)


def _is_bound_symbol(value: Any, bound: dict[Any, str]) -> bool:
    return isinstance(value, torch.SymInt) and value.node.expr in bound


def _expr(value: Any) -> Any:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(int(value))


def _range_facts(env: ShapeEnv, symbol: Any) -> list[Any]:
    bounds = env.var_to_range.get(symbol)
    if bounds is None:
        return []
    out = []
    if bounds.lower.is_finite and bounds.lower not in (int_oo, -int_oo):
        out.append(sympy.Ge(symbol, bounds.lower))
    if bounds.upper.is_finite and bounds.upper not in (int_oo, -int_oo):
        out.append(sympy.Le(symbol, bounds.upper))
    return out


def _relations(fact: Any, bound: dict[Any, str]) -> list[Relation]:
    """`fact` (a sympy boolean) as guard relations (a conjunction), or _Untranslatable."""
    if fact is sympy.true:
        return []
    if fact is sympy.false:
        return [Relation.of(0, "==", 1)]
    if isinstance(fact, sympy.And):
        out: list[Relation] = []
        for arg in fact.args:
            out.extend(_relations(arg, bound))
        return out
    negate = False
    if isinstance(fact, sympy.Not):
        fact = fact.args[0]
        negate = True
    op = _RELATIONS.get(type(fact))
    if op is None:
        raise _Untranslatable(str(fact))
    if negate:
        op = _NEGATED[op]
    return [Relation.of(_translate(fact.args[0], bound), op, _translate(fact.args[1], bound))]


def _translate(expr: Any, bound: dict[Any, str]) -> Expr:
    if isinstance(expr, sympy.Symbol):
        name = bound.get(expr)
        if name is None:
            raise _Untranslatable(str(expr))
        return Sym(name)
    if isinstance(expr, sympy.Integer):
        return Const(int(expr))
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        parts = [_translate(a, bound) for a in expr.args]
        result = parts[0]
        for part in parts[1:]:
            result = result + part if isinstance(expr, sympy.Add) else result * part
        return result
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and expr.exp > 0:
        base = _translate(expr.base, bound)
        result = base
        for _ in range(int(expr.exp) - 1):
            result = result * base
        return result
    op = _BINARY.get(type(expr).__name__)
    if op is not None and len(expr.args) == 2:
        left, right = (_translate(a, bound) for a in expr.args)
        return left // right if op == "//" else left % right
    raise _Untranslatable(str(expr))


def check_marked(inputs: SymbolicInputs, env: Any) -> None:
    """Raise `ConstraintViolation` if the program specialized a dimension marked dynamic
    with `mark_dynamic` (naming the user's line), or its size is outside the mark's bounds."""
    for symbol, (what, _, _) in inputs.marked.items():
        replaced = env.replacements.get(symbol)
        if replaced is None or not isinstance(replaced, sympy.Integer):
            continue
        where = getattr(env, "specialized_at", {}).get(symbol, "?")
        raise ConstraintViolation(
            f"{what} was marked dynamic (mark_dynamic), but the program specialized it to the "
            f"constant {int(replaced)} at {where}. Remove the mark (or use "
            "maybe_mark_dynamic, which allows it), or change the code so that it does not "
            "need this size's value.")
