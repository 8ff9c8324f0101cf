"""The state behind ``ember.backends.cuda``'s settings, below the kernels that read it."""

from __future__ import annotations

STATE = {"precision": "highest", "fp32_precision": "none"}


def allow_tf32() -> bool:
    """Whether float32 products may use TensorFloat-32 (``matmul.allow_tf32``)."""
    return STATE["precision"] != "highest"
