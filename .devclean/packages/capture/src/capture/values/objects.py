"""Objects: nn.Modules, other user objects (existing or created while tracing), `super()`
proxies, and context managers (grad mode, autocast)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from guards.sources import Source

from capture.graph_break import GraphBreakKind, unsupported
from capture.values.base import Value

if TYPE_CHECKING:
    from capture.bytecode.codegen import CodeBuilder


class ModuleValue(Value):
    """An existing `nn.Module` (guarded by identity); `path` names it for nn_module_stack."""

    __slots__ = ("module", "path")

    def __init__(self, module: torch.nn.Module, source: Source | None, path: str) -> None:
        super().__init__(source)
        self.module = module
        self.path = path

    def python_type(self) -> type:
        return type(self.module)

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_object(self.module)

    def describe(self) -> str:
        return f"{type(self.module).__name__} module at {self.path}"


class ObjectValue(Value):
    """A user object.

    Existing objects (`obj` set, usually with a source) read their attributes for real,
    with guards; attribute writes are recorded in `attrs` and replayed. Objects created while
    tracing have `obj=None`, a class `cls`, their attributes in `attrs`, and (for dict
    subclasses such as transformers' ModelOutput) dict items in `dict_items`.
    """

    __slots__ = ("attrs", "cls", "dict_items", "init_args", "obj")

    def __init__(
        self,
        obj: object | None,
        cls: type,
        source: Source | None = None,
    ) -> None:
        super().__init__(source)
        self.obj = obj
        self.cls = cls
        self.attrs: dict[str, Value] = {}
        self.dict_items: Any = None  # DictValue for dict subclasses created while tracing
        self.init_args: tuple[list[Value], dict[str, Value]] | None = None

    def python_type(self) -> type:
        return self.cls

    def is_new(self) -> bool:
        """Created while tracing (not reachable from the frame)."""
        return self.obj is None

    def reconstruct(self, cg: CodeBuilder) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        elif self.obj is not None:
            # An existing object reached without a source (e.g. another module's global).
            cg.load_object(self.obj)
        else:
            cg.rebuild_new_object(self)

    def describe(self) -> str:
        return f"{self.cls.__name__} object" + (" (new)" if self.obj is None else "")


class SuperValue(Value):
    """`super(cls, obj)`: attribute lookups start after `cls` in obj's MRO."""

    __slots__ = ("cls", "obj")

    def __init__(self, cls: type, obj: Value) -> None:
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def describe(self) -> str:
        return f"super({self.cls.__name__})"


class ContextValue(Value):
    """A context manager the interpreter understands.

    `kind` is "grad" (target grad mode in `args[0]`), "autocast" (args: device_type,
    dtype, enabled, cache_enabled), or "null" (does nothing).
    `state` holds what `__enter__` saved for `__exit__`.
    """

    __slots__ = ("args", "kind", "state")

    def __init__(self, kind: str, args: tuple[object, ...]) -> None:
        super().__init__(None)
        self.kind = kind
        self.args = args
        self.state: object = None

    def reconstruct(self, cg: CodeBuilder) -> None:
        raise unsupported(
            GraphBreakKind.UNSUPPORTED_OBJECT, f"returning the context manager {self.kind}"
        )

    def describe(self) -> str:
        return f"context {self.kind}{self.args}"
