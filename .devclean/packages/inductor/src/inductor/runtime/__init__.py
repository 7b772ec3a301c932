"""Runtime support: building and caching kernel libraries, loading them with ctypes."""
