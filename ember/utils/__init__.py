"""ember.utils: data loading, file formats, activation checkpointing, flop counting."""

from . import checkpoint, data, flop_counter, safetensors  # noqa: F401
