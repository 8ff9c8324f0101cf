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

Planning and launching (layout, tiles, the split of n between programs, the plan cache):
``reduction_plans.py``. The wrappers here check and normalise the op's arguments; everything
that follows from them and the input's shape, strides and dtype is planned once.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from ... import _dtype as D
from .reduction_plans import (ARGMAX, ARGMIN, MAX, MIN, PROD, STATS, SUM, VAR, forget,
                              planned)

__all__ = ["OVERRIDES", "STATS", "register"]

_I64 = np.dtype(np.int64)
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_INTS = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64))
_BOOL = np.dtype(np.bool_)
_REAL = _FLOATS | _INTS
_REAL_OR_BOOL = _REAL | {_BOOL}


# ---------------------------------------------------------------------- arguments
def _axes(dim, ndim: int):
    """``dim`` (None, an int, or a sequence; empty or None: every dim) as sorted axes, or None
    where the impl raises (bad types, out of range, repeated)."""
    if type(dim) is int and ndim:  # the common case first
        return (dim % ndim,) if -ndim <= dim < ndim else None
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
    return v is True or v is False or isinstance(v, np.bool_) or \
        (isinstance(v, int) and v in (0, 1))


def _run(input, axes, op: int, pre, out_dt, keepdim: bool, fin: int = 0, shape=None):
    """OP over ``axes`` of a non-empty ``input`` -> [results, indices (ARGMAX / ARGMIN)]
    shaped as the op's outputs (``shape``; None: from keepdim)."""
    return planned(input, (op, axes, keepdim, pre, out_dt, fin, shape, 0))


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
    types = _sum_dtype(input, None)
    if types is None or not input.size:
        return None
    size = tuple(size)
    key = (input.shape, size, tuple(map(type, size)))  # types: 2.0 == 2 but is refused
    axes = _SIZES.get(key, _SIZES)
    if axes is _SIZES:
        axes = _SIZES[key] = _summed(input.shape, size)
        if len(_SIZES) > 256:
            forget(_SIZES)
    if axes is None:
        return None
    return _run(input, axes[0], SUM, types[0], types[1], True, shape=axes[1])[0]


_SIZES: dict = {}  # sum_to_size: (shape, size, its types) -> _summed(shape, size)


def _summed(shape, size):
    """(the axes summed to bring ``shape`` to ``size``, ``size`` as ints), or None where the
    impl takes it (its errors; nothing to sum: its copy)."""
    try:
        size = tuple(operator.index(s) for s in size)
    except TypeError:
        return None
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        return None
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and shape[lead + i] != 1)
    return (axes, size) if axes else None


def _mean(input, dim=None, keepdim=False, *, dtype=None):
    out_dt = input.dtype if dtype is None else getattr(dtype, "np", None)
    if out_dt is None:
        return None
    out_dt = np.dtype(out_dt)
    if out_dt not in _FLOATS or input.dtype not in _REAL_OR_BOOL or not input.size or \
            not _flag(keepdim) or (axes := _axes(dim, input.ndim)) is None:
        return None
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
        return tuple(_run(input, axes, ARGMAX if op == MAX else ARGMIN, input.dtype,
                          input.dtype, bool(keepdim)))
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
        flat = dim is None and not keepdim  # the index into the flattened input
        return _run(input, axes, op, input.dtype, input.dtype, bool(keepdim),
                    shape=() if flat else None)[1]
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
        dt = input.dtype
        got = planned(input, (VAR, axes, bool(keepdim), dt, dt, 2 if root else 1, None,
                              correction))
        if got is None:
            return None  # no degrees of freedom: the impl warns
        v, mean = got
        if not with_mean:
            return v
        return v, (mean if mean.dtype == dt else mean.astype(dt))
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
