"""Capture's loggers: one per topic, under the `capture` logger.

`capture.config.options.verbose` (env `CAPTURE_VERBOSE=1`) prints graphs, guards and bytecode.
"""

from __future__ import annotations

import logging

log = logging.getLogger("capture")
graph_log = logging.getLogger("capture.graph")
guards_log = logging.getLogger("capture.guards")
bytecode_log = logging.getLogger("capture.bytecode")
recompile_log = logging.getLogger("capture.recompiles")
graph_break_log = logging.getLogger("capture.graph_breaks")


def verbose_print(topic: str, marker: str, text: str) -> None:
    """Log `text` at INFO on the topic logger; print it too when `config.verbose` is set."""
    from capture import config

    logger = logging.getLogger(f"capture.{topic}")
    message = f"[{marker}] {topic}:\n{text}"
    if config.options.verbose:
        print(message, flush=True)
    logger.debug(message)
