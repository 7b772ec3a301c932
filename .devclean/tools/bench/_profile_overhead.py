"""Where a compiled training step spends its time (helper for zoo.py, not a benchmark)."""

from __future__ import annotations

import sys
import time
from typing import Any

import zoo


def main(name: str, train: bool) -> None:
    import aotgrad
    from inductor.decompositions import decomposition_table
    from inductor.pipeline import compile_aten

    spent: dict[str, float] = {}

    def comp(gm: Any, ex: Any) -> Any:
        c = compile_aten(gm, ex)
        key = f"graph{len(spent)}"
        spent[key] = 0.0

        def timed(*args: Any) -> Any:
            t0 = time.perf_counter()
            out = c(*args)
            spent[key] += time.perf_counter() - t0
            return out

        return timed

    m, inp, params = zoo.prepared(name, train)
    cm = aotgrad.aot_module(m, comp, comp, partition_fn="min_cut",
                            decompositions=decomposition_table())
    step = zoo._step(cm, params, inp, train)
    estep = zoo._step(m, params, inp, train)
    for _ in range(3):
        step()
    for k in spent:
        spent[k] = 0.0
    n = 50
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    total = (time.perf_counter() - t0) / n
    e = zoo._median_time(estep)
    print(f"{name} {'train' if train else 'infer'}: eager {e*1e3:.3f} ms, ours {total*1e3:.3f} ms;"
          + "".join(f" {k} {v / n * 1e3:.3f} ms" for k, v in spent.items()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "train")
