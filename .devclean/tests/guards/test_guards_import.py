"""`import guards` must not import torch (torch is needed only for tensor guards)."""

from __future__ import annotations

import subprocess
import sys


def test_import_guards_does_not_import_torch() -> None:
    code = (
        "import sys, guards\n"
        "from guards import GuardBuilder, LocalSource, EqualsMatch, compile_guard, explain\n"
        "b = GuardBuilder(); b.add(LocalSource('n'), EqualsMatch(3)); t = b.build()\n"
        "assert compile_guard(t).fn({'n': 3}, {}) is True\n"
        "assert explain(t, {'n': 4}, {}) == \"L['n'] == 3 failed: got 4\"\n"
        "import guards.native\n"
        "print('torch' in sys.modules, guards.native._tried)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # NOTE: nor was the native checker loaded
