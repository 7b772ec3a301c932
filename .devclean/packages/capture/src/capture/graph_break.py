"""Why capture stops: the `Unsupported` error with the user's file, line and hints.

In: the construct that cannot be captured and where it is. Out: an exception that the
frame wrapper turns into an eager fallback (logged once) or, under `fullgraph=True`, raises.
"""

from __future__ import annotations

import enum
import linecache
import types
from dataclasses import dataclass, field


class GraphBreakKind(enum.Enum):
    """Families of unsupported constructs (used in messages and tests)."""

    DATA_DEPENDENT = "data-dependent control flow or value"
    UNSUPPORTED_CALL = "call to an unsupported callable"
    UNSUPPORTED_OPCODE = "unsupported bytecode instruction"
    UNSUPPORTED_OBJECT = "unsupported Python object or operation"
    EXCEPTION = "exception raised while tracing"
    DYNAMIC = "dynamic shapes"


@dataclass(frozen=True, slots=True)
class UserFrame:
    """A location in user code: file, line, function and the source line's text."""

    filename: str
    lineno: int
    function: str

    @property
    def text(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, in {self.function}\n    {self.text}'


# Shared hints, so that messages stay consistent.
HINT_DATA_DEPENDENT = (
    "Branching on a tensor's values needs the value at trace time; use torch.where / "
    "torch.cond-style code, or run this part eagerly (fullgraph=False)."
)
HINT_REPORT = "If this is common model code, it is a missing feature of capture: report it."
HINT_CALL = (
    "What to do: compiler.disable(fn) runs the function eagerly between graphs; "
    "compiler.allow_in_graph(fn) puts a tensor function of its arguments in the graph as one "
    "call; compiler.substitute_in_graph(fn) traces a Python replacement you write; or rewrite "
    "the code with torch operations."
)
HINT_EAGER = "With fullgraph=False the whole function runs eagerly instead."


@dataclass(slots=True)
class Unsupported(Exception):
    """A construct capture cannot put in a graph.

    Under `fullgraph=True` this propagates to the caller; otherwise the frame runs eagerly
    and the reason is logged once.
    """

    kind: GraphBreakKind
    explanation: str
    where: list[UserFrame] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    # (instruction index, visit count) in the root frame where it was raised, if there.
    break_at: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        Exception.__init__(self, self.explanation)

    def __str__(self) -> str:
        lines = [f"{self.kind.value}: {self.explanation}"]
        if self.where:
            lines.append("  (innermost user frame last)")
            for frame in self.where:
                lines.append("  " + str(frame).replace("\n", "\n  "))
        for hint in self.hints:
            lines.append(f"  hint: {hint}")
        return "\n".join(lines)

    @property
    def user_location(self) -> str:
        """`file:line` of the innermost frame (empty if unknown)."""
        if not self.where:
            return ""
        frame = self.where[-1]
        return f"{frame.filename}:{frame.lineno}"


def unsupported(kind: GraphBreakKind, explanation: str, *hints: str) -> Unsupported:
    """Build an `Unsupported`; the translator fills in `where` as it propagates."""
    default = [HINT_CALL, HINT_REPORT] if kind is GraphBreakKind.UNSUPPORTED_CALL else [HINT_REPORT]
    return Unsupported(kind, explanation, [], list(hints) or default)


class RaisedInTrace(Unsupported):
    """The traced program raised `exception` (a real exception object) at trace time.

    The translator unwinds to the innermost `try` that covers the raising instruction, as
    CPython would; with no handler in any traced frame it is an `Unsupported` like any other,
    and the frame runs eagerly, where the same exception is raised for real.
    """

    def __init__(self, exception: BaseException) -> None:
        Unsupported.__init__(
            self,
            GraphBreakKind.EXCEPTION,
            f"{type(exception).__name__}: {exception}",
            [],
            [HINT_EAGER],
        )
        self.exception = exception


def new_exception(cls: type[BaseException], args: tuple[object, ...]) -> BaseException:
    """`cls(*args)` for an exception class whose construction runs no Python code."""
    for name in ("__init__", "__new__"):
        if isinstance(getattr(cls, name, None), types.FunctionType):
            raise unsupported(
                GraphBreakKind.EXCEPTION,
                f"creating the exception {cls.__name__} (its {name} is Python code)",
            )
    return cls(*args)


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a captured graph."""

    def __init__(self, backend_name: str, inner: BaseException) -> None:
        super().__init__(
            f"backend {backend_name!r} raised {type(inner).__name__}: {inner}\n"
            "To run the graph eagerly instead, set the option suppress_errors: "
            "compiler.compile(..., options={'suppress_errors': True}), "
            "compiler.config.patch(suppress_errors=True) or env CAPTURE_SUPPRESS_ERRORS=1."
        )
        self.backend_name = backend_name
        self.inner = inner
