"""The CUDA backend's reductions as ember's own Triton kernel (``reduction_kernels.py``),
registered as "kernel" overrides (ops/registry.py): ``sum``, ``sum_to_size`` (autograd's
un-broadcasting), ``mean``, ``prod``, ``amax``, ``amin``, ``max`` / ``min`` (full, and along a
dim with indices), ``argmax``, ``argmin``, ``var``, ``std``, ``var_mean``, ``std_mean``.

Each wrapper takes the op's arrays (CuPy's on the GPU; numpy's under Triton's interpreter,
which is how CI runs them) and returns the results, or None where it does not apply, so the
impl runs on CuPy and raises its own errors: bad or repeated dims, empty inputs (sums of
nothing and extrema of nothing alike), complex dtypes, extrema of bool, ``dtype=`` values
other than real numbers, variances with no degrees of freedom (the impl warns). What stays on
CuPy's kernels: those cases, and ``nansum``, ``nanmean``, ``aminmax``, ``all``, ``any``,
``count_nonzero``, ``logsumexp`` and ``norm``.

Accumulation as PyTorch's CUDA kernels: float32 for float16 / bfloat16 / float32, float64 for
float64, int64 for integers and bool (a sum or product of int32 or bool is int64). The ops
that widen half inputs before their impl (amax, max, argmax, var, ...) hand them to these
wrappers unwidened (``widens_half``). Extrema propagate NaN (the first NaN's index for the
index ops); equal values give the first index. var / std: the mean first, then the sum of
squared deviations from it, each in the accumulator type.

Layout: the reduced dims are merged into one axis n, the dims before and after them into
``outer`` and ``inner`` ((outer, n, inner), one element stride per axis), where the strides
allow; otherwise the kept dims are moved in front of the reduced ones (a view) and merged
there, or, failing that too, the input is copied. A reduction over the last dims reads rows
(a program owns a few rows in [rows, n] tiles); one over leading dims with the inner dims
contiguous reads columns (a program owns a block of columns and walks n). When those give
too few programs to fill the GPU (a few long rows, a full reduction, the bias-gradient sum
over rows), n is also split between programs: a first launch writes per-split partials, a
second reduces them; no atomics, so results are the same from run to run.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _merged, _pow2, _sm_count, _xp
from .runtime import cupy

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_INTS = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64))
_BOOL = np.dtype(np.bool_)
_REAL = _FLOATS | _INTS
TILE = 4096  # elements of one program's tile (2048 in float64)
COLUMNS = 256  # at most this many contiguous inner columns per program
STATS = {"launches": 0}
SUM, PROD, MAX, MIN, ARGMAX, ARGMIN, SQDEV = range(7)


def kernels():
    """The Triton kernel module (reduction_kernels.py), imported at its first use."""
    return adapter.kernel_module("reduction_kernels")


@functools.cache
def _tl_type(np_dtype):
    tl = kernels().tl
    return {np.dtype(np.float16): tl.float16, np.dtype(D.bfloat16.np): tl.bfloat16,
            _F32: tl.float32, _F64: tl.float64, np.dtype(np.uint8): tl.uint8,
            np.dtype(np.int8): tl.int8, np.dtype(np.int16): tl.int16,
            np.dtype(np.int32): tl.int32, _I64: tl.int64, _BOOL: tl.int1}[np.dtype(np_dtype)]


def _acc_of(dt) -> np.dtype:
    """The accumulator type for elements of numpy dtype ``dt``."""
    return _F64 if dt == _F64 else _F32 if dt in _FLOATS else _I64


def _ident(op: int, acc: np.dtype):
    """What masked lanes hold, as the Python number Triton takes for ``acc``."""
    if acc.kind == "f":
        return {SUM: 0.0, SQDEV: 0.0, PROD: 1.0, MAX: -math.inf, ARGMAX: -math.inf,
                MIN: math.inf, ARGMIN: math.inf}[op]
    info = np.iinfo(np.int64)
    return {SUM: 0, PROD: 1, MAX: int(info.min), ARGMAX: int(info.min), MIN: int(info.max),
            ARGMIN: int(info.max)}[op]


def _halves(v: float):
    """``v`` as float32 high and low parts (Triton passes Python floats as float32)."""
    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi))


# ---------------------------------------------------------------------- arguments
def _axes(dim, ndim: int):
    """``dim`` (None, an int, or a sequence; empty or None: every dim) as sorted axes, or None
    where the impl raises (bad types, out of range, repeated)."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    ds = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    out = set()
    n = max(ndim, 1)
    for d in ds:
        if isinstance(d, bool):
            return None
        try:
            d = operator.index(d)
        except TypeError:
            return None
        if not -n <= d < n:
            return None
        out.add(d % n)
    if len(out) != len(ds):
        return None
    return tuple(sorted(out)) if ndim else ()


def _one_axis(dim, ndim: int):
    """A single int ``dim`` as an axis, or None where the impl raises."""
    if isinstance(dim, (bool, tuple, list)) or dim is None:
        return None
    return _axes(dim, ndim)


def _flag(v) -> bool:
    return isinstance(v, (bool, np.bool_)) or (isinstance(v, int) and v in (0, 1))


def _out_shape(shape, axes, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes)


# ---------------------------------------------------------------------- layout and launches
def _layout(a, axes):
    """(array, (outer, n, inner), element strides) reducing ``axes`` of ``a`` (at least 1-d,
    non-empty), outputs in the order of the kept dims; copies only when no view fits."""
    st = [s // a.itemsize for s in a.strides]
    shape = a.shape
    lo, hi = axes[0], axes[-1] + 1
    if hi - lo == len(axes):  # one run of dims: (before, run, after)
        parts = [_merged(shape[:lo], st[:lo]), _merged(shape[lo:hi], st[lo:hi]),
                 _merged(shape[hi:], st[hi:])]
        if None not in parts:
            return a, tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    kept = [d for d in range(a.ndim) if d not in axes]
    perm = kept + list(axes)
    k = len(kept)
    pshape, pst = [shape[d] for d in perm], [st[d] for d in perm]
    outer, run = _merged(pshape[:k], pst[:k]), _merged(pshape[k:], pst[k:])
    if outer is None or run is None:
        a = _xp(a).ascontiguousarray(a.transpose(perm))
        n = math.prod(pshape[k:])
        return a, (a.size // n, n, 1), (n, 1, 0)
    return a, (outer[0], run[0], 1), (outer[1], run[1], 0)


def _want() -> int:
    """How many programs a launch should have to fill the device."""
    if adapter.interpreting():
        return 4
    return 4 * _sm_count(cupy().cuda.runtime.getDevice())


def _plan(outer: int, n: int, inner: int, si: int, f64: bool):
    """(BLOCK_I, BLOCK_N, inner blocks, splits of n, chunk of n per split)."""
    tile = TILE // 2 if f64 else TILE
    if si == 1 and inner > 1:  # columns: a block of contiguous inner indices walks n
        bi = min(_pow2(inner), COLUMNS, tile)
        bn = min(_pow2(n), max(tile // bi, 1))
    else:  # rows (inner, here the rows' index, steps by a row)
        bn = min(_pow2(n), tile)
        bi = min(_pow2(inner), max(tile // bn, 1))
    iblocks = -(-inner // bi)
    progs = outer * iblocks
    splits, chunk = 1, n
    want = _want()
    if progs < want and n > 2 * bn:
        splits = min(-(-want // progs), -(-n // (2 * bn)))
        chunk = -(-(-(-n // splits)) // bn) * bn
        splits = -(-n // chunk)
    return bi, bn, iblocks, splits, chunk


def _launch(x, xi, mean, y, yi, scalars, grid: int, warps: int, **constexprs) -> None:
    STATS["launches"] += 1
    arrays = adapter.pointers([x, xi, mean, y, yi])
    adapter.launch(kernels().reduce, (grid,), arrays + list(scalars), num_warps=warps,
                   **constexprs)


def _reduce(x, sizes, strides, op: int, pre, out_dt, fin: int = 0, div: float = 1.0,
            mean=None, xi=None):
    """OP over n of ``x`` seen as ``sizes`` = (outer, n, inner) with ``strides``, elements
    read as ``pre`` -> (results as a flat (outer * inner) array of ``out_dt``, their indices
    for ARGMAX / ARGMIN, else None)."""
    outer, n, inner = sizes
    so, sn, si = strides
    if inner == 1:  # rows: their index becomes the tile's first axis, so few rows share a program
        outer, inner, so, si = 1, outer, 0, so
    acc = _acc_of(np.dtype(pre))
    bi, bn, iblocks, splits, chunk = _plan(outer, n, inner, si, acc == _F64)
    xp = _xp(x)
    indexed = op in (ARGMAX, ARGMIN)
    count = outer * splits * inner
    y = xp.empty(count, out_dt if splits == 1 else acc)
    yi = xp.empty(count, _I64) if indexed else y
    warps = 4 if bi * bn <= 2048 else 8
    _launch(x, x if xi is None else xi, x if mean is None else mean, y, yi,
            [n, inner, iblocks, splits, chunk, so, sn, si, _ident(op, acc),
             *_halves(div if splits == 1 else 1.0)],
            outer * iblocks * splits, warps, OP=op, PRE=_tl_type(pre), ACC=_tl_type(acc),
            IDX_IN=xi is not None, FIN=fin if splits == 1 else 0, BLOCK_I=bi, BLOCK_N=bn)
    if splits == 1:
        return y, (yi if indexed else None)
    # the partials (outer, splits, inner), reduced over the splits
    second = SUM if op == SQDEV else op
    return _reduce(y, (outer, splits, inner), (splits * inner, inner, 1), second, acc, out_dt,
                   fin, div, xi=yi if indexed else None)


def _run(input, axes, op: int, pre, out_dt, keepdim: bool, fin: int = 0, div=None,
         mean=None):
    """OP over ``axes`` of a non-empty ``input`` -> (results, indices or None) shaped as the
    op's outputs; ``div`` None: the count of reduced elements."""
    shape = input.shape
    if input.ndim == 0:
        input, axes = input.reshape(1), (0,)
    x, sizes, strides = _layout(input, axes)
    if div is None:
        div = float(sizes[1])
    v, i = _reduce(x, sizes, strides, op, pre, out_dt, fin, div, mean)
    out = _out_shape(shape, axes if shape else (), keepdim)
    return v.reshape(out), (None if i is None else i.reshape(out))


# ---------------------------------------------------------------------- the ops
def _sum_dtype(a, dtype):
    """(elements' dtype, result dtype) of a sum or product, or None: ``dtype=`` converts the
    elements first; without it integers and bool sum to int64."""
    if a.dtype not in _REAL and a.dtype != _BOOL:
        return None
    if dtype is None:
        return a.dtype, (_I64 if a.dtype.kind in "biu" else a.dtype)
    dt = getattr(dtype, "np", None)
    if dt is None or np.dtype(dt) not in _REAL:
        return None
    return np.dtype(dt), np.dtype(dt)


def _summing(op: int):
    """sum / prod(input, dim=None, keepdim=False, *, dtype=None)."""
    def kernel(input, dim=None, keepdim=False, *, dtype=None):
        types = _sum_dtype(input, dtype)
        if types is None or not input.size or not _flag(keepdim):
            return None
        if op == PROD:  # one dim or none; keepdim only with a dim
            axes = tuple(range(input.ndim)) if dim is None else _one_axis(dim, input.ndim)
            keepdim = keepdim and dim is not None
        else:
            axes = _axes(dim, input.ndim)
        if axes is None:
            return None
        return _run(input, axes, op, types[0], types[1], bool(keepdim))[0]
    return kernel


def _sum_to_size(input, size):
    """sum_to_size(input, size): the broadcast dims of ``size`` summed (autograd's
    un-broadcasting of gradients)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        size = tuple(operator.index(s) for s in size)
    except TypeError:
        return None
    shape = input.shape
    lead = len(shape) - len(size)
    types = _sum_dtype(input, None)
    if types is None or not input.size or lead < 0 or \
            any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        return None
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and shape[lead + i] != 1)
    if not axes:
        return None  # nothing to sum: the impl's copy
    return _run(input, axes, SUM, types[0], types[1], True)[0].reshape(size)


def _mean(input, dim=None, keepdim=False, *, dtype=None):
    out_dt = input.dtype if dtype is None else getattr(dtype, "np", None)
    if out_dt is None or np.dtype(out_dt) not in _FLOATS or input.dtype not in _REAL | {_BOOL} \
            or not input.size or not _flag(keepdim) or (axes := _axes(dim, input.ndim)) is None:
        return None
    out_dt = np.dtype(out_dt)
    return _run(input, axes, SUM, out_dt, out_dt, bool(keepdim), fin=1)[0]


def _extremum(op: int):
    """amax / amin(input, dim=(), keepdim=False)."""
    def kernel(input, dim=(), keepdim=False):
        if input.dtype not in _REAL or not input.size or not _flag(keepdim) or \
                (axes := _axes(dim, input.ndim)) is None:
            return None
        return _run(input, axes, op, input.dtype, input.dtype, bool(keepdim))[0]
    return kernel


def _max_min(op: int):
    """max / min(input, dim=None, keepdim=False): the full reduction, or (values, indices)
    along one dim."""
    def kernel(input, dim=None, keepdim=False):
        if input.dtype not in _REAL or not input.size or not _flag(keepdim):
            return None
        if dim is None:
            if keepdim:
                return None
            return _run(input, tuple(range(input.ndim)), op, input.dtype, input.dtype,
                        False)[0]
        axes = _one_axis(dim, input.ndim)
        if axes is None:
            return None
        return _run(input, axes, ARGMAX if op == MAX else ARGMIN, input.dtype, input.dtype,
                    bool(keepdim))
    return kernel


def _arg(op: int):
    """argmax / argmin(input, dim=None, keepdim=False): the first index of the extremum
    (over the flattened input when dim is None)."""
    def kernel(input, dim=None, keepdim=False):
        if input.dtype not in _REAL or not input.size or not _flag(keepdim):
            return None
        if dim is None:
            axes = tuple(range(input.ndim))
        elif (axes := _one_axis(dim, input.ndim)) is None:
            return None
        idx = _run(input, axes, op, input.dtype, input.dtype, bool(keepdim))[1]
        if dim is None and not keepdim:
            idx = idx.reshape(())
        return idx
    return kernel


def _moments(root: bool, with_mean: bool):
    """var / std / var_mean / std_mean(input, dim=None, unbiased=None, keepdim=False, *,
    correction=None): the mean, then the squared deviations from it, divided by
    N - correction."""
    def kernel(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):  # var(input, unbiased)
            unbiased, dim = dim, None
        if unbiased is not None and (correction is not None or not _flag(unbiased)):
            return None
        if correction is None:
            correction = 0 if unbiased is False else 1
        if isinstance(correction, bool) or not isinstance(correction, numbers.Real) or \
                input.dtype not in _FLOATS or not input.size or not _flag(keepdim) or \
                (axes := _axes(dim, input.ndim)) is None:
            return None
        shape = input.shape
        if input.ndim == 0:
            input, axes = input.reshape(1), (0,)
        x, sizes, strides = _layout(input, axes)
        dof = sizes[1] - correction
        if dof <= 0:
            return None  # the impl warns
        acc = _acc_of(input.dtype)
        mean = _reduce(x, sizes, strides, SUM, input.dtype, acc, 1, float(sizes[1]))[0]
        v = _reduce(x, sizes, strides, SQDEV, input.dtype, input.dtype, 2 if root else 1,
                    float(dof), mean=mean)[0]
        out = _out_shape(shape, axes if shape else (), bool(keepdim))
        v = v.reshape(out)
        if not with_mean:
            return v
        return v, mean.astype(input.dtype).reshape(out)
    return kernel


def _widens_half(fn):
    """Mark an override of an op that widens float16 / bfloat16 inputs (``upcast_half``) as
    taking them as they are (ops/registry.py)."""
    fn.widens_half = True
    return fn


OVERRIDES = {
    "sum": _summing(SUM),
    "prod": _summing(PROD),
    "sum_to_size": _sum_to_size,
    "mean": _mean,
    "amax": _widens_half(_extremum(MAX)),
    "amin": _widens_half(_extremum(MIN)),
    "max": _widens_half(_max_min(MAX)),
    "min": _widens_half(_max_min(MIN)),
    "argmax": _widens_half(_arg(ARGMAX)),
    "argmin": _widens_half(_arg(ARGMIN)),
    "var": _widens_half(_moments(False, False)),
    "std": _widens_half(_moments(True, False)),
    "var_mean": _widens_half(_moments(False, True)),
    "std_mean": _widens_half(_moments(True, True)),
}


def register(backend) -> None:
    """Register the reductions as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
