"""The state of compiling in this process: whether a frame is being traced (per thread), the
record each compile leaves (`CompileRecord`) and the blocks that collect them (`recording`).

In: set by `frame.CompiledFunction` around a trace and a backend call. Out: `is_compiling()`
for users and library code, `CompileRecord`s for tests and `explain`-style tools.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import guards
import torch

from capture.graph_break import Unsupported

#: Per thread: `compiling` (bool) while a frame is traced, `disabled` (int) the depth of
#: `run_disabled` calls, in which wrappers run their original function.
thread_state = threading.local()

_recorders: list[list[CompileRecord]] = []


def is_compiling() -> bool:
    """True while capture is tracing a frame."""
    return bool(getattr(thread_state, "compiling", False))


@dataclass
class CompileRecord:
    """What one compile produced (kept for tests, `explain`-style tools and the demo)."""

    graph: torch.fx.GraphModule | None
    guard_tree: guards.GuardTree
    code: types.CodeType | None
    capture_seconds: float
    unsupported: Unsupported | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def recording() -> Iterator[list[CompileRecord]]:
    """Collect the `CompileRecord` of every frame compiled inside the block (resume
    functions and compiled callees of graph breaks included), in compile order."""
    records: list[CompileRecord] = []
    _recorders.append(records)
    try:
        yield records
    finally:
        _recorders.remove(records)


def announce(record: CompileRecord) -> None:
    """Hand `record` to every `recording` block open now."""
    for records in _recorders:
        records.append(record)


class _QuietMetaFailures(logging.Filter):
    """Drops fake-tensor's "failed while attempting to run meta" traceback while capture
    traces: the op's error reaches the user from eager (`_user_error_probe`) instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (is_compiling() and str(record.msg).startswith("failed while attempting"))


logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QuietMetaFailures())
