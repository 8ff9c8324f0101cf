"""``DataLoader(pin_memory=True)``: each batch's tensors copied into page-locked memory, so
that ``.to("cuda", non_blocking=True)`` copies them asynchronously."""

from __future__ import annotations

import collections.abc
import copy
import warnings

from ..._tensor import Tensor

NO_ACCELERATOR = ("'pin_memory' argument is set as true but no accelerator is found, then "
                  "device pinned memory won't be used.")


def pinning(loader) -> bool:
    """Whether ``loader``'s iterator pins its batches (warning when asked to without a GPU)."""
    if not loader.pin_memory:
        return False
    from ... import accelerator
    if not accelerator.is_available():
        warnings.warn(NO_ACCELERATOR, stacklevel=3)
        return False
    return True


def pin_memory(data):
    """``data`` with every tensor in it pinned (objects with a ``pin_memory`` method are asked
    to pin themselves); containers keep their types where they can be rebuilt."""
    if isinstance(data, Tensor) or hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                out = copy.copy(data)  # keeps a mapping's other attributes
                out.update(pinned)
                return out
            return type(data)(pinned)
        except TypeError:
            return pinned
    if isinstance(data, tuple):
        items = [pin_memory(v) for v in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, collections.abc.Sequence):
        items = [pin_memory(v) for v in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                out = copy.copy(data)
                for i, v in enumerate(items):
                    out[i] = v
                return out
            return type(data)(items)
        except TypeError:
            return items
    return data
