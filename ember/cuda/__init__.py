"""``ember.cuda``: the CUDA device namespace.

Without the CUDA backend (CuPy not installed: the CPU install) this namespace answers as
PyTorch's CPU-only build does: ``is_available()`` is False and ``device_count()`` 0; the
bookkeeping queries answer zero, empty or False; seeding has no CUDA generator to reach and
does nothing; and every call that needs a device (``current_device``, ``synchronize``,
``get_device_name``, ``current_stream``, ...) raises AssertionError, as ``torch.cuda`` does
there. With the backend, the device queries, synchronisation and the memory pool's numbers
answer from CuPy (``_GPU`` below); streams, events and the CUDA generator are still to come.
"""

from __future__ import annotations

from .._device import OutOfMemoryError  # noqa: F401
from ..backends.cuda import backend as _cuda_backend

_NOT_AVAILABLE = ("ember: CUDA is not available: this version of ember has only the CPU backend "
                  "(no CUDA device can be used)")


def _no_device(*args, **kwargs):
    raise AssertionError(_NOT_AVAILABLE)


def _backend():
    """The CUDA backend, or None in the CPU install."""
    return _cuda_backend.BACKEND


def is_available() -> bool:
    """Whether a CUDA device can be used: the backend is installed and a GPU answers."""
    return device_count() > 0


def device_count() -> int:
    if _backend() is None:
        return 0
    try:
        return _cuda_backend.cupy().cuda.runtime.getDeviceCount()
    except RuntimeError:
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


# ---------------------------------------------------------------------- with a GPU
def _index(device) -> int:
    if device is None:
        return _cuda_backend.cupy().cuda.runtime.getDevice()
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if isinstance(device, str):
        _, _, i = device.partition(":")
        index = int(i) if i else None
    return _index(None) if index is None else index


def _gpu_current_device() -> int:
    return _index(None)


def _gpu_set_device(device) -> None:
    _cuda_backend.cupy().cuda.Device(_index(device)).use()


def _gpu_synchronize(device=None) -> None:
    with _cuda_backend.cupy().cuda.Device(_index(device)):
        _cuda_backend.cupy().cuda.Device().synchronize()


def _gpu_properties(device=None) -> dict:
    return _cuda_backend.cupy().cuda.runtime.getDeviceProperties(_index(device))


def _gpu_device_name(device=None) -> str:
    name = _gpu_properties(device)["name"]
    return name.decode() if isinstance(name, bytes) else name


def _gpu_capability(device=None) -> tuple:
    p = _gpu_properties(device)
    return p["major"], p["minor"]


def _pool():
    return _cuda_backend.cupy().get_default_memory_pool()


class _GPUDevice:
    """``with ember.cuda.device(i):`` makes GPU i current for the block."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None and device != -1 else None
        self._ctx = None

    def __enter__(self):
        if self.idx is not None:
            self._ctx = _cuda_backend.cupy().cuda.Device(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


if _backend() is not None:
    current_device, set_device, synchronize = _gpu_current_device, _gpu_set_device, \
        _gpu_synchronize
    get_device_name, get_device_capability = _gpu_device_name, _gpu_capability
    device = _GPUDevice

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return is_available() and _gpu_capability()[0] >= 8

    def is_initialized() -> bool:
        return is_available()

    def memory_allocated(device=None) -> int:
        return _pool().used_bytes()

    def memory_reserved(device=None) -> int:
        return _pool().total_bytes()

    def empty_cache() -> None:
        _pool().free_all_blocks()
