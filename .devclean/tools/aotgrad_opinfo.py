"""Run ../shared/tools/opinfo_conformance.py through aotgrad directly (no capture).

The conformance tool's `--compiler ours` imports a package named `compiler` and calls
`compiler.compile(fn, backend=..., fullgraph=True, dynamic=False)` and `compiler.reset()`.
Until the project's facade and capture can compile OpInfo lambdas, this script puts a
stand-in `compiler` package first on PYTHONPATH (for the tool's worker processes too) whose
`compile` is `aotgrad.aot_function(fn, <the backend's ATen compilers>)`.

Backends: aot_eager (no decompositions, default partitioner), aot_eager_core (the ATen graphs
inductor receives: core decompositions, min-cut partitioner, run as they are), inductor.

Usage (from the repository root; every argument goes to the conformance tool):
    .venv/bin/python tools/aotgrad_opinfo.py --backend aot_eager --ops '^(add|sin)$' [--grad]
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOL = ROOT.parent / "shared" / "tools" / "opinfo_conformance.py"

SHIM = '''
"""Stand-in `compiler` facade for the conformance tool: aotgrad without capture."""
from aotgrad import aot_function
from aotgrad.backend import run_graph_as_is


def _compilers(backend):
    if backend == "aot_eager":
        return run_graph_as_is, "default", "none"
    if backend == "aot_eager_core":  # what inductor receives: core decompositions, min-cut
        return run_graph_as_is, "min_cut", "core"
    if backend == "inductor":
        import inductor
        return inductor.compile_aten, "min_cut", None
    raise ValueError(f"the aotgrad stand-in supports aot_eager, aot_eager_core and inductor, "
                     f"not {backend!r}")


def compile(fn, backend="aot_eager", fullgraph=True, dynamic=False):
    compiler, partitioner, decompositions = _compilers(backend)
    return aot_function(fn, compiler, compiler, partition_fn=partitioner,
                        decompositions=decompositions)


def reset():
    return None
'''


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="aotgrad-opinfo-") as tmp:
        package = pathlib.Path(tmp) / "compiler"
        package.mkdir()
        (package / "__init__.py").write_text(SHIM)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")]))
        args = [sys.executable, str(TOOL), "--compiler", "ours", *argv]
        return subprocess.run(args, check=False, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
