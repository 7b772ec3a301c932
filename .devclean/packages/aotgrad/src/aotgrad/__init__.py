"""ATen-level tracing, functionalization, joint forward/backward graphs and partitioners.

`aot_function` / `aot_module` compile a function or module ahead of autograd with given
ATen-graph compilers; `make_backend` turns such compilers into a capture backend, and
`aot_eager` is that backend with the ATen graphs run as they are.
"""

from aotgrad import config as config
from aotgrad.api import AotCompiled as AotCompiled
from aotgrad.api import aot_function as aot_function
from aotgrad.api import aot_module as aot_module
from aotgrad.backend import aot_eager as aot_eager
from aotgrad.backend import make_backend as make_backend
from aotgrad.functionalize import assert_functional as assert_functional
from aotgrad.functionalize import functionalize as functionalize
from aotgrad.joint import JointGraph as JointGraph
from aotgrad.joint import build_joint as build_joint
from aotgrad.trace import TraceError as TraceError

__version__ = "0.1.0"

__all__ = [
    "AotCompiled",
    "JointGraph",
    "TraceError",
    "__version__",
    "aot_eager",
    "aot_function",
    "aot_module",
    "assert_functional",
    "build_joint",
    "config",
    "functionalize",
    "make_backend",
]
