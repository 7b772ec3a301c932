"""Eager vs ours on single ops of the attention block's backward (helper, not a benchmark):
medians of 300 calls after warm-up, inference mode, one process.

    python tools/bench/_micro.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import compiler
import torch

aten = torch.ops.aten


def _median_us(fn: Callable[[], Any], n: int = 300) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _cases() -> dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]]:
    x = torch.randn(4, 128, 1024)
    g = torch.randn(4, 128, 1024)
    h = torch.randn(4, 128, 4, 64)
    t = torch.randn(4, 4, 128, 64)
    a = torch.randn(512, 1024)
    w = torch.randn(1024, 256)
    return {
        "gelu_backward": (lambda x, g: aten.gelu_backward(g, x), (x, g)),
        "gelu+gelu_backward": (lambda x, g: (aten.gelu(x), aten.gelu_backward(g, x)), (x, g)),
        "gelu": (lambda x: aten.gelu(x), (x,)),
        "permute_copy": (lambda h: h.permute(0, 2, 1, 3).contiguous(), (h,)),
        "cat_transposed": (lambda t, h: torch.cat(
            [t.transpose(1, 2).reshape(4, 128, 256), t.permute(0, 2, 3, 1).reshape(4, 128, 256),
             h.reshape(4, 128, 256)], 2), (t, h)),
        "mm_after_kernel": (lambda a, w: (a * 2) @ w, (a, w)),
        "exp": (lambda x: torch.exp(x), (x,)),
        "erf": (lambda x: torch.erf(x), (x,)),
        "add": (lambda x, g: x + g, (x, g)),
    }


def main() -> None:
    print(f"torch threads {torch.get_num_threads()}")
    for name, (fn, args) in _cases().items():
        compiler.reset()
        ours = compiler.compile(fn, backend="inductor", fullgraph=True)
        with torch.no_grad():
            torch.testing.assert_close(ours(*args), fn(*args), atol=1e-4, rtol=1e-4)
            # NOTE: each lambda is timed before the loop moves on, so late binding is harmless.
            e = _median_us(lambda: fn(*args))  # noqa: B023
            o = _median_us(lambda: ours(*args))  # noqa: B023
        print(f"{name:22s} eager {e:8.1f} us  ours {o:8.1f} us  ours/eager {o / e:5.2f}")


if __name__ == "__main__":
    main()
