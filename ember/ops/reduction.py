"""Reductions and scans. ``reduce_dims`` normalises ``dim=``; ``unreduce`` is the shared
backward step that puts reduced dimensions back so a gradient broadcasts to the input."""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import _wrap_dim
from .bind import tensor_method
from .registry import op

RED = ("reduction",)


def reduce_dims(dim, ndim: int) -> tuple:
    """``dim`` (None, int, or a sequence) as a sorted tuple of non-negative axes."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        w = _wrap_dim(d, ndim)
        if w in out:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        out.append(w)
    return tuple(sorted(out))


def unreduce(g, shape, dim, keepdim):
    """Broadcast a reduced gradient back to ``shape``."""
    if not keepdim and len(shape):
        for d in reduce_dims(dim, len(shape)):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _acc_dtype(a: np.ndarray, dtype):
    if dtype is not None:
        return dtype.np
    if a.dtype.kind in "biu":
        return np.int64
    return None


def _half_up(a):
    return a.astype(np.float32) if a.dtype in (np.float16, D.bfloat16.np) else a


@op(tags=RED)
def sum(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    axes = reduce_dims(dim, input.ndim)
    acc = _acc_dtype(input, dtype)
    r = _half_up(input).sum(axis=axes, keepdims=keepdim, dtype=acc)
    return xp.asarray(r).astype(acc or input.dtype, copy=False)


@sum.def_backward
def _(ctx, g):
    x = ctx.input
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim)


@op(tags=RED)
def mean(xp, input: "Tensor", dim=None, keepdim=False, *, dtype=None):
    if dtype is None and input.dtype.kind not in "fc":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           "floating point or complex dtype. Got: "
                           f"{D.TYPE_NAME[D.from_np(input.dtype)]}")
    axes = reduce_dims(dim, input.ndim)
    out_dt = dtype.np if dtype is not None else input.dtype
    r = _half_up(input.astype(out_dt, copy=False)).mean(axis=axes, keepdims=keepdim)
    return xp.asarray(r).astype(out_dt, copy=False)


@mean.def_backward
def _(ctx, g):
    x = ctx.input
    n = 1
    for d in reduce_dims(ctx.dim, x.ndim):
        n *= x.shape[d]
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim) / max(n, 1) if n else \
        unreduce(g, x.shape, ctx.dim, ctx.keepdim) * float("nan")


@op(tags=RED, function=False, out=False)
def sum_to_size(xp, input: "Tensor", size):
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else \
        tuple(size)
    shape = input.shape
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(shape)}}}.")
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and shape[lead + i] != 1)
    r = _half_up(input).sum(axis=axes, keepdims=True) if axes else input.copy()
    return r.reshape(size).astype(input.dtype, copy=False)


@sum_to_size.def_backward
def _(ctx, g):
    return g.expand(ctx.input.shape)


@tensor_method("sum_to_size")
def _sum_to_size_method(self, *size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if tuple(size) == tuple(self.shape):
        return self
    return sum_to_size(self, tuple(size))
