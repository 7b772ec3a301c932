"""Lowering to a loop IR, fusion, and C++/OpenMP code generation for CPUs.

`compile_aten(gm, example_inputs)` compiles an ATen FX graph into a callable; the
`inductor` capture backend (inductor.backend) uses it for forward and backward graphs.
"""

from inductor import config
from inductor.config import list_mode_options, list_options
from inductor.pipeline import CompiledGraph, compile_aten

__version__ = "0.1.0"

__all__ = [
    "CompiledGraph",
    "__version__",
    "compile_aten",
    "config",
    "list_mode_options",
    "list_options",
]
