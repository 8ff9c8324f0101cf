"""Converting an array to another dtype as PyTorch converts a tensor (``x.to(dtype)``,
``copy_``, a number stored into a tensor), float8 included.

numpy's ``astype`` does this for most pairs. float8 differs: PyTorch converts every dtype to
float8 through float32 and float8 to every dtype through float32, and at the edges its float32
conversions are not ml_dtypes':

- float8_e4m3fn (no infinity) saturates: out-of-range values and +-inf become +-448, where
  ml_dtypes makes NaN;
- float8_e5m2's NaN is 0x7F/0xFF (ml_dtypes: 0x7E/0xFE); overflow is +-inf in both;
- widening keeps a NaN's sign and mantissa bits in the float32 (quiet bit set); ml_dtypes
  makes the canonical NaN. float8 -> bfloat16 gives bfloat16's positive canonical NaN.

Both directions round to nearest even (ml_dtypes' casts do the rounding).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import _dtype as D

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _widening_table(dt: D.dtype) -> np.ndarray:
    """The float32 value of each of the 256 float8 bit patterns, NaNs with PyTorch's bits."""
    codes = np.arange(256, dtype=np.uint8)
    table = codes.view(dt.np).astype(_F32)
    mant_bits = int(ml_dtypes.finfo(dt.np).nmant)
    nan = np.isnan(table)
    c = codes[nan].astype(np.uint32)
    bits = (c >> 7) << 31 | 0x7FC00000 | (c & ((1 << mant_bits) - 1)) << (23 - mant_bits)
    table.view(np.uint32)[nan] = bits
    return table


_WIDEN = {dt.np: _widening_table(dt) for dt in D.FLOAT8}
# what float8 NaNs become in these dtypes (bit patterns), where widening through float32 differs
_NAN_FROM_FLOAT8 = {D.bfloat16.np: (np.uint16, 0x7FC0)}


def widen(a: np.ndarray) -> np.ndarray:
    """A float8 array's values as float32, bit for bit as PyTorch widens them."""
    return _WIDEN[a.dtype][a.view(np.uint8)]


def narrow(a: np.ndarray, dt: D.dtype) -> np.ndarray:
    """A real array (float32 preferably) rounded to float8 dtype ``dt`` as PyTorch rounds."""
    f = a if a.dtype == _F32 else np.asarray(a).astype(_F32)
    if dt is D.float8_e4m3fn:
        lim = float(ml_dtypes.finfo(dt.np).max)
        return np.clip(f, -lim, lim).astype(dt.np)  # NaN stays NaN
    r = f.astype(dt.np)
    nan = np.isnan(f)
    if nan.any():
        r.view(np.uint8)[nan] |= 1  # 0x7E/0xFE -> PyTorch's 0x7F/0xFF
    return r


def cast(a, dt: D.dtype):
    """``a`` (an array or a number) as an array of ``dt``, converted as PyTorch converts:
    complex to real keeps the real part, float64 rounds to half precision through float32
    (as it does to float8). ``a`` itself when it already has that dtype."""
    if not hasattr(a, "dtype") or isinstance(a, np.generic):  # a number: a 0-d array
        a = np.asarray(a)
    src = a.dtype
    if src == dt.np:
        return a
    if src.kind == "c" and dt.kind != "c":
        a = a.real
    if src in _WIDEN:
        r = widen(a)
        if r.dtype == dt.np or dt.is_float8:
            return r if r.dtype == dt.np else narrow(r, dt)
        out = r.astype(dt.np)
        nan_bits = _NAN_FROM_FLOAT8.get(dt.np)
        if nan_bits is not None:
            out.view(nan_bits[0])[np.isnan(r)] = nan_bits[1]
        return out
    if dt.is_float8:
        return narrow(a, dt)
    if src == _F64 and dt.itemsize == 2 and dt.is_floating_point:
        a = a.astype(_F32)  # PyTorch rounds double -> half through float
    return a.astype(dt.np)
