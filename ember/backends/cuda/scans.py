"""The CUDA backend's scans as ember's own Triton kernel (``scan_kernels.py``), registered as
"kernel" overrides (ops/registry.py): ``cumsum``, ``cumprod``, ``cummax``, ``cummin``,
``logcumsumexp``.

Each wrapper takes the op's arrays (CuPy's on the GPU; numpy's under Triton's interpreter,
which is how CI runs them) and returns the results, or None where it does not apply, so the
impl runs on CuPy and raises its own errors: bad dims, complex inputs (CuPy's cumsum and
cumprod keep them; the others refuse them), a bool result of cumsum / cumprod, integer
inputs of logcumsumexp, 0-d inputs (a copy), empty inputs of the sums, products and
logcumsumexp. Empty inputs of cummax / cummin get empty results here (their impl is
numpy's).

Dtypes as PyTorch's CUDA kernels: cumsum / cumprod of integers and bool accumulate in int64
(their default result), of float16 / bfloat16 in float32 rounded once at the store, of
float64 in float64; a ``dtype=`` argument converts the elements first. cummax / cummin take
bool, integers and floats (half types unwidened: ``widens_half``), logcumsumexp floats.

Layout: the input is seen as (outer, n, inner) around the scanned dim with one stride per
axis (the dims before and after it merged where their strides allow; a layout that does not
merge is copied first), so transposes and slices are read in place. Results are contiguous.
"""

from __future__ import annotations

import operator

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _pow2, _three, _xp

__all__ = ["BLOCK", "OVERRIDES", "STATS", "register"]

BLOCK = 1024  # elements of a row scanned per step of a program's loop
STATS = {"launches": 0}
SUM, PROD, MAX, MIN, LOGSUMEXP = range(5)  # scan_kernels' OP

_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_U8 = np.dtype(np.uint8)
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_INTS = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64))
_REAL = _FLOATS | _INTS
_MAX_ROWS = 2**31 - 1  # programs in one launch


def kernels():
    """The Triton kernel module (scan_kernels.py), imported at its first use."""
    return adapter.kernel_module("scan_kernels")


def _axis(dim, ndim: int):
    """A single ``dim`` (an integer, or what converts to one as the impl converts it) as an
    axis of an ``ndim``-d array, or None where the impl raises."""
    if isinstance(dim, (bool, np.bool_)):
        return None
    try:
        dim = operator.index(dim)
    except Exception:  # noqa: BLE001 - the impl raises its own error for this dim
        return None
    n = max(ndim, 1)
    return dim % n if -n <= dim < n else None


def _ident(op: int, acc: np.dtype):
    """The carry a row starts from, as the Python number the kernel takes for ``acc``."""
    if op == SUM:
        return 0.0 if acc.kind == "f" else 0
    if op == PROD:
        return 1.0 if acc.kind == "f" else 1
    if acc.kind == "f":
        return float("inf") if op == MIN else float("-inf")
    info = np.iinfo(np.int64)
    return int(info.max) if op == MIN else int(info.min)


def _run(x, axis: int, op: int, out_dt):
    """``op`` along ``axis`` of the non-empty array ``x`` (ndim >= 1) into a new contiguous
    array of ``out_dt`` (with the int64 indices for MAX / MIN), or None for a launch too
    large."""
    xp = _xp(x)
    found = _three(x, axis)
    if found is None:
        x = xp.ascontiguousarray(x)
        found = _three(x, axis)
    (outer, n, inner), (so, sn, si) = found
    if outer * inner > _MAX_ROWS:
        return None
    out_dt = np.dtype(out_dt)
    y = xp.empty(x.shape, out_dt)
    indexed = op in (MAX, MIN)
    yi = xp.empty(x.shape, _I64) if indexed else y
    acc = _F64 if out_dt == _F64 else np.dtype(np.float32) if out_dt in _FLOATS else _I64
    tl = kernels().tl
    block = min(_pow2(n), BLOCK)
    STATS["launches"] += 1
    # bool arrays travel as their bytes (0 / 1): the same order, sums and products
    xs = x.view(_U8) if x.dtype == _BOOL else x
    ys = y.view(_U8) if out_dt == _BOOL else y
    adapter.launch(kernels().scan, (outer * inner,),
                   adapter.pointers([xs, ys, yi]) + [n, inner, so, sn, si],
                   num_warps=4 if block <= 1024 else 8, OP=op,
                   ACC=tl.float64 if acc == _F64 else tl.float32 if acc.kind == "f"
                   else tl.int64, IDENT=_ident(op, acc), BLOCK=block)
    return (y, yi) if indexed else y


def _cumulative(op: int):
    """cumsum (SUM) or cumprod (PROD) of a real or bool array, into ``dtype``."""
    def kernel(input, dim, *, dtype=None, **unknown):
        if unknown or input.dtype not in _REAL and input.dtype != _BOOL:
            return None
        if dtype is None:
            out_dt = _I64 if input.dtype.kind in "biu" else input.dtype
        else:
            out_dt = getattr(dtype, "np", None)
            if out_dt is None or np.dtype(out_dt) not in _REAL:
                return None
        axis = _axis(dim, input.ndim)
        if axis is None or input.ndim == 0 or not input.size:
            return None
        return _run(input, axis, op, out_dt)
    return kernel


def _running(op: int):
    """cummax (MAX) or cummin (MIN) of a real or bool array -> (values, indices)."""
    def kernel(input, dim, **unknown):
        if unknown or input.dtype not in _REAL and input.dtype != _BOOL:
            return None
        axis = _axis(dim, input.ndim)
        if axis is None or input.ndim == 0:
            return None
        if not input.size:
            xp = _xp(input)
            return xp.empty(input.shape, input.dtype), xp.empty(input.shape, _I64)
        return _run(input, axis, op, input.dtype)
    kernel.widens_half = True
    return kernel


def _logcumsumexp(input, dim, **unknown):
    """logcumsumexp of a real float array."""
    if unknown or input.dtype not in _FLOATS:
        return None
    axis = _axis(dim, input.ndim)
    if axis is None or input.ndim == 0 or not input.size:
        return None
    return _run(input, axis, LOGSUMEXP, input.dtype)


_logcumsumexp.widens_half = True

OVERRIDES = {
    "cumsum": _cumulative(SUM),
    "cumprod": _cumulative(PROD),
    "cummax": _running(MAX),
    "cummin": _running(MIN),
    "logcumsumexp": _logcumsumexp,
}


def register(backend) -> None:
    """Register the scan kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
