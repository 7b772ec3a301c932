"""A generator of small random Python programs for differential testing (issue 11, group 10).

A `Program` is module source: fixed module-level state (globals, a class `K` with class-level
state, an object `OBJ`, a global helper `h`), one function `f(x, y, n, lst, obj)` built from
random statements, and a driver `main(fn, record)` that calls `fn` several times with Python
state changed between the calls (globals rebound, attributes and methods replaced, grad mode,
aliased or distinct tensors, another int argument, another list length). `_program_run.py`
executes the source once eagerly and once per backend and compares what `record` saw.

Choices go through a `Draw` (hypothesis' `draw` or a `random.Random`), simplest option first,
so hypothesis shrinks a failing program towards fewer statements and plainer operations.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T")

SHAPE = (4, 4)


class Draw:
    """The source of choices: hypothesis (`Draw.hypothesis(draw)`) or a seeded `random.Random`."""

    def __init__(self, integer: Callable[[int, int], int]) -> None:
        self._integer = integer

    @classmethod
    def hypothesis(cls, draw: Any) -> Draw:
        from hypothesis import strategies as st

        return cls(lambda lo, hi: draw(st.integers(lo, hi)))

    @classmethod
    def seeded(cls, seed: int) -> Draw:
        rng = random.Random(seed)
        return cls(rng.randint)

    def int(self, lo: int, hi: int) -> int:
        return self._integer(lo, hi)

    def pick(self, options: Sequence[_T]) -> _T:
        return options[self.int(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        """True with about `percent`% probability (shrinks to False)."""
        return self.int(0, 99) >= 100 - percent


# Module-level state every program starts from. Names listed in STATE are compared after
# every call; K and OBJ are compared through their attributes.
PRELUDE = '''\
import math

import torch

G = 1.5
Z = 0.0
GN = 2
FLAG = True
GT = torch.linspace(-1.0, 1.0, 16).reshape(4, 4)
LOG = []
D = {}


class K:
    scale = 0.5
    count = 0
    registry = []


class Obj:
    def __init__(self, s=1.0):
        self.scale = s
        self.count = 0
        self.w = torch.full((4, 4), s)
        self.items = []

    def apply(self, t):
        return t * self.scale


def _apply_alt(self, t):
    return t + self.scale


OBJ = Obj()


def h(t):
    return t * 2.0


def h_alt(t):
    return t - 1.0


def hd(t, s=2.0):
    return t * s


def _apply_inst(t):
    return t * 3.0
'''

STATE = ("G", "Z", "GN", "FLAG", "GT", "LOG", "D", "h", "K", "OBJ", "Obj")
REBOUND_GLOBALS = ("G", "Z", "GN", "FLAG", "GT", "h")


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of the driver and the state changes made just before it."""

    changes: tuple[str, ...]
    n: int
    alias: str  # "distinct" | "same" (y is x) | "view" (y is a view of x)
    lst_len: int
    grad: bool
    fresh_obj: bool  # pass a new Obj instead of the module-level OBJ
    lst_alias: bool = False  # the list's last slot is x itself


@dataclasses.dataclass(frozen=True)
class Program:
    """A generated program: the body of `f`, the calls, and how inputs require grad."""

    body: tuple[str, ...]
    global_writes: tuple[str, ...]
    calls: tuple[Call, ...]
    grad_mode: str  # "none" | "leaf" (x, y require grad) | "nonleaf" (x = leaf * 1.0)
    seed: int

    @property
    def source(self) -> str:
        return render(self)


@dataclasses.dataclass
class _Scope:
    tensors: list[str]
    ints: list[str]
    in_lst_loop: bool = False
    depth: int = 0

    def child(self) -> _Scope:
        return _Scope(list(self.tensors), list(self.ints), self.in_lst_loop, self.depth + 1)


class _Gen:
    """Draws the statements of `f`. Locals defined in a block stay visible only in it."""

    def __init__(self, d: Draw) -> None:
        self.d = d
        self.counter = 0
        self.global_writes: set[str] = set()

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ----- expressions
    def tensor(self, s: _Scope, depth: int = 0) -> str:
        d = self.d
        kind = d.int(0, 6) if depth < 2 else 0
        if kind == 0:
            return d.pick([*s.tensors, *s.tensors, "GT", "obj.w", "OBJ.w"])
        if kind == 1:
            return self.unary(self.tensor(s, depth + 1))
        if kind == 2:
            return self.binary(self.tensor(s, depth + 1), self.tensor(s, depth + 1))
        if kind == 3:
            return f"({self.tensor(s, depth + 1)} {d.pick(['*', '+', '-'])} {self.scalar(s)})"
        if kind == 4:
            return self.reduce(self.tensor(s, depth + 1), s)
        if kind == 5:
            return self.index(self.tensor(s, depth + 1), s)
        return self.call(self.tensor(s, depth + 1))

    # NOTE: every expression returned is atomic (a name, attribute, call, subscript or
    # parenthesized), so composing them never changes precedence.
    def unary(self, e: str) -> str:
        return self.d.pick([
            f"torch.sin({e})", f"{e}.relu()", f"torch.tanh({e})", f"{e}.abs()", f"(-{e})",
            f"{e}.sigmoid()", f"{e}.t()", f"{e}.flip(0)", f"{e}.view(16).view(4, 4)",
            f"{e}.reshape(2, 8).reshape(4, 4)", f"{e}.transpose(0, 1)",
            f"{e}.permute(1, 0)", f"{e}.unsqueeze(0).squeeze(0)", f"{e}.contiguous()",
            f"{e}.clone()", f"{e}.detach()", f"{e}.exp().clamp(max=20.0)",
        ])

    def binary(self, a: str, b: str) -> str:
        return self.d.pick([
            f"({a} + {b})", f"({a} * {b})", f"({a} - {b})", f"({a} / ({b}.abs() + 1.0))",
            f"torch.maximum({a}, {b})", f"torch.where({a} > {b}, {a}, {b})",
            f"(({a} @ {b}) * 0.25)", f"(torch.mm({a}, {b}.t()) * 0.25)",
            f"torch.stack([{a}, {b}]).sum(0)", f"torch.cat([{a}, {b}]).view(2, 4, 4).mean(0)",
        ])

    def reduce(self, e: str, s: _Scope) -> str:
        return self.d.pick([
            f"({e} + {e}.sum(0))", f"({e} - {e}.mean(1, keepdim=True))", f"({e} - {e}.amax())",
            f"({e} + {e}.sum())", f"({e}.cumsum(0) * 0.5)", f"{e}.softmax(-1)",
            f"({e} * {e}.norm() * 0.1)", f"({e} + {e}.amin(1, keepdim=True))",
            f"({e} + {e}.var(0))",
        ])

    def index(self, e: str, s: _Scope) -> str:
        i = self.d.pick(s.ints)
        return self.d.pick([
            f"({e} + {e}[0])", f"({e} * {e}[:, 1:2])", f"{e}[[2, 0, 1, 3]]",
            f"({e} + {e}[{i} % 4])", f"({e} + {e}[{i}])",
            f"{e}.index_select(0, torch.tensor([1, 0, 3, 2]))",
            f"{e}.masked_fill({e} > 0.5, 0.0)", f"({e} + {e}[{e} > 0].sum())",
            f"{e}[{e}.argmax(0)]", f"{e}[1:3].repeat(2, 1)",
        ])

    def call(self, e: str) -> str:
        return self.d.pick([f"h({e})", f"obj.apply({e})", f"OBJ.apply({e})", f"hd({e})"])

    def scalar(self, s: _Scope) -> str:
        return self.d.pick([
            "2.0", "G", "K.scale", "obj.scale", "OBJ.scale", self.d.pick(s.ints), "GN",
            "len(lst)", "len(LOG)", "float(len(D))", "K.count", "math.copysign(1.0, Z)",
            "type(obj).__name__.count('O')", "OBJ.__class__.apply(OBJ, 1.0)",
        ])

    def int_expr(self, s: _Scope) -> str:
        a = self.d.pick(s.ints)
        return self.d.pick([
            a, f"{a} + 1", f"{a} * 2 + GN", "len(lst)", "len(LOG)", f"{a} + K.count",
            "obj.count", "len(D)", f"int({self.tensor(s, 1)}.sum() > 0)",
        ])

    def cond(self, s: _Scope) -> str:
        d = self.d
        c = d.int(0, 3)
        return d.pick([
            f"n > {c}", f"G > {c}.0", "FLAG", f"len(lst) > {c}", "x is y", "obj is OBJ",
            "torch.is_grad_enabled()", f"K.count > {c}", f"{d.pick(s.tensors)}.requires_grad",
            f"{self.tensor(s, 1)}.sum() > 0", f"{d.pick(s.ints)} % 2 == 0", "'a' in D",
            f"{d.pick(s.tensors)}.is_contiguous()",
        ])

    # ----- statements
    def block(self, s: _Scope, lo: int, hi: int) -> list[str]:
        lines: list[str] = []
        for _ in range(self.d.int(lo, hi)):
            lines += self.statement(s)
        return lines or ["pass"]

    def statement(self, s: _Scope) -> list[str]:
        d = self.d
        nested = s.depth < 2
        kind = d.int(0, 11 if nested else 8)
        if kind == 0:  # assign a tensor to a new or existing local
            name = self.fresh("t") if d.chance(60) else d.pick(s.tensors)
            line = f"{name} = {self.tensor(s)}"
            if name not in s.tensors:
                s.tensors.append(name)
            return [line]
        if kind == 1:
            return [self.inplace(s)]
        if kind == 2:
            return [self.container(s)]
        if kind == 3:
            return [self.attribute(s)]
        if kind == 4:
            return self.global_write(s)
        if kind == 5:  # python int local
            name = self.fresh("k")
            line = f"{name} = {self.int_expr(s)}"
            s.ints.append(name)
            return [line]
        if kind == 6:  # a local list, mutated and read back
            acc = self.fresh("acc")
            t = self.fresh("t")
            lines = [f"{acc} = [{self.tensor(s, 1)}]", f"{acc}.append({self.tensor(s, 1)})",
                     f"{t} = {acc}[-1] + {acc}[0] * len({acc})"]
            s.tensors.append(t)
            return lines
        if kind == 7:
            return [f"if {self.int_expr(s)} > {d.int(2, 6)}:",
                    f"    raise {d.pick(['ValueError', 'RuntimeError'])}('too big')"]
        if kind == 8:  # a comprehension
            t = self.fresh("t")
            inner = s.child()
            inner.ints.append("i")
            e = self.tensor(inner, 1)
            line = d.pick([
                f"{t} = torch.stack([{e} * i for i in range({d.int(1, 3)})]).sum(0)",
                f"{t} = sum([v * 0.5 for v in lst], {self.tensor(s, 1)})",
                f"{t} = {{str(i): {e} + i for i in range(2)}}['1']",
                f"{t} = sum([{e} for i in range(n) if i % 2 == 0], torch.zeros(4, 4))",
            ])
            s.tensors.append(t)
            return [line]
        if kind == 9:  # if / else
            lines = [f"if {self.cond(s)}:"] + _indent(self.block(s.child(), 1, 3))
            if d.chance(50):
                lines += ["else:"] + _indent(self.block(s.child(), 1, 2))
            return lines
        if kind == 10:  # loops over python ints, the list argument, the global dict
            which = d.int(0, 5)
            inner = s.child()
            if which == 0:
                inner.ints.append("i")
                return [f"for i in range({d.pick(['n', '2', 'len(lst)'])}):"] + _indent(
                    self.block(inner, 1, 3))
            if which == 1:
                inner.tensors.append("item")
                inner.in_lst_loop = True
                return ["for item in lst:"] + _indent(self.block(inner, 1, 2))
            if which == 2:
                w = self.fresh("w")
                inner.ints.append(w)
                body = self.block(inner, 1, 2) + [f"{w} += 1"]
                return [f"{w} = 0", "while " + f"{w} < n:"] + _indent(body)
            if which == 3:  # changing the dict while iterating over it raises, as in eager
                return [f"for kk in {d.pick(['D', 'D.keys()', 'list(D)'])}:"] + _indent(
                    self.block(inner, 1, 2))
            if which == 4:  # a list appended while iterated is iterated to its new end
                inner.tensors.append("item")
                inner.in_lst_loop = True
                return ["for item in lst:", "    if len(lst) < 4:",
                        f"        lst.append(item * {d.pick(['0.5', '2.0'])})"] + _indent(
                    self.block(inner, 0, 1))
            view = self.fresh("view")
            k = self.fresh("k")
            lines = [f"{view} = D.{d.pick(['keys', 'values', 'items'])}()",
                     f"D[{d.pick(['n', repr('v')])}] = {self.int_expr(s)}", f"{k} = len({view})"]
            s.ints.append(k)
            return lines
        # grad-mode blocks
        which = d.int(0, 2)
        if which == 2:
            return [f"torch.set_grad_enabled({d.pick(['False', 'True'])})"]
        ctx = ["torch.no_grad()", "torch.enable_grad()"][which]
        return [f"with {ctx}:"] + _indent(self.block(s.child(), 1, 2))

    def inplace(self, s: _Scope) -> str:
        d = self.d
        target = d.pick([*s.tensors, "GT", "obj.w", "OBJ.w", "lst[0]"])
        e = self.tensor(s, 1)
        return d.pick([
            f"{target}.add_({e})", f"{target}.mul_(0.5)", f"{target}.clamp_(-1.0, 1.0)",
            f"{target}[0] = {e}[1]", f"{target}[:, 1] = 0.0", f"{target}.copy_({e})",
            f"{target}.sub_({e} * 0.5)", f"{target}[1:] = {target}[:-1]",
            f"{target}.t_()", f"{target}.relu_()",
        ])

    def container(self, s: _Scope) -> str:
        d = self.d
        options = [
            f"LOG.append({self.int_expr(s)})", f"LOG.append({self.tensor(s, 1)}.sum())",
            f"D['a'] = {self.tensor(s, 1)}", f"D[{d.pick(s.ints)}] = {d.pick(s.ints)}",
            "D.pop('a', None)", "K.registry.append(n)", f"obj.items.append({self.int_expr(s)})",
            f"lst[0] = {self.tensor(s, 1)}",
        ]
        if not s.in_lst_loop:
            options += [f"lst.append({self.tensor(s, 1)})", "lst.pop()"]
        return d.pick(options)

    def attribute(self, s: _Scope) -> str:
        return self.d.pick([
            "obj.count += 1", "OBJ.count += 1", "K.count += 1",
            f"obj.w = {self.tensor(s, 1)}", f"obj.scale = obj.scale * {self.d.pick(['0.5', '2.0'])}",
            f"K.scale = {self.scalar(s)}", f"obj.extra = {self.int_expr(s)}",
            f"OBJ.w = {self.tensor(s, 1)}.detach()",
        ])

    def global_write(self, s: _Scope) -> list[str]:
        d = self.d
        which = d.int(0, 4)
        name = ("G", "GN", "GT", "FLAG", "GT")[which]
        self.global_writes.add(name)
        value = [f"G + {d.pick(['0.5', '1.0'])}", f"GN + {d.int(1, 2)}",
                 f"{self.tensor(s, 1)}.detach()", "not FLAG", self.tensor(s, 1)][which]
        return [f"{name} = {value}"]

    def returns(self, s: _Scope) -> str:
        d = self.d
        parts = [d.pick(s.tensors)]
        for _ in range(d.int(0, 3)):
            parts.append(d.pick([
                d.pick(s.tensors), d.pick(s.ints), "x is y", "len(lst)", "x", "y",
                f"{d.pick(s.tensors)}.requires_grad", "torch.is_grad_enabled()",
            ]))
        if len(parts) == 1 and d.chance(30):
            return f"return {parts[0]}"
        if d.chance(20):
            return "return {" + ", ".join(f"'r{i}': {p}" for i, p in enumerate(parts)) + "}"
        return "return (" + ", ".join(parts) + ",)"


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _call(d: Draw, first: bool) -> Call:
    changes: list[str] = []
    if not first:
        for _ in range(d.int(0, 2)):
            changes.append(d.pick([
                "G = G + 1.0", "GN = GN + 1", "FLAG = not FLAG", "GT = GT * -1.0", "h = h_alt",
                "Z = -Z", "D['a'] = GT", "LOG.append(0)", "OBJ.apply = _apply_inst",
                "hd.__defaults__ = (3.0,)", "GT = OBJ.w", "OBJ.w = GT",
                "OBJ.scale = OBJ.scale * 2.0", "K.scale = K.scale + 1.0", "Obj.apply = _apply_alt",
                "K.count = K.count + 5", "LOG.clear()", "D.clear()", "OBJ.w = torch.ones(4, 4)",
                "OBJ.w = OBJ.w.t()",
            ]))
    return Call(
        changes=tuple(changes),
        n=d.int(0, 4),
        alias=d.pick(["distinct", "same", "view"]),
        lst_len=d.int(0, 3),
        grad=not d.chance(30),
        fresh_obj=d.chance(30),
        lst_alias=d.chance(20),
    )


def generate(d: Draw) -> Program:
    """Draw one program: 1-6 statements in `f`, a return, and 2-4 calls."""
    g = _Gen(d)
    scope = _Scope(tensors=["x", "y"], ints=["n"])
    body: list[str] = []
    for _ in range(d.int(1, 6)):
        body += g.statement(scope)
    body.append(g.returns(scope))
    first = _call(d, True)
    calls = [first] + [_call(d, False) for _ in range(d.int(1, 3))]
    return Program(
        body=tuple(body),
        global_writes=tuple(sorted(g.global_writes)),
        calls=tuple(calls),
        grad_mode=d.pick(["none", "nonleaf", "leaf"]),
        seed=d.int(0, 1000),
    )


def render(p: Program) -> str:
    """The program as module source: PRELUDE, `f`, and the driver `main(fn, record)`."""
    lines = [PRELUDE, "", "def f(x, y, n, lst, obj):"]
    if p.global_writes:
        lines.append("    global " + ", ".join(p.global_writes))
    lines += _indent(list(p.body))
    lines += ["", "", "def main(fn, record):",
              "    global " + ", ".join(REBOUND_GLOBALS)]
    rg = "False" if p.grad_mode == "none" else "True"
    for i, c in enumerate(p.calls):
        lines.append(f"    # call {i}")
        lines += ["    " + ch for ch in c.changes]
        lines.append(f"    g = torch.Generator().manual_seed({p.seed * 10 + i})")
        lines.append(f"    xb = torch.randn(4, 4, generator=g).requires_grad_({rg})")
        lines.append(f"    yb = torch.randn(4, 4, generator=g).requires_grad_({rg})")
        lines.append(f"    lb = [torch.randn(4, 4, generator=g) for _ in range({c.lst_len})]")
        if p.grad_mode == "nonleaf":
            lines.append("    x, y = xb * 1.0, yb * 1.0")
        else:
            lines.append("    x, y = xb, yb")
        if c.alias == "same":
            lines.append("    y = x")
        elif c.alias == "view":
            lines.append("    y = x.view(4, 4)")
        lines.append("    lst = list(lb) + [x]" if c.lst_alias else "    lst = list(lb)")
        lines.append(f"    o = {'Obj(0.75)' if c.fresh_obj else 'OBJ'}")
        lines.append(f"    with torch.set_grad_enabled({c.grad}):")
        lines.append(f"        record({i}, lambda: fn(x, y, {c.n}, lst, o), "
                     "{'x': x, 'y': y, 'lst': lst, 'obj': o}, [xb, yb])")
    return "\n".join(lines) + "\n"
