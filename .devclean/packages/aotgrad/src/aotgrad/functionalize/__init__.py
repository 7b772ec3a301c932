"""Our own functionalization: mutation and aliasing removal over traced ATen graphs."""

from aotgrad.functionalize.mutations import (
    FunctionalGraph,
    FunctionalizationError,
    OutputSpec,
    assert_functional,
    functionalize,
)

__all__ = [
    "FunctionalGraph",
    "FunctionalizationError",
    "OutputSpec",
    "assert_functional",
    "functionalize",
]
