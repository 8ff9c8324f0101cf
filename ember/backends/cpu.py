"""The CPU backend: numpy arrays, plus process settings that make numpy kernels fast.

Every op allocates its result. For large arrays glibc's malloc hands out fresh pages from mmap
and returns them to the OS on free, so each big elementwise op pays for page faults on memory
it just gave back (a 16M-element add: 25 ms instead of 10 ms). PyTorch avoids this with its
caching allocator; ember asks glibc to keep large blocks on its heap and not to trim it. The
cost is that the process keeps its peak memory. ``EMBER_MALLOC_TUNING=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

import numpy as np

from .._device import CPU
from ..codegen.c import runtime
from .base import ARRAY_TYPES, Backend, register
from .xp_api import attach_backend, restricted

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def tune_allocator() -> bool:
    """Keep large allocations on glibc's heap (Linux only); returns whether it applied."""
    if os.environ.get("EMBER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, ...): leave the allocator alone
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30) and libc.mallopt(_M_TRIM_THRESHOLD,
                                                                      (1 << 31) - 1)
    return bool(ok)


# ---------------------------------------------------------------------- numpy's error state
# PyTorch never warns on overflow, division by zero or invalid values; numpy's kernels would.
# ember's kernels run with numpy's floating-point errors ignored, and nothing else does: the
# user's own numpy calls keep the error state they set (np.seterr is never called). numpy
# keeps that state in a context variable, so entering the quiet state is one set (and the
# test for it, made by every nested op call, one get), far cheaper than an np.errstate.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE  # numpy >= 2
    with np.errstate(all="ignore"):
        _QUIET = _ERRSTATE.get()
except ImportError:  # numpy 1.x: the public context manager, at its price
    _ERRSTATE = _QUIET = None


def quiet_enter():
    """Enter the quiet error state on this thread (a no-op inside it); hand what it returns
    to ``quiet_exit`` when the kernels are done."""
    if _ERRSTATE is None:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state
    if _ERRSTATE.get() is _QUIET:
        return None
    return _ERRSTATE.set(_QUIET)


def quiet_exit(token) -> None:
    if token is None:
        return
    if _ERRSTATE is None:
        token.__exit__(None, None, None)
    else:
        _ERRSTATE.reset(token)


def quiet(fn):
    """``fn`` with numpy's floating-point errors ignored while it runs: for code above the
    dispatcher that calls numpy itself (the autograd engine's accumulation, an optimizer's
    fused step, gradient clipping)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = quiet_enter()
        try:
            return fn(*args, **kwargs)
        finally:
            quiet_exit(token)
    return wrapper


def _quiet_thread() -> None:
    """ember's own worker threads run only ember's kernels: quiet for good."""
    if _ERRSTATE is None:
        np.seterr(all="ignore")  # this thread's state only (numpy's is per thread)
    else:
        _ERRSTATE.set(_QUIET)


# ---------------------------------------------------------------------- threads
# numpy's ufuncs and reductions release the GIL on large arrays, so a kernel split into row
# blocks runs on several cores from a small thread pool (PyTorch's intra-op parallelism).
_POOL: list = []
_THREADS: list = []  # the intra-op thread count, decided once (reading it costs ~2 us)
PARALLEL_MIN = 1 << 18  # elements below which splitting costs more than it saves


def num_threads() -> int:
    """Threads ember's kernels use: ``set_num_threads``'s value, else $EMBER_NUM_THREADS, else
    the CPUs this process may run on (PyTorch's ``get_num_threads``)."""
    if not _THREADS:
        n = os.environ.get("EMBER_NUM_THREADS")
        if n:
            _THREADS.append(max(1, int(n)))
        else:
            try:
                _THREADS.append(max(1, len(os.sched_getaffinity(0))))
            except AttributeError:
                _THREADS.append(os.cpu_count() or 1)
    return _THREADS[0]


def set_num_threads(n: int) -> None:
    """``set_num_threads(int)``: the number of threads ember's kernels use (numpy kernels
    split into row blocks, and the OpenMP regions of generated kernels)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _THREADS[:] = [n]
    _EXPLICIT[:] = [True]
    if _POOL:  # the next parallel kernel starts a pool of the new size
        _POOL.pop().shutdown(wait=False)
    for set_omp in _OPENMP:
        set_omp(n)


# The OpenMP runtime the generated kernels run on (omp_set_num_threads), once one is loaded.
# Only a count the user chose (set_num_threads, $EMBER_NUM_THREADS) is passed on: otherwise
# OpenMP's own (OMP_NUM_THREADS, or one per CPU) stands. It is the calling thread's setting,
# and a process that imported torch shares torch's runtime, as torch.set_num_threads does.
_OPENMP: list = []
_EXPLICIT: list = [bool(os.environ.get("EMBER_NUM_THREADS"))]


def register_openmp(lib) -> None:
    """Called with each kernel library loaded: the first that links OpenMP gives its
    ``omp_set_num_threads``, which then follows ``set_num_threads``."""
    if _OPENMP:
        return
    try:
        fn = lib.omp_set_num_threads
    except AttributeError:  # built without OpenMP
        return
    fn.argtypes, fn.restype = [ctypes.c_int], None
    _OPENMP.append(fn)
    if _EXPLICIT[0]:
        fn(num_threads())


runtime.ON_LOAD.append(register_openmp)  # set_num_threads reaches the kernels' OpenMP runtime


def _pool():
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor
        _POOL.append(ThreadPoolExecutor(num_threads(), thread_name_prefix="ember-cpu",
                                        initializer=_quiet_thread))
    return _POOL[0]


def parallel_rows(kernel, *arrays) -> None:
    """Run ``kernel(*blocks)`` on row blocks of 2-D arrays (same number of rows) in parallel.
    The kernel writes its results into its block arguments; rows must be independent."""
    rows = arrays[0].shape[0]
    n = 1 if arrays[0].size < PARALLEL_MIN else min(num_threads(), rows)
    if n <= 1:
        kernel(*arrays)
        return
    bounds = [rows * i // n for i in range(n + 1)]

    futures = [_pool().submit(kernel, *(a[lo:hi] for a in arrays))
               for lo, hi in zip(bounds[:-1], bounds[1:])]
    for f in futures:
        f.result()


def _sliceable(a, b) -> bool:
    """Whether ``a`` and ``b`` are worth splitting into per-thread slices: large C-contiguous
    arrays of one shape."""
    return num_threads() > 1 and a.size >= 4 * PARALLEL_MIN and \
        getattr(b, "shape", None) == a.shape and a.flags.c_contiguous and b.flags.c_contiguous


def _in_slices(fn, *arrays) -> None:
    """``fn(*slices)`` on each thread's contiguous slice of the (same-size) ``arrays``."""
    flat = [x.reshape(-1) for x in arrays]
    n = num_threads()
    bounds = [flat[0].size * i // n for i in range(n + 1)]
    parts = [_pool().submit(fn, *(x[lo:hi] for x in flat))
             for lo, hi in zip(bounds[:-1], bounds[1:])]
    for p in parts:
        p.result()


def parallel_ufunc(ufunc):
    """``f(a, b)``: ``ufunc(a, b)``, computed in per-thread slices when both are large
    C-contiguous arrays of one shape (memory-bound work that one core cannot saturate)."""
    def f(a, b):
        if not _sliceable(a, b):
            return ufunc(a, b)
        out = np.empty(a.shape, np.result_type(a, b))
        _in_slices(lambda x, y, o: ufunc(x, y, out=o), a, b, out)
        return out
    f.__name__ = ufunc.__name__
    return f


def parallel_ufunc_into(ufunc, a, b, scale=None) -> None:
    """``ufunc(a, b * scale, out=a)`` (``b`` alone without ``scale``), in per-thread slices when
    ``a`` and ``b`` are large C-contiguous arrays of one shape (``b`` may also broadcast, or
    be a scalar: then in one call)."""
    def run(x, y):
        ufunc(x, y if scale is None else y * scale, out=x)

    if _sliceable(a, b):
        _in_slices(run, a, b)
    else:
        run(a, b)


def parallel_sum(a, dtype=None):
    """The sum of every element of a large contiguous array, from per-thread partial sums."""
    flat = a.reshape(-1)
    n = num_threads()
    if n <= 1 or flat.size < 4 * PARALLEL_MIN or not a.flags.c_contiguous:
        return flat.sum(dtype=dtype)
    bounds = [flat.size * i // n for i in range(n + 1)]
    parts = [_pool().submit(flat[lo:hi].sum, dtype=dtype)
             for lo, hi in zip(bounds[:-1], bounds[1:])]
    total = parts[0].result()
    for p in parts[1:]:
        total = total + p.result()
    return total


# ---------------------------------------------------------------------- the Backend
def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory (through views and as_strided wrappers)."""
    while True:
        b = a.base
        if isinstance(b, np.ndarray):
            a = b
        elif b is not None and isinstance(getattr(b, "base", None), np.ndarray):
            a = b.base  # numpy's as_strided keeps its source behind a DummyArray
        else:
            return a


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _storage_bytes(a: np.ndarray) -> np.ndarray | None:
    """The storage under ``a`` as a flat uint8 view starting where ``storage_offset`` counts
    from, or None when the storage is not one dense block (then positions are ambiguous)."""
    root = _root(a)
    flat = root.reshape(-1) if root.flags.c_contiguous else root.ravel(order="K")
    if flat.base is None and flat is not root or (flat.size and _ptr(flat) != _ptr(root)):
        return None
    return flat.view(np.uint8)


class CPUBackend(Backend):
    """numpy arrays in host memory."""

    name = "cpu"
    xp = restricted(np, "ember.backends.cpu.xp")
    array_type = np.ndarray
    device_obj = CPU

    def empty(self, shape, np_dtype, device=None):
        return np.empty(shape, np_dtype)

    def from_host(self, a, device=None):
        return np.array(a, copy=True)

    def to_host(self, a):
        return a

    def copy_into(self, dst, src) -> None:
        np.copyto(dst, src, casting="unsafe")

    storage = staticmethod(_root)

    def storage_offset(self, a) -> int:
        return (_ptr(a) - _ptr(_root(a))) // max(a.itemsize, 1)

    default_generator = None  # the CPU's default ember.Generator (ember/_random.py sets it)

    def uniform_draws(self, shape, generator, op):
        g = self.default_generator if generator is None else generator
        rng = getattr(g, "_np", None)  # the numpy generator an ember.Generator wraps
        if rng is None:
            raise TypeError(f"{op}(): argument 'generator' must be ember.Generator, not "
                            f"{type(generator).__name__}")
        return rng.random(shape)

    def storage_nbytes(self, a) -> int:
        buf = _storage_bytes(a)
        return buf.size if buf is not None else a.nbytes

    def strided_view(self, a, shape, strides, offset=None):
        """Built over the storage array, so the view's ``.base`` chain leads back to it
        (``storage_offset`` / ``_base`` stay right). A read-only input, or a view repeating
        one element along a dimension, refuses writes, as PyTorch's expand does."""
        isz = a.itemsize
        buf = _storage_bytes(a)
        if buf is None:
            if offset is not None:
                raise RuntimeError("as_strided: the input's storage is not one dense block")
            return np.lib.stride_tricks.as_strided(a, shape, [s * isz for s in strides],
                                                   writeable=a.flags.writeable)
        start = (self.storage_offset(a) if offset is None else offset) * isz
        if any(n == 0 for n in shape):
            start = min(start, buf.size)
        v = np.ndarray(tuple(shape), a.dtype, buffer=buf, offset=start,
                       strides=tuple(s * isz for s in strides))
        if v.flags.writeable and (not a.flags.writeable or any(
                s == 0 and n > 1 for n, s in zip(shape, strides))):
            v.flags.writeable = False
        return v

    data_ptr = staticmethod(_ptr)

    def writeable(self, a) -> bool:
        return a.flags.writeable

    def writeable_alias(self, a):
        """A writeable array over ``a``'s memory (``a`` a read-only broadcast view), found
        through its base arrays; None when no base owns writeable contiguous memory."""
        root = _root(a)
        if not root.flags.writeable or not root.flags.c_contiguous:
            return None
        offset = _ptr(a) - _ptr(root)
        return np.ndarray(a.shape, a.dtype, root, offset, a.strides)

    may_share_memory = staticmethod(np.may_share_memory)
    shares_memory = staticmethod(np.shares_memory)


BACKEND = register(CPUBackend(), linalg_errors=(np.linalg.LinAlgError,))
attach_backend(BACKEND.xp, BACKEND)  # eager: Backend.check_index raises PyTorch's errors
ARRAY_TYPES.add(np.ndarray)
