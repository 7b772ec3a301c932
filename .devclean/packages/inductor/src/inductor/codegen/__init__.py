"""Code generation: the ops protocol, the C++ kernel generator and the Python wrapper."""
