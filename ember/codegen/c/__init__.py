"""C code generation: ``runtime`` finds the C compiler, builds sources through the cache and
loads them with ctypes."""
