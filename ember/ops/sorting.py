"""Sorting and order statistics (sort, argsort, topk, kthvalue, median, mode), uniqueness, and
counting/searching (bincount, histc, searchsorted, bucketize).

Every sort is stable. NaN orders above every number, as in PyTorch: last when ascending, first
when descending. Backward rules send gradients to the picked positions with
``reduction.select_backward``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import return_types as RT
from .reduction import (_INT64, _along, _as_int, _half_up, _kind, _nonempty, _tname, one_dim,
                        select_backward, split_ties_backward)
from .registry import op

SORT = ("sort",)

# PyTorch's messages for an out= tensor of another dtype than the result's (registry option
# out_exact; median checks the indices first)
_MEDIAN_OUT = {
    1: "Expected tensor for argument #1 'indices' to have scalar type {res}; but got {out_t} "
       "instead (while checking arguments for median)",
    0: "Expected tensor for 'values' to have the same type as tensor for argument #2 'self'; but "
       "type {out_t} does not equal {res_t} (while checking arguments for median)"}
_KTHVALUE_OUT = {0: "output values must be of same type as input",
                 1: "output indices must be of scalar type Long"}
_MODE_OUT = {0: "expected scalar type '{res}' but got '{out}' for values output",
             1: "expected scalar type '{res}' but got '{out}' for indices output"}


def _perm(xp, a: np.ndarray, d: int, descending: bool) -> np.ndarray:
    """Stable sorting permutation along ``d``; NaN counts as the largest value."""
    if not descending:
        return xp.argsort(a, axis=d, kind="stable")
    # sorting the reversed slice ascending and reading the result backwards gives a descending
    # order in which equal elements keep their original order (and NaN comes first)
    idx = xp.argsort(xp.flip(a, axis=d), axis=d, kind="stable")
    return (a.shape[d] - 1) - xp.flip(idx, axis=d)


def _first(xp, perm: np.ndarray, k: int, d: int, start: int = 0) -> np.ndarray:
    """Positions ``start`` to ``k - 1`` of ``perm`` along ``d``."""
    key = [slice(None)] * perm.ndim
    key[d] = slice(start, k)
    return perm[tuple(key)]


def _pick(xp, a, idx, d, keepdim):
    """(values, indices) of positions ``idx`` (size 1 along ``d``) of ``a``."""
    vals = xp.take_along_axis(a, idx, axis=d)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx.astype(_INT64, copy=False)


def _no_complex_sort(a: np.ndarray, name: str):
    if a.dtype.kind == "c":
        raise RuntimeError(f"{name} does not support complex dtypes on CPU")


def _picked_backward(ctx, g, gi=None):
    x = ctx.input
    return select_backward(g, ctx.out[1], one_dim(ctx.dim, x.ndim, ""), True, x.shape)


# ---------------------------------------------------------------------- sort
@op(tags=SORT, upcast_half=True, save_output=True, returns=RT.sort, out_exact=True)
def sort(xp, input: "Tensor", dim=-1, descending=False, *, stable=False):
    """sort(input, dim=-1, descending=False, *, stable=False) -> (values, indices). Always
    stable."""
    _no_complex_sort(input, "Sort")
    d = one_dim(dim, input.ndim, "sort")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), _INT64)
    idx = _perm(xp, input, d, descending)
    return xp.take_along_axis(input, idx, axis=d), idx.astype(_INT64, copy=False)


sort.def_backward(_picked_backward)


@op(tags=SORT, upcast_half=True, differentiable=False, out=False)
def argsort(xp, input: "Tensor", dim=-1, descending=False, stable=False):
    """argsort(input, dim=-1, descending=False, stable=False) -> LongTensor. Always stable."""
    _no_complex_sort(input, "Sort")
    d = one_dim(dim, input.ndim, "argsort")
    if input.ndim == 0:
        return xp.zeros((), _INT64)
    return _perm(xp, input, d, descending).astype(_INT64, copy=False)


@op(tags=SORT, upcast_half=True, saves=("input",), out_exact=True)
def msort(xp, input: "Tensor"):
    """msort(input) -> Tensor: ``input`` sorted along its first dimension."""
    _no_complex_sort(input, "Sort")
    if input.ndim == 0:
        return input.copy()
    return xp.take_along_axis(input, _perm(xp, input, 0, False), axis=0)


@msort.def_backward
def _(ctx, g):
    x = ctx.input
    if x.ndim == 0:
        return g
    return select_backward(g, x.argsort(0), 0, True, x.shape)


@op(tags=SORT, upcast_half=True, save_output=True, returns=RT.topk, out_exact=True)
def topk(xp, input: "Tensor", k, dim=-1, largest=True, sorted=True):
    """topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices). The result is
    always sorted; NaN counts as the largest value."""
    k = _as_int(k, "topk", "k")
    if input.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    _no_complex_sort(input, "topk")
    d = one_dim(dim, input.ndim, "topk")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), _INT64)
    if 0 < k < n // 4 and input.dtype != np.bool_:
        # few of many: partition first (NaN counts as the largest there too), sort only k
        part = xp.argpartition(input, n - k if largest else k - 1, axis=d)
        cand = _first(xp, part, n, d, n - k) if largest else _first(xp, part, k, d)
        order = _perm(xp, xp.take_along_axis(input, cand, axis=d), d, largest)
        idx = xp.take_along_axis(cand, order, axis=d)
    else:
        idx = _first(xp, _perm(xp, input, d, largest), k, d)
    return xp.take_along_axis(input, idx, axis=d), idx.astype(_INT64, copy=False)


topk.def_backward(_picked_backward)


# ---------------------------------------------------------------------- order statistics
def _stat_dim(a, dim, name, kernel):
    if a.dtype == np.bool_ or a.dtype.kind == "c":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tname(a)}\'')
    d = one_dim(dim, a.ndim, name)
    if a.ndim:
        _nonempty(a, (d,), name, False)
    return d


def _picked_dim_backward(ctx, g, gi=None):
    x = ctx.input
    return select_backward(g, ctx.out[1], one_dim(ctx.dim, x.ndim, ""), ctx.keepdim, x.shape)


@op(tags=SORT, upcast_half=True, save_output=True, returns=RT.kthvalue,
    out_exact=_KTHVALUE_OUT)
def kthvalue(xp, input: "Tensor", k, dim=-1, keepdim=False):
    """kthvalue(input, k, dim=-1, keepdim=False) -> (values, indices): the k-th smallest
    element (1-based) of each slice."""
    k = _as_int(k, "kthvalue", "k")
    d = _stat_dim(input, dim, "kthvalue", "kthvalue_cpu")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), _INT64)
    # a partition is enough (NaN counts as the largest there too)
    part = xp.argpartition(input, k - 1, axis=d)
    return _pick(xp, input, _first(xp, part, k, d, k - 1), d, keepdim)


kthvalue.def_backward(_picked_dim_backward)


def _median(xp, a, dim, keepdim, name, ignore_nan):
    """Lower median: the element of rank (n - 1) // 2. ``median`` returns NaN (and the first
    NaN's index) for a slice holding a NaN; ``nanmedian`` takes the median of the rest."""
    if dim is None:
        if keepdim:
            raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
        if a.dtype == np.bool_ or a.dtype.kind == "c":
            raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_tname(a)}\'')
        if a.size == 0:
            return xp.asarray(np.nan).astype(a.dtype)
        return _median(xp, a.reshape(-1), 0, False, name, ignore_nan)[0]
    d = _stat_dim(a, dim, name, f"{name}_cpu")
    if a.ndim == 0:
        return a.copy(), xp.zeros((), _INT64)
    n = a.shape[d]
    isnan = xp.isnan(a) if a.dtype.kind == "f" else None
    nans = isnan.sum(axis=d, keepdims=True) if isnan is not None else 0
    if ignore_nan and isnan is not None and isnan.any():
        # the rank differs between slices: a full sort (NaNs last, in input order)
        rank = xp.maximum((n - nans - 1) // 2, 0)
        idx = xp.take_along_axis(_perm(xp, a, d, False), rank, axis=d)
    else:
        k = (n - 1) // 2
        idx = _first(xp, xp.argpartition(a, k, axis=d), k + 1, d, k)
        if isnan is not None:  # median of a slice holding NaN: its first NaN
            idx = xp.where(nans > 0, xp.argmax(isnan, axis=d, keepdims=True), idx)
    return _pick(xp, a, idx, d, keepdim)


def _median_backward(ctx, g, gi=None):
    x = ctx.input
    if ctx.dim is None:
        return split_ties_backward(g, x, ctx.out, tuple(range(x.ndim)), False, nan_ties=True)
    return _picked_dim_backward(ctx, g)


@op(tags=SORT, upcast_half=True, saves=("input",), save_output=True, returns=RT.median,
    out_exact=_MEDIAN_OUT)
def median(xp, input: "Tensor", dim=None, keepdim=False):
    """median(input) -> Tensor; median(input, dim, keepdim=False) -> (values, indices).
    The lower median; NaN if the slice holds a NaN."""
    return _median(xp, input, dim, keepdim, "median", False)


@op(tags=SORT, upcast_half=True, saves=("input",), save_output=True, returns=RT.nanmedian,
    out_exact=_MEDIAN_OUT)
def nanmedian(xp, input: "Tensor", dim=None, keepdim=False):
    """nanmedian(input) -> Tensor; nanmedian(input, dim, keepdim=False) -> (values, indices).
    The lower median of the non-NaN elements."""
    return _median(xp, input, dim, keepdim, "nanmedian", True)


median.def_backward(_median_backward)
nanmedian.def_backward(_median_backward)


def _running_max(xp, a, d: int):
    """The running maximum of ``a`` along ``d`` by doubling shifts (log2(n) maxima of the
    whole array: ufunc.accumulate is numpy's alone)."""
    a = a.copy()
    n, k = a.shape[d], 1
    while k < n:
        dst = (slice(None),) * d + (slice(k, None),)
        src = (slice(None),) * d + (slice(0, n - k),)
        a[dst] = xp.maximum(a[dst], a[src])
        k *= 2
    return a


@op(tags=SORT, upcast_half=True, save_output=True, returns=RT.mode, out_exact=_MODE_OUT)
def mode(xp, input: "Tensor", dim=-1, keepdim=False):
    """mode(input, dim=-1, keepdim=False) -> (values, indices): the most frequent value of each
    slice (the smallest one on a tie) and the index of its last occurrence."""
    if input.dtype.kind == "c":
        raise NotImplementedError(f"\"mode_cpu\" not implemented for '{_tname(input)}'")
    d = one_dim(dim, input.ndim, "mode")
    if input.ndim == 0:
        return input.copy(), xp.zeros((), _INT64)
    _nonempty(input, (d,), "mode", False)
    n = input.shape[d]
    perm = _perm(xp, input, d, False)
    s = xp.take_along_axis(input, perm, axis=d)
    new_run = xp.ones(s.shape, bool)
    lead = [slice(None)] * s.ndim
    rest = list(lead)
    lead[d], rest[d] = slice(1, None), slice(0, -1)
    new_run[tuple(lead)] = s[tuple(lead)] != s[tuple(rest)]
    pos = _along(xp, n, d, s.ndim)
    run_len = pos - _running_max(xp, xp.where(new_run, pos, 0), d) + 1
    # the first position where a run reaches the largest length ends the smallest modal value;
    # stable sorting puts that value's last occurrence there
    end = xp.argmax(run_len, axis=d, keepdims=True)
    return _pick(xp, input, xp.take_along_axis(perm, end, axis=d), d, keepdim)


mode.def_backward(_picked_dim_backward)


# ---------------------------------------------------------------------- uniqueness
def _unique_result(values, inverse, counts, return_inverse, return_counts):
    if not (return_inverse or return_counts):
        return values
    out = (values,)
    if return_inverse:
        out += (inverse.astype(_INT64, copy=False),)
    if return_counts:
        out += (counts.astype(_INT64, copy=False),)
    return out


def _as_rows(a: np.ndarray, d: int) -> int:
    if a.ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    d = one_dim(d, a.ndim, "unique")
    if any(s == 0 for i, s in enumerate(a.shape) if i != d):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    return d


@op(tags=SORT + ("dynamic_shape",), upcast_half=True, out=False)
def unique(xp, input: "Tensor", sorted=True, return_inverse=False, return_counts=False,
           dim=None):
    """unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None). The
    result is always sorted; NaNs are all distinct."""
    if dim is None:
        flat = input.reshape(-1)
        kw = {"equal_nan": False} if flat.dtype.kind == "f" else {}
        vals, inv, cnt = xp.unique(flat, return_inverse=True, return_counts=True, **kw)
        return _unique_result(vals, inv.reshape(input.shape), cnt, return_inverse,
                              return_counts)
    d = _as_rows(input, dim)
    if input.shape[d] == 0:
        e = xp.zeros(0, _INT64)
        return _unique_result(input.copy(), e, e, return_inverse, return_counts)
    vals, inv, cnt = xp.unique(input, return_inverse=True, return_counts=True, axis=d)
    return _unique_result(vals, inv.reshape(-1), cnt, return_inverse, return_counts)


@unique.def_backward
def _(ctx, *grads):
    raise NotImplementedError("the derivative for 'unique' is not implemented.")


@op(tags=SORT + ("dynamic_shape",), upcast_half=True, out=False)
def unique_consecutive(xp, input: "Tensor", return_inverse=False, return_counts=False,
                       dim=None):
    """unique_consecutive(input, return_inverse=False, return_counts=False, dim=None): drops
    every element (or slice along ``dim``) equal to the one before it."""
    if dim is None:
        rows = input.reshape(-1, 1)
        d = None
    else:
        d = _as_rows(input, dim)
        rows = xp.moveaxis(input, d, 0).reshape(input.shape[d], -1)
    n = rows.shape[0]
    starts = xp.ones(n, bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first = xp.flatnonzero(starts)
    counts = xp.diff(xp.append(first, n))
    inverse = xp.cumsum(starts) - 1
    if d is None:
        vals = input.reshape(-1)[first]
        inverse = inverse.reshape(input.shape)
    else:
        vals = xp.take(input, first, axis=d)
    return _unique_result(vals, inverse, counts, return_inverse, return_counts)


@unique_consecutive.def_backward
def _(ctx, *grads):
    raise NotImplementedError("the derivative for 'unique_consecutive' is not implemented.")


# ---------------------------------------------------------------------- counting
@op(tags=("dynamic_shape",), differentiable=False, out=False)
def bincount(xp, input: "Tensor", weights: "Tensor?" = None, minlength=0):
    """bincount(input, weights=None, minlength=0) -> Tensor: occurrences (or summed weights) of
    each non-negative integer."""
    if input.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_tname(input)}'")
    if input.ndim != 1 or (input.size and input.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    minlength = _as_int(minlength, "bincount", "minlength")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return xp.bincount(input, minlength=minlength).astype(_INT64)
    if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out_dt = np.float32 if weights.dtype == np.float32 else np.float64
    return xp.bincount(input, weights=weights.astype(np.float64), minlength=minlength) \
        .astype(out_dt)


@op(differentiable=False)
def histc(xp, input: "Tensor", bins=100, min=0, max=0):
    """histc(input, bins=100, min=0, max=0) -> Tensor: a histogram of ``bins`` equal-width bins
    over [min, max] (the data's range when min == max); elements outside are ignored."""
    if _kind(input) != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_tname(input)}'")
    bins = _as_int(bins, "histc", "bins")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    ft = input.dtype.type
    lo, hi = ft(min), ft(max)
    if lo == hi and input.size:
        lo, hi = input.min(), input.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = input.reshape(-1)
    x = x[(x >= lo) & (x <= hi)]
    # same arithmetic (and rounding) as PyTorch: (x - lo) * bins / (hi - lo), in the input's
    # own precision (float16 included)
    pos = ((x - lo) * ft(bins) / (hi - lo)).astype(_INT64)
    pos = xp.minimum(pos, bins - 1)
    return xp.bincount(pos, minlength=bins).astype(input.dtype)


# ---------------------------------------------------------------------- searching
def _search(xp, seq: np.ndarray, q: np.ndarray, right: bool) -> np.ndarray:
    """Vectorised binary search of each row of ``seq`` (..., n) for the matching row of ``q``.

    Going right while ``not (q <= v)`` (``not (q < v)`` for right) treats NaN as the largest
    value, on either side, like PyTorch.
    """
    n = seq.shape[-1]
    if seq.ndim == 1 and not (seq.dtype.kind == "f" and xp.isnan(seq).any()):
        # numpy's search agrees with PyTorch's when the sequence holds no NaN (a NaN query
        # goes to the end on either side)
        return xp.searchsorted(seq, q, side="right" if right else "left")
    rows = seq.reshape(-1, n) if seq.ndim > 1 else seq.reshape(1, n)
    qs = q.reshape(rows.shape[0], -1)
    lo = xp.zeros(qs.shape, _INT64)
    hi = xp.full(qs.shape, n, _INT64)
    for _ in range(int(n).bit_length()):
        mid = (lo + hi) // 2
        v = xp.take_along_axis(rows, xp.minimum(mid, n - 1), axis=1)
        go = ~(qs < v) if right else ~(qs <= v)
        active = lo < hi
        lo = xp.where(active & go, mid + 1, lo)
        hi = xp.where(active & ~go, mid, hi)
    return lo.reshape(q.shape)


def _search_dtype(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype == np.bool_ or a.dtype.kind == "c":
        raise NotImplementedError(f"\"{name}\" not implemented for '{_tname(a)}'")
    return _half_up(a)


@op(differentiable=False, method=False)
def searchsorted(xp, sorted_sequence: "Tensor", input: "Scalar|Tensor", *, out_int32=False,
                 right=False, side=None, sorter=None):
    """searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
    sorter=None) -> Tensor: insertion indices of ``input`` into the innermost dimension of
    ``sorted_sequence``."""
    seq = sorted_sequence
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if side == "left" and right:
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    q = xp.asarray(input)
    if seq.ndim > 1 and (q.ndim != seq.ndim or q.shape[:-1] != seq.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the "
                           "first N-1 dimensions of boundaries tensor and input value tensor "
                           f"must match, but we got boundaries tensor {list(seq.shape)} and "
                           f"input value tensor {list(q.shape)}")
    seq = _search_dtype(seq, "searchsorted_out_cpu")
    q = _search_dtype(q, "searchsorted_out_cpu")
    if sorter is not None:
        srt = xp.asarray(getattr(sorter, "_data", sorter))  # (a keyword: the call's Tensor)
        if srt.shape != seq.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {list(seq.shape)}and got sorter "
                               f"tensor {list(srt.shape)}")
        if srt.size and (srt.min() < 0 or srt.max() >= seq.shape[-1]):
            raise RuntimeError("torch.searchsorted(): sorter index out of range")
        seq = xp.take_along_axis(seq, srt.astype(_INT64), axis=-1)
    r = _search(xp, seq, q, bool(right))
    return r.astype(np.int32 if out_int32 else _INT64)


@op(differentiable=False, method=False)
def bucketize(xp, input: "Scalar|Tensor", boundaries: "Tensor", *, out_int32=False,
              right=False):
    """bucketize(input, boundaries, *, out_int32=False, right=False) -> Tensor: the bucket of
    each element: boundaries[i-1] < x <= boundaries[i] (``<=``/``<`` with right=True)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    seq = _search_dtype(boundaries, "bucketize_cpu")
    q = _search_dtype(xp.asarray(input), "bucketize_cpu")
    return _search(xp, seq, q, bool(right)).astype(np.int32 if out_int32 else _INT64)

