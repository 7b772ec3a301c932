"""Callables built or bound during tracing: functions made by MAKE_FUNCTION, bound
methods, functools.partial objects, and closure cells."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from guards.sources import Source

from capture.graph_break import GraphBreakKind, unsupported
from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder


class CellValue(Value):
    """A closure cell; `contents` is None while the cell is empty."""

    __slots__ = ("contents",)

    def __init__(self, contents: Value | None = None, source: Source | None = None) -> None:
        super().__init__(source)
        self.contents = contents

    def describe(self) -> str:
        return f"cell({self.contents!r})"


class FunctionValue(Value):
    """A Python function created while tracing (lambda, nested def, comprehension)."""

    __slots__ = ("closure", "code", "defaults", "globals", "kwdefaults", "name", "qualname")

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, object],
        name: str,
        defaults: tuple[Value, ...] = (),
        kwdefaults: dict[str, Value] | None = None,
        closure: tuple[CellValue, ...] = (),
    ) -> None:
        super().__init__(None)
        self.code = code
        self.globals = f_globals
        self.name = name
        self.qualname = name
        self.defaults = defaults
        self.kwdefaults = kwdefaults or {}
        self.closure = closure

    def python_type(self) -> type:
        return types.FunctionType

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.closure:
            raise unsupported(
                GraphBreakKind.UNSUPPORTED_OBJECT,
                f"returning the closure {self.name!r} created inside the compiled function",
            )
        for default in self.defaults:
            cg.reconstruct(default)
        cg.make_function(self.code, self.globals, len(self.defaults))

    def describe(self) -> str:
        return f"function {self.name}"


class MethodValue(Value):
    """`func` bound to `self_value` (a method of a user object, module or class)."""

    __slots__ = ("func", "self_value")

    def __init__(self, self_value: Value, func: Value, source: Source | None = None) -> None:
        super().__init__(source)
        self.self_value = self_value
        self.func = func

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.func.describe()} of {self.self_value.describe()}"


class PartialValue(Value):
    """`functools.partial(func, *args, **kwargs)` created or read during tracing."""

    __slots__ = ("args", "func", "kwargs")

    def __init__(
        self,
        func: Value,
        args: list[Value],
        kwargs: dict[str, Value],
        source: Source | None = None,
    ) -> None:
        super().__init__(source)
        self.func = func
        self.args = args
        self.kwargs = kwargs

    def python_type(self) -> type:
        import functools

        return functools.partial

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        import functools

        cg.load_object(functools.partial)
        cg.reconstruct(self.func)
        for arg in self.args:
            cg.reconstruct(arg)
        for value in self.kwargs.values():
            cg.reconstruct(value)
        cg.call_function_kw(1 + len(self.args) + len(self.kwargs), tuple(self.kwargs))

    def describe(self) -> str:
        return f"partial({self.func.describe()})"
