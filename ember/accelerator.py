"""``ember.accelerator``: the current accelerator (PyTorch 2.6+'s device-generic API). CUDA is
the only accelerator ember will have; ``ember.cuda`` says whether it is there."""

from __future__ import annotations

from . import cuda
from ._device import device

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> device | None:
    """The accelerator's device type (``device(type='cuda')``), or None when there is none."""
    return device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count()


def current_device_index() -> int:
    if not cuda.is_available():
        raise RuntimeError(_NONE)
    return cuda.current_device()


def set_device_index(device) -> None:
    if not cuda.is_available():
        raise RuntimeError(_NONE)
    cuda.set_device(device)


def synchronize(device=None) -> None:
    if not cuda.is_available():
        raise RuntimeError(_NONE)
    cuda.synchronize(device)
