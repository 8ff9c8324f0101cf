"""``ember.cuda``: the CUDA device namespace.

ember has no CUDA backend yet, so no CUDA device is ever available and this namespace answers
as PyTorch's CPU-only build does: ``is_available()`` is False and ``device_count()`` 0; the
bookkeeping queries answer zero, empty or False; seeding has no CUDA generator to reach and
does nothing; and every call that needs a device (``current_device``, ``synchronize``,
``get_device_name``, ``current_stream``, ...) raises AssertionError, as ``torch.cuda`` does
there. The CUDA backend fills these in behind the same names.
"""

from __future__ import annotations

from .._device import OutOfMemoryError  # noqa: F401
from . import amp  # noqa: F401

_NOT_AVAILABLE = ("ember: CUDA is not available: this version of ember has only the CPU backend "
                  "(no CUDA device can be used)")


def _no_device(*args, **kwargs):
    raise AssertionError(_NOT_AVAILABLE)


def is_available() -> bool:
    """Whether a CUDA device can be used: never, in this version of ember."""
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_tf32_supported() -> bool:
    return False


def get_arch_list() -> list:
    return []


# seeding: no CUDA generator exists, so there is nothing to seed (PyTorch's CPU build, too)
def manual_seed(seed: int) -> None:
    int(seed)  # PyTorch converts (and so refuses) the seed even when it has nowhere to go


def manual_seed_all(seed: int) -> None:
    int(seed)


def seed() -> None:
    return None


def seed_all() -> None:
    return None


def set_rng_state(new_state, device="cuda") -> None:
    return None


def get_rng_state_all() -> list:
    return []


def set_rng_state_all(new_states) -> None:
    return None


# memory bookkeeping: nothing is ever allocated on a CUDA device
def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def memory_reserved(device=None) -> int:
    return 0


def max_memory_reserved(device=None) -> int:
    return 0


def reset_peak_memory_stats(device=None) -> None:
    return None


def memory_stats(device=None) -> dict:
    return {}


def empty_cache() -> None:
    return None


# what needs a device
init = current_device = set_device = synchronize = get_device_name = _no_device
get_device_capability = get_device_properties = get_rng_state = initial_seed = _no_device
current_stream = default_stream = mem_get_info = ipc_collect = current_blas_handle = _no_device


class device:
    """``with ember.cuda.device(i):`` selects a CUDA device for the block; there is none here,
    so entering it raises."""

    def __init__(self, device):
        self.idx = device

    def __enter__(self):
        raise RuntimeError(_NOT_AVAILABLE)

    def __exit__(self, *exc):
        return False


class Stream:
    """A CUDA stream: none can be made without a CUDA device."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("ember.cuda.Stream requires CUDA support: " + _NOT_AVAILABLE)


class Event:
    """A CUDA event: none can be made without a CUDA device."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("ember.cuda.Event requires CUDA support: " + _NOT_AVAILABLE)
