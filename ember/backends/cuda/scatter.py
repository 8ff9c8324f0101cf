"""Unbuffered scatter updates on the CUDA backend: ``xp.ufunc_at(name, a, key, values)``,
numpy's ``getattr(numpy, name).at(a, key, values)`` for ``name`` in add / multiply / maximum /
minimum, through ember's Triton kernel (``scatter_kernels.py``). The op kernels that
accumulate into repeated indices call it: index_put(accumulate=True) (and with it the
backward of indexing, take and pdist), index_add, scatter(reduce=), scatter_add,
scatter_reduce, embedding's backward.

The key is what numpy's indexing takes. Integer arrays on the leading dims (trailing full
slices allowed) become one row index per element of their broadcast shape, and each row a
block of ``inner`` contiguous elements; any other key (a bool mask, indices after a slice)
is resolved to element positions through an index array over ``a``'s elements.

The kernel updates a contiguous array of a type its atomics take: bool and 8/16-bit
integers are updated as int32 and float16 / bfloat16 as float32, then stored back;
complex numbers only add (as two float lanes). Works on numpy arrays under Triton's
interpreter, which is how CI runs it.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _xp

__all__ = ["ufunc_at", "STATS"]

BLOCK = 512
STATS = {"launches": 0}
_OPS = {"add": 0, "multiply": 1, "maximum": 2, "minimum": 3}  # scatter_kernels' OP
_WIDER = {np.dtype(np.bool_): np.int32, np.dtype(np.int8): np.int32,
          np.dtype(np.uint8): np.int32, np.dtype(np.int16): np.int32,
          np.dtype(np.uint16): np.int32, np.dtype(np.float16): np.float32,
          D.bfloat16.np: np.float32}
_BITS = {4: np.int32, 8: np.int64}


def kernels():
    """The Triton kernel module (scatter_kernels.py), imported at its first use."""
    return adapter.kernel_module("scatter_kernels")


def _rows(xp, shape: tuple, key):
    """(row index array, dims it covers) for a key of integer arrays on the leading dims of
    ``shape`` (trailing full slices allowed), negative indices wrapped; None otherwise."""
    if not isinstance(key, tuple):
        key = (key,)
    k = len(key)
    while k and isinstance(key[k - 1], slice) and key[k - 1] == slice(None):
        k -= 1
    arrays = key[:k]
    if not k or not all(hasattr(i, "dtype") and i.dtype.kind in "iu" for i in arrays):
        return None
    lin = None
    for d, i in enumerate(arrays):
        i = i.astype(np.int64, copy=False)
        if shape[d]:
            i = i % shape[d]
        lin = i if lin is None else lin * shape[d] + i
    return lin, k


def ufunc_at(name: str, a, key, values) -> None:
    """``a[key] = name(a[key], values)`` with every repeated index taking effect."""
    op = _OPS[name]
    xp = _xp(a)
    rows = _rows(xp, a.shape, key)
    if rows is None:
        lin, k = xp.arange(a.size, dtype=np.int64).reshape(a.shape)[key], a.ndim
    else:
        lin, k = rows
    inner = math.prod(a.shape[k:])
    if lin.size * inner == 0:
        return
    store = np.dtype(_WIDER.get(a.dtype, a.dtype))  # the dtype the kernel updates
    work = store
    if store.kind == "c":  # (real, imaginary) float lanes
        if op:
            raise NotImplementedError(f"{name}.at on complex CUDA tensors: only sums scatter "
                                      "into complex tensors on CUDA")
        work, inner = np.dtype(f"f{store.itemsize // 2}"), inner * 2
    target = a if a.dtype == store and a.flags.c_contiguous else xp.ascontiguousarray(a, store)
    vals = xp.broadcast_to(xp.asarray(values), lin.shape + a.shape[k:])
    vals = xp.ascontiguousarray(vals, store).reshape(-1).view(work)
    out = target.reshape(-1).view(work)
    n = lin.size * inner
    floating = work.kind == "f"
    bits = out.view(_BITS[work.itemsize]) if floating else out
    STATS["launches"] += 1
    args = adapter.pointers([out, bits, xp.ascontiguousarray(lin.reshape(-1)), vals])
    adapter.launch(kernels().scatter_at, (-(-n // BLOCK),), args + [n, inner], num_warps=4,
                   OP=op, FLOAT=floating, BLOCK=BLOCK)
    if target is not a:
        a[...] = target if target.dtype == a.dtype else target.astype(a.dtype)
