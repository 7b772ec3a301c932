"""IR verifier: structural checks run under `config.options.verify_ir` and in tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy  # type: ignore[import-untyped]  # NOTE: sympy ships no type hints

from inductor.ir.nodes import ComputedBuffer, ExternKernel

if TYPE_CHECKING:
    from inductor.lowering.context import LoweringContext


class IRVerificationError(AssertionError):
    pass


def verify(ctx: LoweringContext, kernels: list[ComputedBuffer | ExternKernel]) -> None:
    defined = set(ctx.input_names) | set(ctx.constants)
    for kern in kernels:
        if isinstance(kern, ExternKernel):
            for r in kern.reads:
                _check(r in defined, f"extern {kern.name} reads {r} before it is written")
            defined.update(o.name for o in kern.outputs)
            continue
        body = kern.body
        _check(body is not None, f"{kern.name} has no body")
        assert body is not None
        allowed = set(body.index_vars) | set(body.reduce_vars)
        writes = body.writes()
        _check(len(writes) == 1 and writes[0][0] == kern.name,
               f"{kern.name} must store exactly once into itself, stores {writes}")
        for i, op in enumerate(body.ops):
            for a in op.args:
                if hasattr(a, "id") and hasattr(a, "dtype"):
                    _check(a.id < i, f"{kern.name}: op {i} uses tmp{a.id} before definition")
                if isinstance(a, sympy.Expr):
                    for s in a.free_symbols:
                        _check(s in allowed or str(s).startswith("tmp"),
                               f"{kern.name}: op {i} uses unknown index symbol {s}")
        for name, _ in body.reads():
            _check(name in defined, f"{kern.name} reads {name} before it is written")
        reds = [op for op in body.ops if op.kind == "reduction"]
        _check(len(reds) <= 1, f"{kern.name} has {len(reds)} reductions (at most 1)")
        _check(bool(reds) == bool(body.reduce_vars) or not body.reduce_vars or bool(reds),
               f"{kern.name}: reduction variables without a reduction")
        defined.add(kern.name)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise IRVerificationError(message)
