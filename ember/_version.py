"""ember's version (``ember.__version__``), in the lowest layer: built kernels are cached per
version."""

__version__ = "0.1.0"
