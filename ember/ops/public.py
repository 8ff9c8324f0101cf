"""Public functions that are compositions rather than table entries (``broadcast_shapes`` ...)."""

from __future__ import annotations

from .complex import is_conj, resolve_conj  # noqa: F401
from .shape import broadcast_to  # noqa: F401

__all__ = ["broadcast_to", "is_conj", "resolve_conj"]
