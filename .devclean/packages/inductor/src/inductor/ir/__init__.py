"""The loop-level IR: layouts, buffers, loop bodies, printer and verifier."""
