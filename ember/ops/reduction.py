"""Reductions: sums and means, products, extrema, logical reductions, moments and norms.

``reduce_dims`` normalises ``dim=``; ``unreduce`` is the shared backward step that puts reduced
dimensions back so a gradient broadcasts to the input. ``select_backward`` routes the gradient
of an op that picks one element per slice (``max(dim)``, ``median(dim)``, ...) back to the
picked positions. Cumulative ops live in ``scans.py``, order statistics in ``sorting.py``.
"""

from __future__ import annotations

import builtins
import math
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .. import return_types as RT
from .._tensor import Tensor, _wrap_dim
from .bind import tensor_method
from .joining import cat
from ..backends.cpu import PARALLEL_MIN, parallel_sum
from .registry import OPS, op

RED = ("reduction",)
PUBLIC = ["max", "min"]
_INT64 = np.int64


# ---------------------------------------------------------------------- dims
def _as_int(v, name: str, arg: str = "dim", what: str = "int"):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, Tensor)):
        raise TypeError(f"{name}(): argument '{arg}' must be {what}, not {type(v).__name__}")
    return operator.index(v)


def reduce_dims(dim, ndim: int, name: str = "reduction") -> tuple:
    """``dim`` (None, int, or a sequence) as a sorted tuple of non-negative axes.

    None and an empty sequence mean every dimension. A 0-dim tensor accepts dims 0 and -1 and
    has no axes to reduce, so it gets ``()``.
    """
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        dims = tuple(_as_int(d, name, what="tuple of ints") for d in dim)
    else:
        dims = (_as_int(dim, name, what="tuple of ints"),)
    out = []
    for d in dims:
        w = _wrap_dim(d, ndim)
        if w in out:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        out.append(w)
    return tuple(sorted(out)) if ndim else ()


def one_dim(dim, ndim: int, name: str) -> int:
    """A single ``dim`` argument (an int), wrapped; 0 for a 0-dim tensor."""
    return _wrap_dim(_as_int(dim, name), ndim)


def keep_dims(t, dims: tuple, keepdim: bool):
    """Reinsert the reduced ``dims`` of ``t`` as size-1 dimensions (when not keepdim)."""
    if not keepdim:
        for d in dims:
            t = t.unsqueeze(d)
    return t


def unreduce(g, shape, dim, keepdim):
    """Broadcast a reduced gradient back to ``shape``."""
    if not keepdim and len(shape) and g.ndim:  # a full reduction's 0-d grad expands as it is
        g = keep_dims(g, reduce_dims(dim, len(shape)), False)
    return g.expand(shape)


def _count(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


def _acc_dtype(a: np.ndarray, dtype):
    if dtype is not None:
        return dtype.np
    if a.dtype.kind in "biu":
        return np.int64
    return None


def _half_up(a):
    return a.astype(np.float32) if a.dtype in (np.float16, D.bfloat16.np) else a


def _tname(a: np.ndarray) -> str:
    return D.TYPE_NAME[D.from_np(a.dtype)]


def _kind(a: np.ndarray) -> str:
    """The ember kind letter of an array's dtype (numpy calls bfloat16 "V")."""
    return "f" if a.dtype == D.bfloat16.np else a.dtype.kind


def _float_only(a: np.ndarray, msg: str):
    if _kind(a) not in "fc":
        raise RuntimeError(msg + _tname(a))


def _no_complex(a: np.ndarray, kernel: str):
    if a.dtype.kind == "c":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tname(a)}\'')


def _nonempty(a: np.ndarray, dims: tuple, name: str, full: bool, exc=RuntimeError):
    """Reductions without an identity (max, argmax, ...) refuse empty slices like PyTorch."""
    if a.size:
        return
    if full:
        extra = "" if exc is IndexError else (" Specify the reduction dim with the 'dim' "
                                              "argument.")
        raise exc(f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
                  + extra)
    for d in dims:
        if a.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


# ---------------------------------------------------------------------- backward helpers
def reverse_scan(fn, t, d: int):
    """``fn(t, d)`` run from the end of dimension ``d``: flip, scan, flip back."""
    return fn(t.flip(d), d).flip(d)


def _along(xp, n: int, d: int, ndim: int, start: int = 0) -> np.ndarray:
    """start..start+n-1 laid along dimension ``d`` of an ``ndim``-dim array (broadcastable)."""
    return xp.arange(start, start + n, dtype=_INT64).reshape([n if k == d else 1
                                                              for k in range(ndim)])


def exclusive_cumprod(x, d: int):
    """prod_{i<k} x_i along ``d`` (1 at the start), written without division so it is exact
    at zeros and differentiable: the slice is shifted one step right, a one put in front,
    then multiplied up."""
    n = x.shape[d]
    if n == 0:
        return x
    shape = list(x.shape)
    shape[d] = 1
    return cat([x.new_ones(tuple(shape)), x.narrow(d, 0, n - 1)], d).cumprod(d)


def select_backward(g, index, dim: int, keepdim: bool, shape):
    """Gradient of an op whose output is ``out[..., j, ...] = input[..., index[j], ...]``:
    ``g`` added into zeros at ``index`` (positions picked twice, as by cummax, accumulate)."""
    if len(shape) == 0:
        return g.reshape(())
    if not keepdim and index.ndim < len(shape):
        g, index = g.unsqueeze(dim), index.unsqueeze(dim)
    return g.new_zeros(tuple(shape)).scatter_add(dim, index, g)


def split_ties_backward(g, x, out, dims: tuple, keepdim: bool, nan_ties: bool = False):
    """Gradient of a value reduction (amax, max(), median(), ...): shared evenly between the
    elements equal to the result. ``nan_ties`` also treats NaN results as equal to NaN inputs."""
    o = keep_dims(out, dims, keepdim)
    mask = x == o
    if nan_ties:
        mask = mask | (x.isnan() & o.isnan())
    gk = keep_dims(g, dims, keepdim)
    return gk * mask / mask.sum(dims, keepdim=True)


# ---------------------------------------------------------------------- sums and means
@op(tags=RED, out_dtype="dtype")
def sum(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    """sum(input, dim=None, keepdim=False, *, dtype=None) -> Tensor"""
    if dim is None and dtype is None and not keepdim and input.dtype in _FULL_SUM_FAST:
        # x.sum() of a float tensor, the hot small-tensor case: no dim handling; only a large
        # array pays for the thread-pool split
        r = parallel_sum(input) if input.size >= _PARALLEL_SUM_MIN else input.sum()
        return xp.asarray(r)
    axes = reduce_dims(dim, input.ndim, "sum")
    acc = _acc_dtype(input, dtype)
    if len(axes) == input.ndim and input.dtype.kind in "fc" and not keepdim and \
            input.dtype not in (np.float16, D.bfloat16.np):
        r = parallel_sum(input, acc)  # a full reduction of a large array: split over threads
    else:
        r = _half_up(input).sum(axis=axes, keepdims=keepdim, dtype=acc)
    return xp.asarray(r).astype(acc or input.dtype, copy=False)


# full sums that keep their dtype and may split over threads (not float16/bfloat16: they
# accumulate in float32)
_FULL_SUM_FAST = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                                  np.complex128))
_PARALLEL_SUM_MIN = 4 * PARALLEL_MIN  # parallel_sum's own threshold, checked before its call


@sum.def_backward
def _(ctx, g):
    x = ctx.input
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim)


@op(tags=RED, saves=("input",))
def nansum(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    """nansum(input, dim=None, keepdim=False, *, dtype=None) -> Tensor: NaNs count as zero."""
    if input.dtype.kind == "c":
        raise RuntimeError("nansum on CPU does not support complex inputs")
    axes = reduce_dims(dim, input.ndim, "nansum")
    acc = _acc_dtype(input, dtype)
    r = xp.nansum(_half_up(input), axis=axes, keepdims=keepdim, dtype=acc)
    return xp.asarray(r).astype(acc or input.dtype, copy=False)


@nansum.def_backward
def _(ctx, g):
    x = ctx.input
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim) * x.isnan().logical_not()


@op(tags=RED)
def mean(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    """mean(input, dim=None, keepdim=False, *, dtype=None) -> Tensor"""
    if dtype is None and _kind(input) not in "fc":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           "floating point or complex dtype. Got: " + _tname(input))
    axes = reduce_dims(dim, input.ndim, "mean")
    out_dt = dtype.np if dtype is not None else input.dtype
    x = _half_up(input.astype(out_dt, copy=False))
    n = _count(input.shape, axes)
    r = x.sum(axis=axes, keepdims=keepdim) / n if n else \
        xp.full(xp.sum(x, axis=axes, keepdims=keepdim).shape, np.nan, x.dtype)
    return xp.asarray(r).astype(out_dt, copy=False)


@mean.def_backward
def _(ctx, g):
    x = ctx.input
    n = _count(x.shape, reduce_dims(ctx.dim, x.ndim))
    u = unreduce(g, x.shape, ctx.dim, ctx.keepdim)
    # divide (as PyTorch does) rather than multiply by 1/n: n may be a compiler's symbolic size
    return u / n if n else u * math.nan


@op(tags=RED, saves=("input",))
def nanmean(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    """nanmean(input, dim=None, keepdim=False, *, dtype=None) -> Tensor: the mean of the
    non-NaN elements."""
    _float_only(input, "nanmean(): expected input to have floating point or complex dtype but "
                       "got ")
    axes = reduce_dims(dim, input.ndim, "nanmean")
    out_dt = dtype.np if dtype is not None else input.dtype
    x = _half_up(input.astype(out_dt, copy=False))
    valid = ~xp.isnan(x)
    s = xp.where(valid, x, 0).sum(axis=axes, keepdims=keepdim)
    return xp.asarray(s / valid.sum(axis=axes, keepdims=keepdim)).astype(out_dt, copy=False)


@nanmean.def_backward
def _(ctx, g):
    x = ctx.input
    dims = reduce_dims(ctx.dim, x.ndim)
    valid = x.isnan().logical_not()
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim) * valid / valid.sum(dims, keepdim=True)


@op(tags=RED, function=False, out=False)
def sum_to_size(xp, input: "Tensor", size):
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else \
        tuple(size)
    shape = input.shape
    lead = len(shape) - len(size)
    if lead < 0 or builtins.any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(shape)}}}.")
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and shape[lead + i] != 1)
    if not axes and size:  # nothing to reduce: the input as it is
        return input.copy()
    # a real sum (PyTorch sums whenever the target is 0-d): integers and bools become int64
    out_dt = np.int64 if input.dtype.kind in "biu" else input.dtype
    return _half_up(input).sum(axis=axes, keepdims=True).reshape(size).astype(out_dt,
                                                                              copy=False)


@sum_to_size.def_backward
def _(ctx, g):
    return g.expand(ctx.input.shape)


@tensor_method("sum_to_size")
def _sum_to_size_method(self, *size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if size and tuple(size) == tuple(self.shape):  # PyTorch returns self itself
        return self
    return sum_to_size(self, tuple(size))


# ---------------------------------------------------------------------- product
@op(tags=RED, saves=("input",), out_dtype="dtype")
def prod(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    """prod(input, *, dtype=None) / prod(input, dim, keepdim=False, *, dtype=None) -> Tensor"""
    axes = reduce_dims(None if dim is None else one_dim(dim, input.ndim, "prod"), input.ndim)
    acc = _acc_dtype(input, dtype)
    r = _half_up(input).prod(axis=axes, keepdims=keepdim and dim is not None, dtype=acc)
    return xp.asarray(r).astype(acc or input.dtype, copy=False)


@prod.def_backward
def _(ctx, g):
    # d prod / d x_k is the product of the other elements: (product before k) * (product
    # after k). Both come from exclusive running products, so zeros need no special case and
    # the rule is differentiable again (dividing the result by x_k would not be, at zeros).
    x = ctx.input
    if x.ndim == 0:
        return g
    flat = ctx.dim is None
    xs = x.reshape(-1) if flat else x
    d = 0 if flat else one_dim(ctx.dim, x.ndim, "prod")
    others = exclusive_cumprod(xs, d) * reverse_scan(exclusive_cumprod, xs, d)
    if flat:
        others = others.reshape(x.shape)
    if x.is_complex():
        others = others.conj()
    dims = reduce_dims(None if flat else d, x.ndim)
    return keep_dims(g, dims, not flat and ctx.keepdim) * others


# ---------------------------------------------------------------------- extrema
def _extreme(xp, a, dim, keepdim, name: str):
    """max / min: the full reduction (dim None) or (values, indices) along one dim."""
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() received an invalid combination of arguments: keepdim "
                            "needs dim")
        _no_complex(a, f"{name}_all")
        _nonempty(a, (), name, True)
        return (xp.max if name == "max" else xp.min)(a)
    d = one_dim(dim, a.ndim, name)
    if a.dtype.kind == "c":
        raise RuntimeError(f"{name}(): does not support complex input")
    if a.ndim == 0:
        return a.copy(), xp.zeros((), _INT64)
    _nonempty(a, (d,), name, False)
    idx = (xp.argmax if name == "max" else xp.argmin)(a, axis=d, keepdims=True)
    vals = xp.take_along_axis(a, idx, axis=d)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx.astype(_INT64, copy=False)


def _extreme_backward(ctx, g, gi=None):
    x = ctx.input
    if ctx.dim is None:
        return split_ties_backward(g, x, ctx.out, tuple(range(x.ndim)), False, nan_ties=True)
    return select_backward(g, ctx.out[1], one_dim(ctx.dim, x.ndim, ""), ctx.keepdim, x.shape)


@op("max", tags=RED, upcast_half=True, function=False, method=False, saves=("input",),
    save_output=True, returns=RT.max, out_exact=True)
def _max(xp, input: "Tensor", dim=None, keepdim=False):
    return _extreme(xp, input, dim, keepdim, "max")


@op("min", tags=RED, upcast_half=True, function=False, method=False, saves=("input",),
    save_output=True, returns=RT.min, out_exact=True)
def _min(xp, input: "Tensor", dim=None, keepdim=False):
    return _extreme(xp, input, dim, keepdim, "min")


_max.def_backward(_extreme_backward)
_min.def_backward(_extreme_backward)


def _extreme_call(reduce_op, binary_name, input, dim, keepdim, other, out):
    if other is None and isinstance(dim, Tensor):
        other, dim = dim, None
    if other is not None:
        if keepdim is not None:
            raise TypeError(f"{reduce_op.name}() received an invalid combination of arguments "
                            "- got (Tensor, Tensor, keepdim), but expected (Tensor input, Tensor "
                            "other, *, Tensor out)")
        return OPS[binary_name](input, other, out=out)
    if dim is None and keepdim is not None:
        raise TypeError(f"{reduce_op.name}() received an invalid combination of arguments - got "
                        "(keepdim=bool), but expected one of: (), (Tensor other), "
                        "(int dim, bool keepdim = False)")
    return reduce_op(input, dim, bool(keepdim), out=out)


def max(input, dim=None, keepdim=None, *, other=None, out=None):
    """max(input) -> Tensor; max(input, dim, keepdim=False) -> (values, indices);
    max(input, other) -> Tensor (elementwise ``maximum``)."""
    return _extreme_call(_max, "maximum", input, dim, keepdim, other, out)


def min(input, dim=None, keepdim=None, *, other=None, out=None):
    """min(input) -> Tensor; min(input, dim, keepdim=False) -> (values, indices);
    min(input, other) -> Tensor (elementwise ``minimum``)."""
    return _extreme_call(_min, "minimum", input, dim, keepdim, other, out)


tensor_method("max")(max)
tensor_method("min")(min)


def _amax_impl(xp, a, dim, keepdim, name):
    _no_complex(a, f"{name[1:]}_values_cpu")
    axes = reduce_dims(dim, a.ndim, name)
    _nonempty(a, axes, name, dim is None or isinstance(dim, (tuple, list)) and not dim)
    return (xp.amax if name == "amax" else xp.amin)(a, axis=axes, keepdims=keepdim)


def _amax_backward(ctx, g):
    x = ctx.input
    return split_ties_backward(g, x, ctx.out, reduce_dims(ctx.dim, x.ndim), ctx.keepdim)


# PyTorch's message for an out= tensor of another dtype (registry option out_exact)
_AMAX_OUT = ("Expected the dtype for input and out to match, but got {res} for input's dtype and "
             "{out} for out's dtype.")


@op(tags=RED, upcast_half=True, saves=("input",), save_output=True, out_exact=_AMAX_OUT)
def amax(xp, input: "Tensor", dim=(), keepdim=False):
    """amax(input, dim=(), keepdim=False) -> Tensor. The gradient is shared evenly between
    tied maxima."""
    return _amax_impl(xp, input, dim, keepdim, "amax")


@op(tags=RED, upcast_half=True, saves=("input",), save_output=True, out_exact=_AMAX_OUT)
def amin(xp, input: "Tensor", dim=(), keepdim=False):
    """amin(input, dim=(), keepdim=False) -> Tensor. The gradient is shared evenly between
    tied minima."""
    return _amax_impl(xp, input, dim, keepdim, "amin")


amax.def_backward(_amax_backward)
amin.def_backward(_amax_backward)


@op(tags=RED, upcast_half=True, saves=("input",), save_output=True, returns=RT.aminmax,
    out_exact=True)
def aminmax(xp, input: "Tensor", *, dim=None, keepdim=False):
    """aminmax(input, *, dim=None, keepdim=False) -> (min, max)"""
    _no_complex(input, "aminmax_cpu")
    if dim is None:
        if not input.size:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                               "operation has no identity.")
        axes = tuple(range(input.ndim))
    else:
        d = one_dim(dim, input.ndim, "aminmax")
        axes = (d,) if input.ndim else ()
        if input.ndim and input.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    keep = keepdim and dim is not None
    return (xp.amin(input, axis=axes, keepdims=keep), xp.amax(input, axis=axes, keepdims=keep))


@aminmax.def_backward
def _(ctx, gmin, gmax):
    x = ctx.input
    lo, hi = ctx.out
    dims = reduce_dims(ctx.dim, x.ndim)
    keep = ctx.keepdim and ctx.dim is not None
    return (split_ties_backward(gmin, x, lo, dims, keep)
            + split_ties_backward(gmax, x, hi, dims, keep))


def _arg_extreme(xp, a, dim, keepdim, name):
    if a.dtype == np.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if a.dtype.kind == "c":
        raise RuntimeError(f"{name}(): does not support complex input")
    pick = xp.argmax if name == "argmax" else xp.argmin
    if dim is None:
        _nonempty(a, (), name, True, IndexError)
        r = pick(a.reshape(-1))
        return xp.asarray(r, _INT64).reshape((1,) * a.ndim if keepdim else ())
    d = one_dim(dim, a.ndim, name)
    if a.ndim == 0:
        return xp.zeros((), _INT64)
    _nonempty(a, (d,), name, False)
    return pick(a, axis=d, keepdims=keepdim).astype(_INT64, copy=False)


@op(tags=RED, upcast_half=True, differentiable=False, out_exact=True)
def argmax(xp, input: "Tensor", dim=None, keepdim=False):
    """argmax(input, dim=None, keepdim=False) -> LongTensor (first index of the maximum; NaN
    counts as the maximum)."""
    return _arg_extreme(xp, input, dim, keepdim, "argmax")


@op(tags=RED, upcast_half=True, differentiable=False, out_exact=True)
def argmin(xp, input: "Tensor", dim=None, keepdim=False):
    """argmin(input, dim=None, keepdim=False) -> LongTensor (first index of the minimum; NaN
    counts as the minimum)."""
    return _arg_extreme(xp, input, dim, keepdim, "argmin")


# ---------------------------------------------------------------------- logical reductions
def _logical(xp, a, dim, keepdim, name):
    # an empty dim tuple reduces nothing here (unlike sum): the input is only tested elementwise
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        r = a != 0
    else:
        axes = reduce_dims(dim, a.ndim, name)
        r = (xp.all if name == "all" else xp.any)(a, axis=axes, keepdims=keepdim)
    return xp.asarray(r, np.uint8 if a.dtype == np.uint8 else np.bool_)


def _logical_out(name: str, res: D.dtype, out: D.dtype) -> str | None:
    """all/any write into bool or (the legacy result type) uint8 only (option out_exact)."""
    if out in (D.bool_, D.uint8):
        return None
    return f"{name} only supports bool tensor for result, got: {D.TYPE_NAME[out]}"


@op(tags=RED, differentiable=False, out_exact=_logical_out)
def all(xp, input: "Tensor", dim=None, keepdim=False):
    """all(input, dim=None, keepdim=False) -> Tensor (bool; uint8 for uint8 input)"""
    return _logical(xp, input, dim, keepdim, "all")


@op(tags=RED, differentiable=False, out_exact=_logical_out)
def any(xp, input: "Tensor", dim=None, keepdim=False):
    """any(input, dim=None, keepdim=False) -> Tensor (bool; uint8 for uint8 input)"""
    return _logical(xp, input, dim, keepdim, "any")


@op(tags=RED, differentiable=False, out=False)
def count_nonzero(xp, input: "Tensor", dim=None):
    """count_nonzero(input, dim=None) -> LongTensor"""
    axes = reduce_dims(dim, input.ndim, "count_nonzero")
    return xp.asarray(xp.count_nonzero(input, axis=axes), _INT64)


# ---------------------------------------------------------------------- moments
def _correction(name, dim, unbiased, correction):
    """Resolve var/std's legacy ``unbiased`` and the ``correction`` keyword."""
    if isinstance(dim, bool):  # var(input, unbiased)
        unbiased, dim = dim, None
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got both "
                        "'unbiased' and 'correction'")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction


def _moments(xp, a, name, dim, unbiased, keepdim, correction):
    """(variance, mean) of ``a`` over ``dim``, with PyTorch's divisor max(0, N - correction)."""
    if _kind(a) not in "fc":  # PyTorch names the op only for the *_mean variants
        who = name if name.endswith("_mean") else "std and var"
        raise RuntimeError(f"{who} only support floating point and complex dtypes")
    dim, c = _correction(name, dim, unbiased, correction)
    axes = reduce_dims(dim, a.ndim, name)
    n = _count(a.shape, axes)
    dof = builtins.max(n - c, 0)
    if dof <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      stacklevel=4)
    m = a.sum(axis=axes, keepdims=True) / n if n else \
        xp.full(xp.sum(a, axis=axes, keepdims=True).shape, np.nan, a.dtype)
    d = a - m
    ssq = (d.real * d.real + d.imag * d.imag) if a.dtype.kind == "c" else d * d
    v = ssq.sum(axis=axes, keepdims=keepdim) / ssq.dtype.type(dof)
    if not keepdim:
        m = m.reshape(v.shape)
    return xp.asarray(v), xp.asarray(m.astype(a.dtype, copy=False))


def _var_backward(ctx, gv):
    """d var / d x = 2 (x - mean) / (N - correction), with the call's dims."""
    x = ctx.input
    dim, c = _correction("var", ctx.dim, ctx.unbiased, ctx.correction)
    dims = reduce_dims(dim, x.ndim)
    # unlike the forward divisor, PyTorch's backward does not clamp N - correction at 0
    dof = _count(x.shape, dims) - c
    centred = x - x.mean(dims, keepdim=True)
    # a tensor op on the (possibly symbolic) count, not a Python float computed from it: a
    # compiled graph with dynamic shapes then serves every size (dof == 0 gives inf / nan)
    return keep_dims(gv, dims, ctx.keepdim) * centred * 2.0 / dof


def _std_grad_to_var(g, std):
    # d std = d var / (2 std); PyTorch defines the gradient as 0 where std == 0 (the divisor
    # is made safe there so no inf * 0 appears)
    zero = std == 0
    return g / (2 * std + zero) * zero.logical_not()


def _mean_backward(ctx, gm):
    x = ctx.input
    dims = reduce_dims(_correction("mean", ctx.dim, ctx.unbiased, ctx.correction)[0], x.ndim)
    n = _count(x.shape, dims)
    return keep_dims(gm, dims, ctx.keepdim) * (1.0 / n if n else math.nan)


@op(tags=RED, upcast_half=True, saves=("input",))
def var(xp, input: "Tensor", dim=None, unbiased=None, keepdim=False, *, correction=None):
    """var(input, dim=None, *, correction=1, keepdim=False) -> Tensor (also the legacy
    ``var(input, dim, unbiased, keepdim)`` and ``var(input, unbiased)`` forms)."""
    return _moments(xp, input, "var", dim, unbiased, keepdim, correction)[0]


@var.def_backward
def _(ctx, g):
    return _var_backward(ctx, g)


@op(tags=RED, upcast_half=True, saves=("input",), save_output=True)
def std(xp, input: "Tensor", dim=None, unbiased=None, keepdim=False, *, correction=None):
    """std(input, dim=None, *, correction=1, keepdim=False) -> Tensor (also the legacy
    ``unbiased`` forms)."""
    return xp.sqrt(_moments(xp, input, "std", dim, unbiased, keepdim, correction)[0])


@std.def_backward
def _(ctx, g):
    return _var_backward(ctx, _std_grad_to_var(g, ctx.out))


@op(tags=RED, upcast_half=True, saves=("input",), method=False, out=False)
def var_mean(xp, input: "Tensor", dim=None, unbiased=None, keepdim=False, *, correction=None):
    """var_mean(input, dim=None, *, correction=1, keepdim=False) -> (Tensor, Tensor)"""
    return _moments(xp, input, "var_mean", dim, unbiased, keepdim, correction)


@var_mean.def_backward
def _(ctx, gv, gm):
    return _var_backward(ctx, gv) + _mean_backward(ctx, gm)


@op(tags=RED, upcast_half=True, saves=("input",), save_output=True, method=False, out=False)
def std_mean(xp, input: "Tensor", dim=None, unbiased=None, keepdim=False, *, correction=None):
    """std_mean(input, dim=None, *, correction=1, keepdim=False) -> (Tensor, Tensor)"""
    v, m = _moments(xp, input, "std_mean", dim, unbiased, keepdim, correction)
    return xp.sqrt(v), m


@std_mean.def_backward
def _(ctx, gs, gm):
    return _var_backward(ctx, _std_grad_to_var(gs, ctx.out[0])) + _mean_backward(ctx, gm)


# ---------------------------------------------------------------------- norm
def _norm_order(p, dim):
    """``p`` as a number (``'fro'`` is 2); ``'nuc'`` and other strings are matrix norms."""
    if isinstance(p, str):
        if p == "fro":
            if isinstance(dim, (tuple, list)) and len(dim) > 2:
                raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                                   + " ".join(str(d) for d in dim))
            return 2.0
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    return 2.0 if p is None else float(p)


@op("norm", tags=RED, saves=("input",), save_output=True, function=False, method=False)
def _norm(xp, input: "Tensor", p="fro", dim=None, keepdim=False, *, dtype=None):
    _float_only(input, "linalg.vector_norm: Expected a floating point or complex tensor as "
                       "input. Got ")
    order = _norm_order(p, dim)
    axes = reduce_dims(dim, input.ndim, "norm")
    x = input.astype(dtype.np) if dtype is not None else input
    a = xp.abs(_half_up(x))
    if math.isinf(order):
        if a.size == 0 and (not axes or builtins.any(a.shape[d] == 0 for d in axes)):
            where = "tensor" if dim is None else f"dimension {axes[0]}"
            raise RuntimeError(f"linalg.vector_norm cannot compute the {p} norm on an empty "
                               f"{where} because the operation does not have an identity")
        r = (xp.amax if order > 0 else xp.amin)(a, axis=axes, keepdims=keepdim)
    elif order == 0:
        r = (a != 0).sum(axis=axes, keepdims=keepdim).astype(a.dtype)
    elif order == 1:
        r = a.sum(axis=axes, keepdims=keepdim)
    elif order == 2:
        r = xp.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
    else:
        r = (a ** order).sum(axis=axes, keepdims=keepdim) ** (1.0 / order)
    real = {np.complex64: np.float32, np.complex128: np.float64}.get(x.dtype.type, x.dtype)
    return xp.asarray(r).astype(real, copy=False)


@_norm.def_backward
def _(ctx, g):
    x, out = ctx.input, ctx.out
    order = _norm_order(ctx.p, ctx.dim)
    dims = reduce_dims(ctx.dim, x.ndim)
    gk, nk = keep_dims(g, dims, ctx.keepdim), keep_dims(out, dims, ctx.keepdim)
    if order == 0:
        return x.new_zeros(x.shape)
    if order == 1:
        return x.sgn() * gk
    if math.isinf(order):
        a = x.abs()
        mask = a == nk
        return x.sgn() * mask * (gk / mask.sum(dims, keepdim=True))
    # PyTorch's gradient is 0 where the norm is 0 (and, for p < 1, at zero elements); the
    # divisors are made safe there so no inf * 0 appears
    nz = nk == 0
    if order == 2:
        return x * (gk / (nk + nz))  # x is all zero where the norm is
    a = x.abs()
    scaled = (a + (x == 0)) ** (order - 1) * x.sgn()
    return scaled * (gk / (nk + nz) ** (order - 1)) * nz.logical_not()
