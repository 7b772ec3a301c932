"""Inductor tests import their helpers from this folder and use a private kernel cache."""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("INDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                         "inductor-test-cache"))
# NOTE: tests compile many tiny graphs; spawning compile workers for each would dominate a
# GPU run (test_triton_workers.py turns them on where it tests them)
os.environ.setdefault("INDUCTOR_TRITON_COMPILE_WORKERS", "0")
