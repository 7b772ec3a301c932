"""Argument checks shared by the facade: type errors that name the parameter and the type
received, and "did you mean" suggestions for unknown names. No compiler behaviour lives here."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def type_name(value: object) -> str:
    """The qualified name of `value`'s type, as shown in error messages."""
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def expect(function: str, parameter: str, value: object, expected: str, ok: bool) -> None:
    """Raise TypeError naming `parameter` of `function` when `ok` is False."""
    if not ok:
        raise TypeError(
            f"{function}() argument {parameter!r} must be {expected}, "
            f"got {type_name(value)} ({value!r:.80})"
        )


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    """`unknown <kind> 'name'; did you mean ...? valid <kind>s: ...` with close matches."""
    known = sorted(valid)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}.{hint} Valid {kind}s: {', '.join(known) or '(none)'}"
