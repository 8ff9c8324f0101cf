"""Code generation shared by the eager backends and the compiler (DESIGN.md, "Layers"): the
on-disk cache of built kernels, and ``c/`` (building and loading generated C). It knows dtypes,
not tensors, and imports nothing above ``_dtype``/``_device``."""
