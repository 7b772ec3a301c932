"""The `compiler` facade: the public API of the compiler stack.

    import compiler
    model = compiler.compile(model)          # or @compiler.compile on a function
    y = model(x)                             # first call captures + compiles; later calls hit the cache

Everything here delegates: capture (`capture`) owns frame capture, guards and the backend
registry; the `inductor` package owns the options and modes; each package owns its config,
reached through `compiler.config`.
"""

from compiler import frame_cache as _frame_cache
from compiler.api import compile as compile
from compiler.api import disable as disable
from compiler.api import is_compiling as is_compiling
from compiler.api import reset as reset
from compiler.backends import Backend as Backend
from compiler.backends import list_backends as list_backends
from compiler.backends import lookup_backend as lookup_backend
from compiler.backends import register_backend as register_backend
from compiler.config import config as config
from compiler.dynamic import mark_dynamic as mark_dynamic
from compiler.dynamic import mark_static as mark_static
from compiler.dynamic import maybe_mark_dynamic as maybe_mark_dynamic
from compiler.explain import ExplainOutput as ExplainOutput
from compiler.explain import GraphBreakInfo as GraphBreakInfo
from compiler.explain import explain as explain
from compiler.options import list_mode_options as list_mode_options
from compiler.options import list_options as list_options
from compiler.precompile import PrecompiledGuardError as PrecompiledGuardError
from compiler.precompile import PrecompiledModule as PrecompiledModule
from compiler.precompile import load_cache_artifacts as load_cache_artifacts
from compiler.precompile import load_precompiled as load_precompiled
from compiler.precompile import precompile as precompile
from compiler.precompile import save_cache_artifacts as save_cache_artifacts
from compiler.tracing import allow_in_graph as allow_in_graph
from compiler.tracing import assume_constant_result as assume_constant_result
from compiler.tracing import disallow_in_graph as disallow_in_graph
from compiler.tracing import graph_break as graph_break
from compiler.tracing import substitute_in_graph as substitute_in_graph

_frame_cache.install()  # NOTE: whole compiled frames on disk (warm starts skip capture)

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "ExplainOutput",
    "GraphBreakInfo",
    "PrecompiledGuardError",
    "PrecompiledModule",
    "__version__",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "graph_break",
    "is_compiling",
    "list_backends",
    "list_mode_options",
    "list_options",
    "load_cache_artifacts",
    "load_precompiled",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "precompile",
    "register_backend",
    "reset",
    "save_cache_artifacts",
    "substitute_in_graph",
]
