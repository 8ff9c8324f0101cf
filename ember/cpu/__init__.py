"""``ember.cpu``: the CPU device namespace; ``ember.cpu.amp`` holds PyTorch's deprecated
per-device spellings of ``ember.amp``."""

from . import amp  # noqa: F401
