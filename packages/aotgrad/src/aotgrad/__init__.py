"""ATen-level tracing, functionalization, joint forward/backward graphs and partitioners."""

__version__ = "0.1.0"

__all__ = ["__version__"]
