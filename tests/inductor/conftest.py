"""Inductor tests import their helpers from this folder and use a private kernel cache."""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("INDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                         "inductor-test-cache"))
