"""Guard tree evaluator: decides fast whether a compiled entry is valid, and says why not."""

__version__ = "0.1.0"

__all__ = ["__version__"]
