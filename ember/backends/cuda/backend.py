"""The CUDA backend, first slice: CuPy arrays as storage, the op table through
``restricted(cupy)``.

Every kernel that computes through ``xp`` runs on the GPU as CuPy's kernels; a kernel marked
``# numpy-only`` that returns a host array has its result moved to the device by the
dispatcher (correct, not fast), and one that is handed GPU arrays raises a clear TypeError.
ember's own kernels: generated Triton pointwise kernels (pointwise.py), Triton row kernels
(rows.py: softmax family, layer and RMS norm), reductions (reductions.py: sums, means, extrema
with indices, variances; their plans cached in reduction_plans.py), scans (scans.py:
cumsum, cumprod, cummax, cummin, logcumsumexp), scatters into repeated indices (scatter.py:
``xp.ufunc_at``, under index_add, index_put, scatter_reduce, ...), batch norm (channels.py),
2-D pooling (pool.py), fused attention (attention.py), fused optimizer steps (optim.py), fused
LSTM / GRU cells (rnn_cells.py), products through its cuBLAS binding (blas.py), and Philox
streams held on the device for the sampling ops (philox.py, random_ops.py). The data-dependent
argument checks (indices in bounds, targets, probabilities) run on the device, their failures
raised at the next synchronising call (checks.py). Every kernel and copy queues on the current
CUDA stream, CuPy's (``ember.cuda.stream``); every allocation goes through memory.py's
allocator (out-of-memory errors, ``record_stream``, peak statistics). Not yet here:
bfloat16/float8 storage beyond what CuPy holds.

``import ember`` never imports CuPy: the backend registers when CuPy is installed, and CuPy
is imported (and the driver initialised) at the first CUDA allocation or query.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as _np

from ..._device import device
from ..base import ARRAY_TYPES, Backend, register
from .. import special
from ..xp_api import restricted
from ..xp_ops import ARITHMETIC, compiled_cast, set_compiler
from . import checks, memory, runtime
from .checks import STATS, _PENDING, raise_pending
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
        xp = restricted(cupy(), "ember.backends.cuda.xp", self)
        from . import blas
        xp.matmul = blas.matmul  # products through ember's cuBLAS binding
        if triton_installed():  # pointwise definitions become generated Triton kernels
            from . import pointwise, scatter
            set_compiler(xp, pointwise.compile)
            xp.ufunc_at = scatter.ufunc_at  # scatters into repeated indices
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

    def from_host(self, a, device=None, non_blocking: bool = False):
        """A device copy of host data ``a``, queued on the current stream. From pageable
        memory the copy has read ``a`` when this returns (CUDA stages it); from pinned memory
        it reads ``a`` asynchronously only when ``non_blocking`` (``a`` is then kept alive
        until the copy has run), and is waited for otherwise."""
        cp = cupy()
        with self._on(device):
            pinned = type(a) is _np.ndarray and memory.is_pinned(a)
            out = cp.asarray(a, blocking=pinned and not non_blocking)
            if pinned and non_blocking:
                memory.keep_until_done(a, cp.cuda.get_current_stream().ptr)
            return out

    def record_stream(self, a, stream) -> None:
        """``Tensor.record_stream``: ``a``'s storage is not reused before the work queued on
        ``stream`` (an ``ember.cuda.Stream``) when it is freed has completed."""
        memory.record_stream(self.storage(a), stream.cuda_stream)

    def usable(self) -> bool:
        """Whether a GPU answers (what pinned host memory needs)."""
        return runtime.device_count() > 0

    def pinned_copy(self, a):
        """A copy of the host array ``a`` in page-locked memory."""
        cupy()
        return memory.pinned_copy(a)

    def is_pinned(self, a) -> bool:
        return memory.is_pinned(a)

    def to_host(self, a):
        """A host copy of ``a``: a wait for the device, where the failures that checks
        recorded on ``a``'s device since the last wait are raised (checks.py)."""
        STATS["d2h"] += 1
        STATS["syncs"] += 1
        out = cupy().asnumpy(a)
        if _PENDING and isinstance(a, self.array_type):
            raise_pending(a.device.id)
        return out

    def to_device(self, a, device=None):
        """A copy of the GPU array ``a`` on ``device`` (another GPU, or the current one)."""
        with self._on(device):
            return cupy().array(a, copy=True)

    def copy_into(self, dst, src) -> None:
        cp = cupy()
        if not isinstance(src, cp.ndarray):
            src = cp.asarray(src)
        elif src.dtype == dst.dtype and src.shape == dst.shape and src.size and \
                src.flags.c_contiguous and dst.flags.c_contiguous:
            # one copy of the bytes on the current stream (what an in-place op's write is);
            # cupy.copyto's argument work costs several times the launch
            d, s, n = dst.data.ptr, src.data.ptr, src.nbytes
            if d + n <= s or s + n <= d:  # (overlapping bytes: copyto's elementwise copy)
                cp.cuda.runtime.memcpyAsync(d, s, n, 4, cp.cuda.get_current_stream().ptr)
                return
        cp.copyto(dst, src, casting="unsafe")

    def storage(self, a):
        while isinstance(a.base, self.array_type):
            a = a.base
        return a

    def storage_offset(self, a) -> int:
        # counted from the allocation (a view built over it, as strided_view's, has no base)
        return (a.data.ptr - a.data.mem.ptr) // max(a.itemsize, 1)

    def uniform_draws(self, shape, generator, op):
        from . import random_ops
        return random_ops.uniform_draws(self, shape, generator, op)

    def storage_nbytes(self, a) -> int:
        root = self.storage(a)
        if root.base is None and root.data.ptr == a.data.mem.ptr:
            return root.nbytes
        return a.data.mem.size  # (a view of a strided view: the allocation, rounded up)

    def strided_view(self, a, shape, strides, offset=None):
        cp = cupy()
        isz = a.itemsize
        start = a.data.ptr - a.data.mem.ptr if offset is None else offset * isz
        return cp.ndarray(tuple(shape), a.dtype, cp.cuda.MemoryPointer(a.data.mem, start),
                          tuple(s * isz for s in strides))

    def data_ptr(self, a) -> int:
        return a.data.ptr

    def writeable(self, a) -> bool:
        # (CuPy gives an empty array zero strides: it has no element to share)
        return a.size == 0 or not any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))

    def may_share_memory(self, a, b) -> bool:
        return cupy().may_share_memory(a, b)

    def shares_memory(self, a, b) -> bool:
        return cupy().shares_memory(a, b)

    def current_index(self) -> int:
        return cupy().cuda.runtime.getDevice()

    def synchronize(self, index=None) -> None:
        STATS["syncs"] += 1
        with self._on(device("cuda", index) if index is not None else None):
            cupy().cuda.get_current_stream().synchronize()
            if _PENDING:
                raise_pending(self.current_index())

    # ---------------------------------------------------------------- checks
    def check_index(self, index, lo, hi, op, error, *, what="index", ignore=None) -> None:
        """On the device (checks.py): a failure is raised at the next synchronising call
        (at once with ``EMBER_CUDA_SYNC_CHECKS=1``), as PyTorch's device-side assert."""
        if not isinstance(index, self.array_type) or not triton_installed():
            return super().check_index(index, lo, hi, op, error, what=what, ignore=ignore)
        checks.check_index(index, lo, hi, op, what=what, ignore=ignore)

    def check_probabilities(self, p, totals, op) -> None:
        if not isinstance(p, self.array_type) or not triton_installed():
            return super().check_probabilities(p, totals, op)
        checks.check_probabilities(p, totals, op)

    def check_unit_interval(self, a, op, error, *, what="value") -> None:
        if not isinstance(a, self.array_type) or not triton_installed():
            return super().check_unit_interval(a, op, error, what=what)
        checks.check_unit_interval(a, op, what)


def _special_library() -> dict:
    """ember's special functions on CuPy arrays: cupyx.scipy.special's kernels."""
    from cupyx.scipy import special as cs
    return {"erf": cs.erf, "erfc": cs.erfc, "erfinv": cs.erfinv, "lgamma": cs.gammaln,
            "digamma": cs.digamma, "polygamma": lambda x, n: cs.polygamma(x.dtype.type(n), x)}


class _Current:
    """The current device, as a context that changes nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _install_triton_driver(cp) -> None:
    """At CUDA's initialisation: Triton's driver answers from ember's current stream, so a
    user's ``kernel[grid](...)`` on ember's tensors runs there (triton_adapter)."""
    from . import triton_adapter
    if not triton_adapter.interpreting():
        try:
            triton_adapter.install_driver()
        except Exception:  # noqa: BLE001 - CuPy's work goes on; ember's first launch re-raises
            pass


BACKEND = register(CUDABackend()) if installed() else None
if BACKEND is not None and triton_installed():
    runtime.INIT_HOOKS.append(_install_triton_driver)

if BACKEND is not None and triton_installed():  # ember's Triton kernels as overrides
    from .rows import register as _register_rows
    from .optim import register as _register_steps
    from .channels import register as _register_channels
    from .pool import register as _register_pool
    from .reductions import register as _register_reductions
    from .rnn_cells import register as _register_cells
    from .conv import register as _register_conv
    from .losses import register as _register_losses
    _register_rows(BACKEND)
    _register_channels(BACKEND)  # batch norm (channels.py), after the rows' _norm_backward
    _register_pool(BACKEND)  # 2-D max / average / adaptive average pooling (pool.py)
    _register_reductions(BACKEND)  # sum, mean, amax, max.dim, argmax, var, ... (reductions.py)
    _register_steps(BACKEND)  # fused Adam / SGD steps (optim.py)
    _register_cells(BACKEND)  # fused LSTM / GRU cells (rnn_cells.py)
    _register_conv(BACKEND)  # implicit-GEMM 1-D / 2-D convolutions and their grads (conv.py)
    _register_losses(BACKEND)  # the negative log likelihood and its gradient (losses.py)
    from .scans import register as _register_scans
    _register_scans(BACKEND)  # cumsum, cumprod, cummax, cummin, logcumsumexp (scans.py)
    from .pointwise import inplace as _inplace
    for _name, _defns in ARITHMETIC.items():  # x.add_(y): one kernel into x
        BACKEND.override(_name, "inplace", _inplace(*_defns, BACKEND))
    BACKEND.override("_to_copy", "kernel",  # dtype conversions: one generated kernel
                     lambda a, dtype: compiled_cast(BACKEND.xp, a, dtype))
