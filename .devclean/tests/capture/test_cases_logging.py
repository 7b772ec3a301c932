"""Cases: logging. One switch (`capture.config.verbose`, env `CAPTURE_VERBOSE=1`) prints each
compiled frame's FX graph, guards, and original and transformed bytecode; a frame that falls
back to eager logs its reason once; everything goes through standard `logging` loggers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import capture
import torch
from _differential import CountingBackend, config_patch, t


def compute(x, y):
    return torch.sin(x) * y + 1


def test_verbose_prints_graph_guards_and_bytecode(capsys):
    capture.reset()
    compiled = capture.optimize(compute, backend=CountingBackend(), fullgraph=True)
    with config_patch(verbose=True):
        compiled(t(4), t(4, seed=1))
    out = capsys.readouterr().out
    assert "sin" in out, "the FX graph"
    assert "L['x']" in out, "the guards"
    assert "LOAD_FAST" in out or "LOAD_GLOBAL" in out, "the bytecode"
    assert "original" in out.lower() and "transformed" in out.lower()


def test_not_verbose_by_default(capsys):
    capture.reset()
    compiled = capture.optimize(compute, backend=CountingBackend(), fullgraph=True)
    compiled(t(4), t(4, seed=1))
    assert "LOAD_FAST" not in capsys.readouterr().out


def test_environment_variable_turns_on_printing():
    script = (
        "import torch, capture\n"
        "f = capture.optimize(lambda x: torch.cos(x) + 2, backend='eager', fullgraph=True)\n"
        "f(torch.ones(3))\n"
    )
    env = dict(os.environ, CAPTURE_VERBOSE="1")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert "cos" in text and "L['x']" in text and "LOAD_FAST" in text


def _breaks(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_fallback_reason_logged_once(caplog):
    caplog.set_level(logging.DEBUG, logger="capture")
    capture.reset()
    compiled = capture.optimize(_breaks, backend=CountingBackend(), fullgraph=False)
    for seed in range(3):
        compiled(t(4, seed=seed))
    reasons = [r for r in caplog.records
               if r.levelno >= logging.INFO and "_breaks" in r.getMessage()]
    assert len(reasons) == 1, [r.getMessage() for r in reasons]
    assert "test_cases_logging.py" in reasons[0].getMessage()


def test_loggers_are_standard_and_under_capture(caplog):
    caplog.set_level(logging.DEBUG, logger="capture")
    capture.reset()
    compiled = capture.optimize(compute, backend=CountingBackend(), fullgraph=True)
    compiled(t(4), t(4, seed=1))
    names = {r.name for r in caplog.records}
    assert names, "compiling a frame logs at DEBUG"
    assert all(n == "capture" or n.startswith("capture.") for n in names), names
