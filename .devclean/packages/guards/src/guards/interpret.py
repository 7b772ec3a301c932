"""The reference evaluator: walks a GuardTree and returns the first failure, in words.

In: a GuardTree and a call's (L, G). Out: None if every check holds, else a GuardFailure.
Slow and simple on purpose; the generated function (`codegen.py`) must always agree with it
on pass/fail (tests/guards/test_guards_agreement.py checks that with random trees).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guards.checks import Check
from guards.reasons import explain_check
from guards.sources import GlobalSource, Source
from guards.tree import GuardNode, GuardTree


@dataclass(frozen=True, slots=True)
class GuardFailure:
    """The first check that failed: where (`source`, None for root checks), which check,
    and `reason`, the message for recompile logs."""

    source: Source | None
    check: Check | None
    reason: str

    def __str__(self) -> str:
        return self.reason


def _error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def interpret(tree: GuardTree, L: dict[str, object], G: dict[str, object]) -> GuardFailure | None:
    """Evaluate `tree` on (L, G); None if it passes, else the first failure.

    A source that cannot be read (missing attribute, index out of range, any exception)
    fails the guard with `could not read <source>: <error>`; it never raises.
    """
    env: dict[str, Any] = {}
    for check in tree.root_checks:
        failure = _run_check(check, None, None, "", env)
        if failure is not None:
            return failure
    for node in tree.children:
        failure = _visit(node, L, G, env)
        if failure is not None:
            return failure
    return None


def _visit(node: GuardNode, base: object, G: dict[str, object],
           env: dict[str, Any]) -> GuardFailure | None:
    source = node.source
    if isinstance(source, GlobalSource):
        base = G
    try:
        value = source.fetch(base)
    except Exception as exc:  # noqa: BLE001  # any failure to read fails the guard
        return GuardFailure(source, None, f"could not read {source.name()}: {_error_text(exc)}")
    subject = source.name()
    for check in node.checks:
        failure = _run_check(check, value, source, subject, env)
        if failure is not None:
            return failure
    for child in node.children:
        failure = _visit(child, value, G, env)
        if failure is not None:
            return failure
    return None


def _run_check(check: Check, value: object, source: Source | None, subject: str,
               env: dict[str, Any]) -> GuardFailure | None:
    try:
        reason = explain_check(check, value, subject, env)
    except Exception as exc:  # noqa: BLE001  # a check that raises has failed
        reason = f"{check.describe(subject)} raised {_error_text(exc)}"
    return None if reason is None else GuardFailure(source, check, reason)


def explain(tree: GuardTree, L: dict[str, object], G: dict[str, object]) -> str | None:
    """The first failure's reason as text, or None if the guard passes."""
    failure = interpret(tree, L, G)
    return None if failure is None else failure.reason

