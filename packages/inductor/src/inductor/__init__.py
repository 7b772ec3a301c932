"""Lowering to a loop IR, fusion, and C++/OpenMP and Triton code generation."""

__version__ = "0.1.0"

__all__ = ["__version__"]
