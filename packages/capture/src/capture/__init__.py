"""Bytecode capture: a symbolic CPython bytecode interpreter producing FX graphs, guards and resume functions."""

__version__ = "0.1.0"

__all__ = ["__version__"]
