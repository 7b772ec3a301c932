"""Guards for the globals that Python code run opaquely inside a graph reads.

A `torch.autograd.Function` subclass is one node of the captured graph (see
`autograd_specials`): its `forward` and `backward` are not traced by capture, but a backend
that traces to ATen runs them on fake tensors when it compiles and bakes what they read into
the compiled graph. A global they read (`return g * SCALE`) must therefore be guarded: the
global names in their code (and in the code of user functions they name, transitively) are
looked up now and guarded in their module's namespace: an immutable constant by value, a
module, class or function by identity, a missing name by its absence. A global holding a
mutable object (a list, a dict, a tensor, an instance) cannot be fixed by a guard on the
name: the call runs eagerly instead.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import TYPE_CHECKING

from guards.checks import is_guardable_constant
from guards.sources import ConstSource, ItemSource

from capture.graph_break import GraphBreakKind, unsupported
from capture.output_graph import GuardKind
from capture.values.wrap import is_library_module

if TYPE_CHECKING:
    from capture.interp.translator import Translator

_LOAD_GLOBAL = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _global_names(code: types.CodeType) -> Iterator[str]:
    import dis

    for ins in dis.get_instructions(code):
        if ins.opname in _LOAD_GLOBAL and isinstance(ins.argval, str):
            yield ins.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _code_of(obj: object) -> types.FunctionType | None:
    func = getattr(obj, "__func__", obj)
    return func if isinstance(func, types.FunctionType) else None


def guard_function_globals(tx: Translator, functions: list[object], what: str) -> None:
    """Guard every global that `functions` (and the user functions they name) read; raise
    unsupported (the call runs eagerly) for a global holding a mutable object. `what` names
    the call in that message."""
    seen: set[int] = set()
    pending = [f for f in (_code_of(obj) for obj in functions) if f is not None]
    while pending:
        fn = pending.pop()
        if id(fn) in seen or is_library_module(fn.__module__):
            continue
        seen.add(id(fn))
        namespace = fn.__globals__
        base = ConstSource.of(namespace, f"vars({namespace.get('__name__', '?')})")
        for name in sorted(set(_global_names(fn.__code__))):
            source = ItemSource(base, name)
            if name not in namespace:
                # NOTE: a builtin (or a NameError at run time, as in eager): no global may
                # come to shadow it
                tx.output.add_guard(source, GuardKind.KEY_ABSENT, name)
                continue
            value = namespace[name]
            if is_guardable_constant(value):
                tx.output.add_guard(source, GuardKind.CONST_EQ, value)
            elif isinstance(value, (types.ModuleType, type, types.FunctionType,
                                    types.BuiltinFunctionType, types.MethodType)):
                tx.output.add_guard(source, GuardKind.ID_MATCH, value)
                nested = _code_of(value)
                if nested is not None:
                    pending.append(nested)
            else:
                raise unsupported(
                    GraphBreakKind.UNSUPPORTED_CALL,
                    f"{what} reads the global {name!r} ({type(value).__name__}), which a "
                    "compiled graph would fix at its first call's value",
                )
