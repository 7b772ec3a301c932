"""Time every line of the generated wrappers of one zoo model (helper, not a benchmark).

    python tools/bench/_profile_wrapper.py MODEL infer|train [ROWS] [--source]

ROWS lines per graph, slowest first (default 12); --source also prints the kernels' C++.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import zoo


def instrument(source: str) -> tuple[str, list[str]]:
    out: list[str] = []
    labels: list[str] = []
    for line in source.splitlines():
        stripped = line.strip()
        if line.startswith("def call("):
            out += [line, "    _s = _pc()"]
            continue
        if stripped.startswith("return"):
            out.append(line)
            continue
        out.append(line)
        labels.append(stripped[:110])
        out.append(f"    _t[{len(labels) - 1}] += _pc() - _s; _s = _pc()")
    return "\n".join(out) + "\n", labels


def main(name: str, train: bool, rows: int, source: bool) -> None:
    import aotgrad
    from inductor.decompositions import decomposition_table
    from inductor.pipeline import CompiledGraph, compile_aten

    graphs: list[tuple[CompiledGraph, list[str], list[float]]] = []

    def comp(gm: Any, ex: Any) -> Any:
        c = compile_aten(gm, ex)
        src, labels = instrument(c.wrapper_source)
        times = [0.0] * len(labels)
        ns = dict(c.call.__globals__)
        ns.update(_pc=time.perf_counter, _t=times)
        exec(src, ns)  # noqa: S102 - instrumented copy of our own wrapper
        graphs.append((c, labels, times))
        return ns["call"]

    m, inp, params = zoo.prepared(name, train)
    cm = aotgrad.aot_module(m, comp, comp, partition_fn="min_cut",
                            decompositions=decomposition_table())
    step = zoo._step(cm, params, inp, train)
    for _ in range(3):
        step()
    for _, _, times in graphs:
        times[:] = [0.0] * len(times)
    n = 50
    for _ in range(n):
        step()
    for g, (_, labels, times) in enumerate(graphs):
        total = sum(times) / n * 1e3
        print(f"graph{g}: {total:.3f} ms in wrapper lines")
        ranked = sorted(zip(times, labels), reverse=True)[:rows]
        for t, label in ranked:
            print(f"  {t / n * 1e3:8.3f} ms  {label}")
    if source:
        for c, _, _ in graphs:
            print(c.output_code())


if __name__ == "__main__":
    rest = [a for a in sys.argv[3:] if a != "--source"]
    main(sys.argv[1], sys.argv[2] == "train", int(rest[0]) if rest else 12, "--source" in sys.argv)
