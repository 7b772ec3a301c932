"""Errors of building kernel libraries (raised by `cpp_build`, caught by `pipeline`)."""

from __future__ import annotations


class BuildError(RuntimeError):
    """A kernel library could not be built or loaded."""


class CompilerUnusable(BuildError):
    """The configured C++ compiler is missing or does not run: no kernel of any graph can
    be built (unlike a compile error in one kernel), so no fallback strategy helps."""
