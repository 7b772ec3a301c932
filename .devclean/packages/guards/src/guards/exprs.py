"""A tiny integer expression language for size relations (no sympy).

Symbols (`s0`), int constants, `+ - * // %`, unary minus, and comparison chains
(`2 <= s0 <= 1024`, `s0 == s1`, `s0 % 8 == 0`). Expressions are frozen and hashable; they
render to Python source (used verbatim by the generated guard) and evaluate in the
interpreter with the same Python semantics (floor division, sign of modulo).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_BINOPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
}
_CMPOPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True, slots=True)
class Expr:
    """Base of integer expressions. Supports `+ - * // %` with ints and other expressions."""

    def render(self, prefix: str = "") -> str:
        """Python source for this expression; symbol names get `prefix` prepended."""
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value with symbols taken from `env` (KeyError if a symbol is missing)."""
        raise NotImplementedError

    def symbols(self) -> frozenset[str]:
        """The names of the symbols this expression mentions."""
        raise NotImplementedError

    def __add__(self, other: Expr | int) -> Expr:
        return BinOp("+", self, as_expr(other))

    def __radd__(self, other: int) -> Expr:
        return BinOp("+", as_expr(other), self)

    def __sub__(self, other: Expr | int) -> Expr:
        return BinOp("-", self, as_expr(other))

    def __rsub__(self, other: int) -> Expr:
        return BinOp("-", as_expr(other), self)

    def __mul__(self, other: Expr | int) -> Expr:
        return BinOp("*", self, as_expr(other))

    def __rmul__(self, other: int) -> Expr:
        return BinOp("*", as_expr(other), self)

    def __floordiv__(self, other: Expr | int) -> Expr:
        return BinOp("//", self, as_expr(other))

    def __mod__(self, other: Expr | int) -> Expr:
        return BinOp("%", self, as_expr(other))

    def __neg__(self) -> Expr:
        return BinOp("-", Const(0), self)

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True, slots=True)
class Sym(Expr):
    """A size symbol such as `s0`, bound once from a source."""

    name: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"symbol name must be an identifier, got {self.name!r}")

    def render(self, prefix: str = "") -> str:
        return prefix + self.name

    def evaluate(self, env: Mapping[str, int]) -> int:
        return env[self.name]

    def symbols(self) -> frozenset[str]:
        return frozenset((self.name,))


@dataclass(frozen=True, slots=True)
class Const(Expr):
    """An int constant."""

    value: int

    def render(self, prefix: str = "") -> str:
        return repr(self.value) if self.value >= 0 else f"({self.value!r})"

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def symbols(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True, slots=True)
class BinOp(Expr):
    """`lhs op rhs` for op in `+ - * // %` (Python int semantics)."""

    op: str
    lhs: Expr
    rhs: Expr

    def __post_init__(self) -> None:
        if self.op not in _BINOPS:
            raise ValueError(f"unsupported operator {self.op!r}")

    def render(self, prefix: str = "") -> str:
        return f"({self.lhs.render(prefix)} {self.op} {self.rhs.render(prefix)})"

    def evaluate(self, env: Mapping[str, int]) -> int:
        return _BINOPS[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def symbols(self) -> frozenset[str]:
        return self.lhs.symbols() | self.rhs.symbols()


@dataclass(frozen=True, slots=True)
class Relation:
    """A comparison chain `e0 op0 e1 op1 e2 ...`, true when every adjacent pair holds.

    Build with `parse_relation("2 <= s0 <= 1024")` or `Relation.of(Sym("s0"), "==", Sym("s1"))`.
    """

    operands: tuple[Expr, ...]
    ops: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.operands) != len(self.ops) + 1 or not self.ops:
            raise ValueError("a relation needs n operands and n-1 >= 1 comparison operators")
        for op in self.ops:
            if op not in _CMPOPS:
                raise ValueError(f"unsupported comparison {op!r}")

    @staticmethod
    def of(lhs: Expr | int, op: str, rhs: Expr | int) -> Relation:
        """The single comparison `lhs op rhs`."""
        return Relation((as_expr(lhs), as_expr(rhs)), (op,))

    def render(self, prefix: str = "") -> str:
        """Python source, e.g. `2 <= s0 <= 1024` (a chained comparison, same semantics).

        Symbol names get `prefix` prepended (the generated guard's local names).
        """
        parts = [self.operands[0].render(prefix)]
        for op, operand in zip(self.ops, self.operands[1:]):
            parts.append(op)
            parts.append(operand.render(prefix))
        return " ".join(parts)

    def evaluate(self, env: Mapping[str, int]) -> bool:
        """Whether the chain holds for the symbol values in `env`."""
        left = self.operands[0].evaluate(env)
        for op, operand in zip(self.ops, self.operands[1:]):
            right = operand.evaluate(env)
            if not _CMPOPS[op](left, right):
                return False
            left = right
        return True

    def symbols(self) -> frozenset[str]:
        """The symbols this relation mentions."""
        out: frozenset[str] = frozenset()
        for operand in self.operands:
            out |= operand.symbols()
        return out

    def __str__(self) -> str:
        return self.render()


def as_expr(value: Expr | int) -> Expr:
    """Wrap an int as a Const; return expressions unchanged."""
    if isinstance(value, Expr):
        return value
    if type(value) is int:
        return Const(value)
    raise TypeError(f"expected an Expr or int, got {type(value).__name__}")


_AST_BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
    ast.Mod: "%",
}
_AST_CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


def _from_ast(node: ast.expr) -> Expr:
    if isinstance(node, ast.Name):
        return Sym(node.id)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Const(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _from_ast(node.operand)
        if isinstance(operand, Const):
            return Const(-operand.value)
        return -operand
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_BINOPS:
        return BinOp(_AST_BINOPS[type(node.op)], _from_ast(node.left), _from_ast(node.right))
    raise ValueError(f"unsupported expression: {ast.unparse(node)!r}")


def parse_expr(text: str) -> Expr:
    """Parse an integer expression such as `s0 * 2 + s1 // 4`."""
    return _from_ast(ast.parse(text, mode="eval").body)


def parse_relation(text: str) -> Relation:
    """Parse a comparison chain such as `s0 % 8 == 0` or `2 <= s0 <= 1024`."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Compare):
        raise ValueError(f"not a comparison: {text!r}")  # noqa: TRY004  # a parse error
    ops = []
    for op in node.ops:
        if type(op) not in _AST_CMPOPS:
            raise ValueError(f"unsupported comparison in {text!r}")
        ops.append(_AST_CMPOPS[type(op)])
    operands = [_from_ast(node.left)] + [_from_ast(c) for c in node.comparators]
    return Relation(tuple(operands), tuple(ops))
