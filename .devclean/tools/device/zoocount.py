"""The GPU zoo (`zoo.py`) with counters: after each of our cold compiles, how many Triton
kernels the main process compiled itself (cache hits apart) and the time in our compile
workers; inductor's INFO log (e.g. a kernel not compiled in a worker) goes to stderr.
Usage (device box, after `source tools/device/install.sh`, from tools/bench):

    python3 -P ../device/zoocount.py --device cuda --suite gpu --no-train --models resnet50
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import zoo
from coldprof import _counts

logging.basicConfig(level=logging.WARNING)
logging.getLogger("inductor").setLevel(logging.INFO)

_ours = zoo._ours


def _counted(model: Any, path: str) -> Any:
    compiled = _ours(model, path)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = compiled(*args, **kwargs)
        print(f"  [counts after a call of ours: {_counts.take()}]")
        return out

    return call


zoo._ours = _counted  # type: ignore[assignment]

if __name__ == "__main__":
    sys.exit(zoo.main(sys.argv[1:]))
