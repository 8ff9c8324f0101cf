"""Shared kernels of the convolution, pooling and resampling families: argument normalisation
with PyTorch's messages, padded sliding-window views, and the scatter-add that is their adjoint.

Everything here works on numpy arrays laid out as ``(*lead, *spatial)``: the last ``nd`` axes
are the spatial ones, the leading axes (batch, channels) are carried along.
"""

from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from .. import _dtype as D

HALF = (np.dtype(np.float16), D.bfloat16.np)
_COUNT = {1: "a single int", 2: "a tuple of two ints", 3: "a tuple of three ints"}


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) or (
        hasattr(v, "__index__") and not isinstance(v, (float, bool)))


def int_tuple(opname: str, argname: str, value, nd: int, allow_single: bool = True) -> tuple:
    """``value`` (an int, or a sequence of ``nd`` ints, or of 1 int when ``allow_single``) as an
    ``nd``-tuple, or None when its length does not fit (the caller raises its op's own message).
    Non-integers are a TypeError as in PyTorch's argument parser."""
    if not isinstance(value, (tuple, list)):
        if not is_int(value):
            raise TypeError(f"{opname}(): argument '{argname}' must be tuple of ints, not "
                            f"{type(value).__name__}")
        return (int(value),) * nd
    for pos, v in enumerate(value):
        if not is_int(v):
            raise TypeError(f"{opname}(): argument '{argname}' must be tuple of ints, but found "
                            f"element of type {type(v).__name__} at pos {pos}")
    seq = tuple(int(v) for v in value)
    if len(seq) == 1 and allow_single:
        return seq * nd
    return seq if len(seq) == nd else None


def pool_arg(opname: str, argname: str, value, nd: int, verb: str = "must either be",
             caller: str | None = None) -> tuple:
    """A pooling ``kernel_size``/``stride``/``padding``/``dilation`` as an ``nd``-tuple.
    ``caller`` names the op in type errors when it differs from ``opname``."""
    r = int_tuple(caller or opname, argname, value, nd)
    if r is None:
        extra = " omitted," if argname == "stride" else ""
        raise RuntimeError(f"{opname}: {argname} {verb}{extra} {_COUNT[1]}, or {_COUNT[nd]}")
    return r


def prod(xs) -> int:
    return math.prod(int(x) for x in xs)


def upcast(a: np.ndarray) -> np.ndarray:
    """float16/bfloat16 arrays compute in float32 (PyTorch's CPU kernels do the same)."""
    return a.astype(np.float32) if a.dtype in HALF else a


def shape_str(shape, sep: str = " x ") -> str:
    return sep.join(str(int(s)) for s in shape)


def extent(out, kernel, stride, dilation) -> tuple:
    """How much of the (padded) input the windows of an ``out``-sized output read, per dim."""
    return tuple((o - 1) * s + d * (k - 1) + 1 if o > 0 else 0
                 for o, k, s, d in zip(out, kernel, stride, dilation))


def pad_to(xp, a: np.ndarray, nd: int, lo, size, fill=0) -> np.ndarray:
    """``a`` placed at offset ``lo`` of a ``fill``-valued spatial grid of ``size`` (cropped to it;
    a negative ``lo`` crops the front). A view of ``a`` when no padding is needed, so windows
    then read the input in place."""
    spatial = a.shape[a.ndim - nd:]
    if all(lo_d <= 0 and e - lo_d <= s for lo_d, e, s in zip(lo, size, spatial)):
        return a[(Ellipsis,) + tuple(slice(-lo_d, e - lo_d) for lo_d, e in zip(lo, size))]
    shape = a.shape[:a.ndim - nd] + tuple(size)
    buf = xp.zeros(shape, a.dtype) if fill == 0 else xp.full(shape, fill, a.dtype)
    dst, src = [], []
    for lo_d, e, s in zip(lo, size, spatial):
        d0, s0 = max(lo_d, 0), max(-lo_d, 0)
        n = max(0, min(s - s0, e - d0))
        dst.append(slice(d0, d0 + n))
        src.append(slice(s0, s0 + n))
    buf[(Ellipsis,) + tuple(dst)] = a[(Ellipsis,) + tuple(src)]
    return buf


def windows(xp, a: np.ndarray, nd: int, kernel, stride, dilation, out) -> np.ndarray:
    """View ``(*lead, *out, *kernel)`` of the sliding windows of ``a`` (no copy), read-only
    where the array library has the flag (numpy; CuPy's arrays have none)."""
    st = a.strides
    lead = a.ndim - nd
    shape = a.shape[:lead] + tuple(out) + tuple(kernel)
    strides = st[:lead] + tuple(s * t for s, t in zip(stride, st[lead:])) + \
        tuple(d * t for d, t in zip(dilation, st[lead:]))
    view = xp.lib.stride_tricks.as_strided(a, shape, strides)
    if getattr(view.flags, "writeable", False):
        view.flags.writeable = False  # overlapping windows: a write would alias
    return view


def padded_windows(xp, a, nd, kernel, stride, dilation, lo, out, fill=0):
    """The windows of ``a`` zero- (or ``fill``-) padded by ``lo`` in front, ``out`` per dim."""
    return windows(xp, pad_to(xp, a, nd, lo, extent(out, kernel, stride, dilation), fill),
                   nd, kernel, stride, dilation, out)


def scatter_windows(xp, part, lead_shape, kernel, stride, dilation, out, lo, size, dtype,
                    trail_shape=()):
    """The adjoint of ``padded_windows``: add each window's values back onto the input grid.

    The grid is laid out ``(*lead, *spatial, *trail)``; ``part(k)`` returns kernel offset
    ``k``'s contribution, shaped ``(*lead, *out, *trail)``. One vectorised add per kernel offset;
    callers that can should put the batch-like dims in ``trail`` so every add runs over long
    contiguous rows. The result is cropped to ``size`` at offset ``lo``.
    """
    ext = extent(out, kernel, stride, dilation)
    full = tuple(max(e, lo_d + s) for e, lo_d, s in zip(ext, lo, size))
    buf = xp.zeros(tuple(lead_shape) + full + tuple(trail_shape), dtype)
    head = (slice(None),) * len(lead_shape)
    if all(o > 0 for o in out):
        for k in itertools.product(*(range(kk) for kk in kernel)):
            sl = tuple(slice(kd * d, kd * d + (o - 1) * s + 1, s)
                       for kd, d, o, s in zip(k, dilation, out, stride))
            buf[head + sl] += part(k)
    if full == tuple(size):
        return buf
    return buf[head + tuple(slice(lo_d, lo_d + s) for lo_d, s in zip(lo, size))]


def pool_out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length (ceil mode drops a last window starting in the padding)."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def type_name(a) -> str:
    """PyTorch's scalar type name for an array's dtype (``Float``, ``Long``, ...)."""
    return _SCALAR_NAMES.get(np.dtype(a.dtype), str(a.dtype))


_SCALAR_NAMES = {np.dtype(k): v for k, v in [
    (np.float32, "Float"), (np.float64, "Double"), (np.float16, "Half"), (D.bfloat16.np,
                                                                         "BFloat16"),
    (np.int64, "Long"), (np.int32, "Int"), (np.int16, "Short"), (np.int8, "Char"),
    (np.uint8, "Byte"), (np.bool_, "Bool"), (np.complex64, "ComplexFloat"),
    (np.complex128, "ComplexDouble")]}
