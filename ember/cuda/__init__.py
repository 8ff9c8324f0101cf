"""``ember.cuda``: the CUDA device namespace.

Without the CUDA backend (CuPy not installed: the CPU install) this namespace answers as
PyTorch's CPU-only build does: ``is_available()`` is False and ``device_count()`` 0; the
bookkeeping queries answer zero, empty or False; seeding has no CUDA generator to reach and
does nothing; and every call that needs a device (``current_device``, ``synchronize``,
``get_device_name``, ``current_stream``, ...) raises AssertionError, as ``torch.cuda`` does
there. With the backend, the device queries, synchronisation and the memory pool's numbers
answer from CuPy (``_GPU`` below), and seeding reaches each device's Philox generator
(``default_generators``; ember/_random.py, backends/cuda/philox.py). Streams and events:
streams.py (ember's current stream is CuPy's); the allocator behind the memory numbers, the
out-of-memory error and ``Tensor.record_stream``: backends/cuda/memory.py; the summary table:
memory.py here. A child forked after this process initialised CUDA gets PyTorch's "Cannot
re-initialize CUDA in forked subprocess" RuntimeError from every call that needs the device
(backends/cuda/runtime.py).
"""

from __future__ import annotations

import functools
import secrets

from .. import _random
from .._device import OutOfMemoryError  # noqa: F401
from ..backends.cuda import backend as _cuda_backend
from ..backends.cuda import memory as _memory
from ..backends.cuda import philox as _philox
from ..backends.cuda import runtime as _runtime
from .memory import memory_summary  # noqa: F401
from .streams import Event, ExternalStream, Stream, StreamContext, stream  # noqa: F401
from .streams import set_stream  # noqa: F401

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
    return _runtime.device_count()


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


reset_max_memory_allocated = reset_max_memory_cached = reset_peak_memory_stats


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
    """Wait for the device; raises the failures its argument checks recorded (RuntimeError,
    "device-side assert triggered": backends/cuda/checks.py)."""
    from ..backends.cuda import checks
    index = _index(device)
    checks.STATS["syncs"] += 1
    with _cuda_backend.cupy().cuda.Device(index):
        _cuda_backend.cupy().cuda.Device().synchronize()
        checks.raise_pending(index)


def _gpu_properties(device=None) -> dict:
    return _properties_of(_index(device))


@functools.cache
def _properties_of(index: int) -> dict:
    """A GPU's properties (the driver's query takes about a millisecond: autocast asks for
    the capability on every entry)."""
    return _cuda_backend.cupy().cuda.runtime.getDeviceProperties(index)


def _gpu_device_name(device=None) -> str:
    name = _gpu_properties(device)["name"]
    return name.decode() if isinstance(name, bytes) else name


def _gpu_capability(device=None) -> tuple:
    p = _gpu_properties(device)
    return p["major"], p["minor"]


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


# ---------------------------------------------------------------------- the Philox generators
def _generator(device=None):
    """The default generator of ``device`` (the current device when None or "cuda")."""
    return _random.cuda_generator(_index(device))


def _gpu_manual_seed(seed) -> None:
    """Seed the current device's generator (nothing to seed without a GPU, nor in a child
    forked after CUDA was initialised: PyTorch defers the call there)."""
    seed = int(seed)
    if is_available() and not _runtime.in_bad_fork():
        _generator().manual_seed(seed)


def _gpu_manual_seed_all(seed) -> None:
    """Seed every device's generator, those not used yet included."""
    _philox.manual_seed_all(_random._seed_value(int(seed)))


def _gpu_seed() -> None:
    if is_available() and not _runtime.in_bad_fork():
        _generator().seed()


def _gpu_seed_all() -> None:
    _philox.manual_seed_all(secrets.randbits(64))


def _gpu_initial_seed() -> int:
    return _generator().initial_seed()


def _gpu_get_rng_state(device="cuda"):
    """The generator state of ``device`` as a uint8 CPU tensor (seed, offset: 16 bytes)."""
    return _generator(device).get_state()


def _gpu_set_rng_state(new_state, device="cuda") -> None:
    _generator(device).set_state(new_state)


def _gpu_get_rng_state_all() -> list:
    return [_gpu_get_rng_state(i) for i in range(device_count())]


def _gpu_set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        _gpu_set_rng_state(state, i)


def __getattr__(name):
    if name == "default_generators":  # one per device, made on first use (as in PyTorch)
        n = device_count() if _backend() is not None else 0
        return tuple(_random.cuda_generator(i) for i in range(n))
    raise AttributeError(f"module 'ember.cuda' has no attribute '{name}'")


if _backend() is not None:
    current_device, set_device, synchronize = _gpu_current_device, _gpu_set_device, \
        _gpu_synchronize
    manual_seed, manual_seed_all, seed, seed_all = _gpu_manual_seed, _gpu_manual_seed_all, \
        _gpu_seed, _gpu_seed_all
    initial_seed, get_rng_state, set_rng_state = _gpu_initial_seed, _gpu_get_rng_state, \
        _gpu_set_rng_state
    get_rng_state_all, set_rng_state_all = _gpu_get_rng_state_all, _gpu_set_rng_state_all
    get_device_name, get_device_capability = _gpu_device_name, _gpu_capability
    device = _GPUDevice

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return is_available() and _gpu_capability()[0] >= 8

    def is_initialized() -> bool:
        return _runtime.initialized()

    def init() -> None:
        _cuda_backend.cupy()

    def mem_get_info(device=None) -> tuple:
        """(free, total) bytes of the device, as the driver counts them."""
        with _cuda_backend.cupy().cuda.Device(_index(device)):
            return tuple(_cuda_backend.cupy().cuda.runtime.memGetInfo())

    from .streams import current_stream, default_stream  # noqa: F401,E402

    # memory: the numbers of CuPy's pool behind ember's allocator (backends/cuda/memory.py)
    def memory_allocated(device=None) -> int:
        return _memory.allocated(_index(device)) if _runtime.initialized() else 0

    def max_memory_allocated(device=None) -> int:
        return _memory.peaks(_index(device))[0] if _runtime.initialized() else 0

    def memory_reserved(device=None) -> int:
        return _memory.reserved(_index(device)) if _runtime.initialized() else 0

    def max_memory_reserved(device=None) -> int:
        return _memory.peaks(_index(device))[1] if _runtime.initialized() else 0

    def reset_peak_memory_stats(device=None) -> None:
        if _runtime.initialized():
            _memory.reset_peaks(_index(device))

    reset_max_memory_allocated = reset_max_memory_cached = reset_peak_memory_stats

    def memory_stats(device=None) -> dict:
        return _memory.stats(_index(device)) if _runtime.initialized() else {}

    def empty_cache() -> None:
        if _runtime.initialized():
            _memory.empty_cache()
