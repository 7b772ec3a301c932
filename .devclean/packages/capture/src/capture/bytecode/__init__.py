"""Bytecode layer: decode code objects into instructions and assemble new code objects.

`versions` is the only module in `capture` that branches on the Python version.
"""
