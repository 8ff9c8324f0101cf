"""``.safetensors`` files through the ``safetensors`` package (an optional dependency)."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, _wrap


def _package():
    try:
        import safetensors.numpy as st
    except ImportError:
        raise ImportError("reading and writing .safetensors files needs the `safetensors` "
                          "package: pip install safetensors") from None
    return st


def save_file(tensors: dict[str, Tensor], filename, metadata: dict[str, str] | None = None):
    """Write a dict of tensors (bfloat16 included) to a .safetensors file."""
    arrays = {}
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"save_file: {name!r} is a {type(t).__name__}, not a Tensor")
        arrays[name] = np.ascontiguousarray(t.detach()._data)
    _package().save_file(arrays, str(filename), metadata=metadata)


def load_file(filename) -> dict[str, Tensor]:
    """Read every tensor of a .safetensors file."""
    return {name: _wrap(a, D.from_np(a.dtype))
            for name, a in _package().load_file(str(filename)).items()}
