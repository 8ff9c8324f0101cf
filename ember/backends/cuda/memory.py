"""GPU memory: the allocator CuPy calls, streams' claims on freed blocks, pinned host memory.

Every device allocation of the process (ember's arrays, CuPy's kernels' temporaries, cuBLAS
workspaces) goes through CuPy's current allocator, which ``install`` sets, when CUDA is first
initialised, to ``_malloc``: CuPy's default memory pool's ``malloc`` with four additions:

- it refuses in a child forked after the parent initialised CUDA (runtime.check_fork);
- it releases the blocks whose stream claims are over (below) before allocating;
- on ``cupy.cuda.memory.OutOfMemoryError`` (the pool has already freed its cached blocks
  and retried) it waits for every claimed block's streams, releases them and the cached
  blocks, and tries once more; then it raises ``OutOfMemoryError`` (ember's, a RuntimeError)
  naming the request and the device's total, free, allocated and reserved bytes. Nothing is
  held after that: the pool is as it was, minus its cached blocks, and the process goes on;
- it keeps each device's peaks of allocated and reserved bytes (``max_memory_allocated``).

Stream claims (``Tensor.record_stream``): CuPy's pool, like PyTorch's caching allocator, files
a freed block under the stream that was current at its allocation and hands it again to the
next allocation on that stream, without waiting for work queued on other streams. A storage
used on another stream ``s`` is claimed with ``record_stream(array, s)``: a finalizer on the
storage array holds its memory (CuPy's ``MemoryPointer``) when the array dies, records an
event on each claimed stream then, and keeps the memory in ``_PENDING`` until every event
has completed; only then does the block go back to the pool. ``_PENDING`` is swept at each
allocation and by ``empty_cache``. The same list keeps a pinned host buffer alive until an
asynchronous copy from it has run (``keep_until_done``).

Pinned (page-locked) host memory: ``pinned_empty`` is a numpy array over memory from CuPy's
pinned memory pool; ``is_pinned`` asks the driver about an address.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..._device import OutOfMemoryError
from . import runtime

_PENDING: list = []  # [(events, held object)]: freed while streams may still use them
_PENDING_LOCK = threading.RLock()  # re-entrant: a finalizer may add to it during a sweep
_CUPY_OOM: list = [MemoryError]  # [CuPy's OutOfMemoryError] once installed
_PEAKS: dict = {}  # device index -> [peak allocated bytes, peak reserved bytes]
_COUNTS = {"num_ooms": 0, "num_alloc_retries": 0}
_POOL = []  # [CuPy's default memory pool] once installed


def install(cp) -> None:
    """Make ``_malloc`` CuPy's allocator (a runtime INIT_HOOK: CUDA's first initialisation)."""
    pool = cp.get_default_memory_pool()
    _POOL[:] = [pool]
    _CUPY_OOM[:] = [cp.cuda.memory.OutOfMemoryError]
    cp.cuda.set_allocator(_malloc)


runtime.INIT_HOOKS.append(install)


def _malloc(size: int):
    runtime.check_fork()
    if _PENDING:
        sweep()
    pool = _POOL[0]
    CupyOOM = _CUPY_OOM[0]
    try:
        mem = pool.malloc(size)
    except CupyOOM:
        _COUNTS["num_alloc_retries"] += 1
        sweep(wait=True)
        pool.free_all_blocks()
        try:
            mem = pool.malloc(size)
        except CupyOOM:
            _COUNTS["num_ooms"] += 1
            raise OutOfMemoryError(oom_message(size, *_device_numbers())) from None
    peaks = _PEAKS.get(mem.device_id)
    if peaks is None:
        peaks = _PEAKS[mem.device_id] = [0, 0]
    used = pool.used_bytes()
    if used > peaks[0]:
        peaks[0] = used
    total = pool.total_bytes()
    if total > peaks[1]:
        peaks[1] = total
    return mem


def _device_numbers() -> tuple:
    """(device index, total, free, allocated, reserved) of the current device."""
    from .runtime import cupy
    cp = cupy()
    free, total = cp.cuda.runtime.memGetInfo()
    pool = _POOL[0]
    return cp.cuda.runtime.getDevice(), total, free, pool.used_bytes(), pool.total_bytes()


def format_size(n: int) -> str:
    """Bytes as PyTorch's messages print them: bytes up to 1 KiB, then KiB, MiB, GiB."""
    if n <= 1024:
        return f"{n} bytes"
    for unit, scale in (("KiB", 1024), ("MiB", 1024 ** 2)):
        if n <= scale * 1024:
            return f"{n / scale:.2f} {unit}"
    return f"{n / 1024 ** 3:.2f} GiB"


def oom_message(size: int, index: int, total: int, free: int, allocated: int,
                reserved: int) -> str:
    """The message of an allocation of ``size`` bytes that did not fit on GPU ``index``."""
    return (f"CUDA out of memory. Tried to allocate {format_size(size)}. GPU {index} has a "
            f"total capacity of {format_size(total)} of which {format_size(free)} is free. "
            f"Of the allocated memory {format_size(allocated)} is allocated by ember, and "
            f"{format_size(max(reserved - allocated, 0))} is reserved by ember but "
            "unallocated. ember.cuda.empty_cache() returns the cached blocks to the device.")


# ---------------------------------------------------------------------- stream claims
def sweep(wait: bool = False) -> None:
    """Release what ``_PENDING`` holds whose events have all completed (``wait``: wait for
    them all first)."""
    with _PENDING_LOCK:
        done = set()
        for entry in list(_PENDING):
            events = entry[0]
            if wait:
                for e in events:
                    e.synchronize()
            if wait or all(e.done for e in events):
                done.add(id(entry))
        # entries a finalizer added meanwhile are kept: only those found done go
        _PENDING[:] = [entry for entry in _PENDING if id(entry) not in done]


def _release_after(held, handles) -> None:
    """Hold ``held`` until the work queued now on each stream of ``handles`` (``cudaStream_t``
    values of the current device) has completed."""
    from .runtime import cupy
    cp = cupy()
    events = []
    for h in handles:
        e = cp.cuda.Event(disable_timing=True)
        cp.cuda.runtime.eventRecord(e.ptr, h)
        events.append(e)
    with _PENDING_LOCK:
        _PENDING.append((events, held))


def keep_until_done(held, handle: int) -> None:
    """Hold ``held`` (a host buffer an asynchronous copy reads) until the work queued now on
    the stream ``handle`` has completed."""
    _release_after(held, [handle])


_CLAIMS: dict = {}  # id(storage array) -> (finalizer, [stream handles])


def record_stream(storage, handle: int) -> None:
    """Claim the storage array ``storage`` for the stream ``handle`` (a ``cudaStream_t`` of
    the storage's device): when the array is freed, its memory goes back to the pool only
    after the work queued on that stream by then has completed."""
    key = id(storage)
    claim = _CLAIMS.get(key)
    if claim is None:
        handles: list = []
        fin = weakref.finalize(storage, _storage_freed, key, storage.data, handles)
        fin.atexit = False
        _CLAIMS[key] = claim = (fin, handles)
    if handle not in claim[1]:
        claim[1].append(handle)


def _storage_freed(key, memptr, handles) -> None:
    _CLAIMS.pop(key, None)
    if runtime.in_bad_fork():
        return  # nothing was queued by this process: the memory just goes
    from .runtime import cupy
    with cupy().cuda.Device(memptr.device_id):
        _release_after(memptr, handles)


# ---------------------------------------------------------------------- statistics
def _on(index):
    from .runtime import cupy
    return cupy().cuda.Device(index)


def allocated(index: int) -> int:
    with _on(index):
        return _POOL[0].used_bytes()


def reserved(index: int) -> int:
    with _on(index):
        return _POOL[0].total_bytes()


def peaks(index: int) -> list:
    """[peak allocated, peak reserved] bytes of device ``index`` since the last reset."""
    p = _PEAKS.get(index)
    if p is None:
        p = _PEAKS[index] = [allocated(index), reserved(index)]
    return p


def reset_peaks(index: int) -> None:
    _PEAKS[index] = [allocated(index), reserved(index)]


def empty_cache() -> None:
    """Release the claimed blocks whose streams are done, then every cached free block."""
    sweep()
    _POOL[0].free_all_blocks()


def stats(index: int) -> dict:
    """Counters of device ``index`` under PyTorch's ``memory_stats`` names (those ember
    keeps)."""
    with _on(index):
        pool = _POOL[0]
        alloc, res, free_blocks = pool.used_bytes(), pool.total_bytes(), pool.n_free_blocks()
    peak_alloc, peak_res = peaks(index)
    return {"allocated_bytes.all.current": alloc, "allocated_bytes.all.peak": peak_alloc,
            "reserved_bytes.all.current": res, "reserved_bytes.all.peak": peak_res,
            "inactive_split_bytes.all.current": res - alloc,
            "inactive_split.all.current": free_blocks,
            "num_alloc_retries": _COUNTS["num_alloc_retries"],
            "num_ooms": _COUNTS["num_ooms"], "num_pending_frees": len(_PENDING)}


# ---------------------------------------------------------------------- pinned host memory
def pinned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` in page-locked host memory."""
    out = pinned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def pinned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous numpy array in page-locked host memory."""
    from .runtime import cupy
    cp = cupy()
    dtype = np.dtype(dtype)
    n = 1
    for s in shape:
        n *= s
    mem = cp.cuda.alloc_pinned_memory(max(n * dtype.itemsize, 1))
    return np.frombuffer(mem, dtype, n).reshape(shape)


def is_pinned(a: np.ndarray) -> bool:
    """Whether the numpy array ``a`` lies in page-locked memory (any, not only ember's)."""
    if not runtime.initialized() or a.size == 0:
        return False
    from cupy.cuda import pinned_memory
    return bool(pinned_memory.is_memory_pinned(a.__array_interface__["data"][0]))
