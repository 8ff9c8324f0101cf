"""The CUDA backend, first slice: CuPy arrays as storage, the op table through
``restricted(cupy)``.

Every kernel that computes through ``xp`` runs on the GPU as CuPy's kernels; a kernel marked
``# numpy-only`` that returns a host array has its result moved to the device by the
dispatcher (correct, not fast), and one that is handed GPU arrays raises a clear TypeError.
ember's own kernels: generated Triton pointwise kernels (pointwise.py), Triton row kernels
(rows.py: softmax family, layer and RMS norm), fused attention (attention.py), fused
optimizer steps (optim.py), fused LSTM / GRU cells (rnn_cells.py), products through its
cuBLAS binding (blas.py), and Philox streams held on the device for the sampling ops
(philox.py, random_ops.py). Not yet here: bfloat16/float8 storage beyond what CuPy holds,
streams and events.

``import ember`` never imports CuPy: the backend registers when CuPy is installed, and CuPy
is imported (and the driver initialised) at the first CUDA allocation or query.
"""

from __future__ import annotations

import functools
import importlib.util

from ..._device import device
from ..base import ARRAY_TYPES, Backend, register
from .. import special
from ..xp_api import restricted
from ..xp_ops import set_compiler
from .runtime import cupy


def installed() -> bool:
    return importlib.util.find_spec("cupy") is not None


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


class CUDABackend(Backend):
    """CuPy arrays on NVIDIA GPUs."""

    name = "cuda"

    @functools.cached_property
    def xp(self):
        xp = restricted(cupy(), "ember.backends.cuda.xp")
        from . import blas
        xp.matmul = blas.matmul  # products through ember's cuBLAS binding
        if triton_installed():  # pointwise definitions become generated Triton kernels
            from . import pointwise
            set_compiler(xp, pointwise.compile)
        return xp

    @functools.cached_property
    def array_type(self):
        cp = cupy()
        ARRAY_TYPES.add(cp.ndarray)
        special.LIBRARIES[cp.ndarray] = _special_library()
        return cp.ndarray

    def device_of(self, a) -> device:
        return device("cuda", a.device.id)

    def _on(self, dev):
        index = getattr(dev, "index", None)
        return cupy().cuda.Device(index) if index is not None else _Current()

    def empty(self, shape, np_dtype, device=None):
        with self._on(device):
            return cupy().empty(shape, np_dtype)

    def from_host(self, a, device=None):
        with self._on(device):
            return cupy().asarray(a)

    def to_host(self, a):
        return cupy().asnumpy(a)

    def to_device(self, a, device=None):
        """A copy of the GPU array ``a`` on ``device`` (another GPU, or the current one)."""
        with self._on(device):
            return cupy().array(a, copy=True)

    def copy_into(self, dst, src) -> None:
        cp = cupy()
        if not isinstance(src, cp.ndarray):
            src = cp.asarray(src)
        cp.copyto(dst, src, casting="unsafe")

    def storage(self, a):
        while isinstance(a.base, self.array_type):
            a = a.base
        return a

    def storage_offset(self, a) -> int:
        return (a.data.ptr - self.storage(a).data.ptr) // max(a.itemsize, 1)

    def data_ptr(self, a) -> int:
        return a.data.ptr

    def writeable(self, a) -> bool:
        return not any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))

    def may_share_memory(self, a, b) -> bool:
        return cupy().may_share_memory(a, b)

    def shares_memory(self, a, b) -> bool:
        return cupy().shares_memory(a, b)

    def current_index(self) -> int:
        return cupy().cuda.runtime.getDevice()

    def synchronize(self, index=None) -> None:
        with self._on(device("cuda", index) if index is not None else None):
            cupy().cuda.get_current_stream().synchronize()


def _special_library() -> dict:
    """ember's special functions on CuPy arrays: cupyx.scipy.special's kernels."""
    from cupyx.scipy import special as cs
    return {"erf": cs.erf, "erfc": cs.erfc, "erfinv": cs.erfinv, "lgamma": cs.gammaln,
            "digamma": cs.digamma, "polygamma": lambda x, n: cs.polygamma(n, x)}


class _Current:
    """The current device, as a context that changes nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


BACKEND = register(CUDABackend()) if installed() else None

if BACKEND is not None and triton_installed():  # ember's Triton row kernels as overrides
    from .rows import register as _register_rows
    from .optim import register as _register_steps
    from .rnn_cells import register as _register_cells
    _register_rows(BACKEND)
    _register_steps(BACKEND)  # fused Adam / SGD steps (optim.py)
    _register_cells(BACKEND)  # fused LSTM / GRU cells (rnn_cells.py)
