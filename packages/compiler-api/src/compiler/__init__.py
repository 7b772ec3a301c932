"""The `compiler` facade: compile, reset, disable, explain and friends."""

__version__ = "0.1.0"

__all__ = ["__version__"]
