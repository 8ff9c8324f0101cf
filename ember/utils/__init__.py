"""ember.utils: data loading, file formats, activation checkpointing."""

from . import checkpoint, data, safetensors  # noqa: F401
