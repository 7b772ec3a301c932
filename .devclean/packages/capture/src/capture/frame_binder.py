"""Argument binding for the wrapper's hot path: one generated function per code object that
takes the user's function's signature and returns the frame's locals by name.

In: a Python function. Out: `bind(*args, **kwargs) -> {name: value}` (its free variables
included), the `L` that guards check and tracing starts from.
"""

from __future__ import annotations

import inspect
import keyword
import types
from collections.abc import Callable
from typing import Any


def make_binder(fn: types.FunctionType) -> Callable[..., dict[str, object]]:
    """A function with `fn`'s signature that returns its arguments (and free variables) by name."""
    code = fn.__code__
    nargs = code.co_argcount
    nposonly = code.co_posonlyargcount
    nkwonly = code.co_kwonlyargcount
    # NOTE: a resume function's arguments carry the frame's locals, whose names need not be
    # identifiers (pytest's assertion rewriting binds `@py_assert0`): those get stand-ins.
    spelled = {
        name: name if name.isidentifier() and not keyword.iskeyword(name) else f"_arg{i}"
        for i, name in enumerate(code.co_varnames)
    }
    names = list(code.co_varnames[: nargs + nkwonly])
    params = []
    for i, name in enumerate(names[:nargs]):
        params.append(spelled[name])
        if i + 1 == nposonly:
            params.append("/")
    index = nargs + nkwonly
    extra: list[str] = []
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + spelled[code.co_varnames[index]])
        extra.append(code.co_varnames[index])
        index += 1
    elif nkwonly:
        params.append("*")
    params.extend(spelled[name] for name in names[nargs:])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + spelled[code.co_varnames[index]])
        extra.append(code.co_varnames[index])
    entries = [f"{n!r}: {spelled[n]}" for n in names + extra]
    for i, free in enumerate(code.co_freevars):
        entries.append(f"{free!r}: _cell{i}.cell_contents")
    src = f"def _bind({', '.join(params)}):\n    return {{{', '.join(entries)}}}\n"
    namespace: dict[str, Any] = {}
    for i, cell in enumerate(fn.__closure__ or ()):
        namespace[f"_cell{i}"] = cell
    exec(compile(src, f"<capture binder {code.co_name}>", "exec"), namespace)  # noqa: S102
    binder: Any = namespace["_bind"]
    # NOTE: a call with wrong arguments raises the TypeError eager raises, naming the
    # user's function ("f() takes 1 positional argument but 2 were given").
    binder.__name__ = fn.__name__
    binder.__qualname__ = fn.__qualname__
    binder.__defaults__ = fn.__defaults__
    binder.__kwdefaults__ = fn.__kwdefaults__
    return binder  # type: ignore[no-any-return]  # built by exec
