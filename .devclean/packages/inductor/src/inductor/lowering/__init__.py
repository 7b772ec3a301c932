"""Lowering of ATen FX graphs to the loop IR (one rule per op in a table)."""

from __future__ import annotations


def load_rules() -> None:
    """Import the modules that fill the lowering table."""
    from inductor.lowering import (  # noqa: F401
        extern,
        indexing,
        pointwise,
        pooling,
        random,
        reductions,
        scatter_zeros,
        views,
    )
