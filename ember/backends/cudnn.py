"""``ember.backends.cudnn``: PyTorch's cuDNN settings. ember uses no cuDNN (its CUDA
convolutions, pooling and normalisation are its own kernels), so ``is_available()`` is
False, as on PyTorch's CPU-only build; the flags are kept (programs set them at start-up) and
``allow_tf32`` is what ember's CUDA convolutions read at each call (backends/cuda/conv.py):
TF32 products while True (the default, as PyTorch's), IEEE float32 otherwise."""

from __future__ import annotations

enabled = True
benchmark = False
benchmark_limit = None
deterministic = False
allow_tf32 = True
fp32_precision = "none"


def is_available() -> bool:
    return False


def version():
    return None


def is_acceptable(tensor) -> bool:
    return False
