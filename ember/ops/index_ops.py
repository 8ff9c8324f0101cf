"""Dim-wise index ops: gather/scatter (+ scatter_add, scatter_reduce), index_select/add/copy/fill,
masked_fill/select/scatter and take_along_dim.

Accumulating kernels use numpy's unbuffered ``ufunc.at`` (every repeated index counts); half
types accumulate in float32. Backward rules are written with these same ops (gather <->
scatter_add, index_select <-> index_add, masked_select <-> masked_scatter), so they are
differentiable again.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, _wrap_dim
from .bind import tensor_method
from .selection import where
from .indexing import _tname, _upcast, index_view, pad_to, scalar_value
from .arguments import takes_tensors
from ..backends.base import ARRAY_TYPES
from .arguments import broadcast_error
from .registry import op

PUBLIC = ["take_along_dim"]

# C++ type names PyTorch prints for masks of the wrong dtype
_C_NAME = {np.dtype(np.int64): "long int", np.dtype(np.int32): "int",
           np.dtype(np.int16): "short int", np.dtype(np.int8): "signed char",
           np.dtype(np.uint8): "unsigned char", np.dtype(np.float32): "float",
           np.dtype(np.float64): "double", np.dtype(np.float16): "c10::Half"}


# ---------------------------------------------------------------------- shared checks
def _long_index(name: str, index: np.ndarray) -> None:
    # PyTorch checks the dtype only when there is something to index with
    if index.dtype not in (np.int64, np.int32) and index.size:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def _bounds(xp, op: str, index: np.ndarray, n: int, dim: int, exc=RuntimeError, prefix="",
            negative=False) -> None:
    """Every index in [0, n) (or [-n, n) with ``negative``), else PyTorch's message: the
    backend's check (on a GPU it reads nothing back; a failure is raised at the next
    synchronising call)."""
    xp.check_index(index, -n if negative else 0, n, op, lambda v: exc(
        f"{prefix}index {v} is out of bounds for dimension {dim} with size {n}"))


def _1d(a: np.ndarray) -> np.ndarray:
    return a.reshape(1) if a.ndim == 0 else a


def _check_scatter_shapes(x, index, dim, src=None, gather=False) -> None:
    """gather/scatter: index has self's ndim and fits in self (and src) off ``dim``."""
    who = "input" if gather else "self"
    if not index.size:  # PyTorch checks nothing about an empty index's shape
        return
    if index.ndim != x.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {who} "
                           "tensor")
    if src is not None and src.ndim != index.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for d in range(index.ndim):
        too_big = d != dim and index.shape[d] > x.shape[d]
        if gather and too_big:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {dim}")
        if too_big or (src is not None and index.shape[d] > src.shape[d]):
            tail = f" and to be no larger size than src {list(src.shape)}" if src is not None \
                else ""
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {dim}{tail}")


def _dim_key(xp, index: np.ndarray, dim: int) -> tuple:
    """Coordinates in the indexed tensor of each element of ``index``: its own position on
    every dim but ``dim``, its value on ``dim``."""
    nd = index.ndim
    key = []
    for d, n in enumerate(index.shape):
        if d == dim:
            key.append(index)
        else:
            shape = [1] * nd
            shape[d] = n
            key.append(xp.arange(n).reshape(shape))
    return tuple(key)


def _linear(xp, index: np.ndarray, shape: tuple, dim: int) -> np.ndarray:
    """Flat (row-major) positions in a tensor of ``shape`` addressed by gather/scatter's
    ``index`` along ``dim``."""
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]  # numpy-only: host arithmetic on a shape
    lin = index.astype(np.int64) * strides[dim]
    nd = index.ndim
    for d, n in enumerate(index.shape):
        if d != dim:
            sh = [1] * nd
            sh[d] = n
            lin = lin + (xp.arange(n, dtype=np.int64) * strides[d]).reshape(sh)
    return lin.reshape(-1)


def _region(src: np.ndarray, shape: tuple) -> np.ndarray:
    """The leading corner of ``src`` that an index of ``shape`` reads."""
    return src[tuple(slice(0, n) for n in shape)]


# ---------------------------------------------------------------------- gather / scatter
@op(saves=("index",))
def gather(xp, input: "Tensor", dim, index: "Tensor", *, sparse_grad=False):
    """gather(input, dim, index, *, sparse_grad=False) -> Tensor

    ``out[i][j] = input[index[i][j]][j]`` for dim=0 (and likewise for other dims)."""
    d = _wrap_dim(dim, input.ndim)
    _long_index("gather", index)
    x, idx = _1d(input), _1d(index).astype(np.intp, copy=False)
    _check_scatter_shapes(x, idx, d, gather=True)
    if not idx.size:
        return xp.empty(index.shape, input.dtype)
    _bounds(xp, "gather", idx, x.shape[d], d)
    return x[_dim_key(xp, idx, d)].reshape(index.shape)


@gather.def_backward
def _(ctx, g):
    return g.new_zeros(ctx.input.shape).scatter_add(ctx.dim, ctx.index, g), None


def _scatter_prep(xp, name, input, dim, index, src):
    d = _wrap_dim(dim, input.ndim)
    _long_index(name, index)
    if src is not None and src.dtype != input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    x, idx = _1d(input), _1d(index).astype(np.intp, copy=False)
    s = _1d(src) if src is not None else None
    _check_scatter_shapes(x, idx, d, s)
    if not idx.size:  # of any shape: as an empty index of self's rank it scatters nothing
        idx = idx.reshape((0,) * x.ndim)
        s = None if s is None else s.reshape(-1)[:0].reshape(idx.shape)
    _bounds(xp, name, idx, x.shape[d], d)
    return d, x, idx, s


@op(saves=("index",), inplace=True)
def scatter(xp, input: "Tensor", dim, index: "Tensor", src: "Scalar|Tensor" = None, *,
            value=None, reduce=None):
    """scatter(input, dim, index, src|value, *, reduce=None) -> Tensor

    ``out[index[i][j]][j] = src[i][j]`` for dim=0; ``reduce`` 'add'/'multiply' combines with the
    existing value instead."""
    if src is None:
        if value is None:
            raise TypeError("scatter() missing required argument 'src' or 'value'")
        src = value
    is_t = type(src) in ARRAY_TYPES
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    d, x, idx, s = _scatter_prep(xp, "scatter", input, dim, index, src if is_t else None)
    vals = _region(s, idx.shape) if is_t else scalar_value(xp, src, D.from_np(input.dtype))
    work = _upcast(x) if reduce else x
    out = work.copy()
    flat = out.reshape(-1)
    lin = _linear(xp, idx, out.shape, d)
    vals = xp.broadcast_to(vals.astype(work.dtype, copy=False), idx.shape).reshape(-1)
    if reduce is None:
        flat[lin] = vals
    else:
        xp.ufunc_at(reduce, flat, lin, vals)
    return out.astype(input.dtype, copy=False).reshape(input.shape)


@scatter.def_backward
def _(ctx, g):
    if ctx.reduce is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented (scatter with "
                           "reduce=)")
    dim, idx = ctx.dim, ctx.index
    src = ctx.src
    g_src = pad_to(g.gather(dim, idx), tuple(src.shape)) if hasattr(src, "shape") else None
    return g.scatter(dim, idx, 0), None, g_src


@op(saves=("index",), inplace=True)
def scatter_add(xp, input: "Tensor", dim, index: "Tensor", src: "Tensor"):
    """scatter_add(input, dim, index, src) -> Tensor: ``out[index[i][j]][j] += src[i][j]``."""
    return scatter.impl(xp, input, dim, index, src, reduce="add")


@scatter_add.def_backward
def _(ctx, g):
    return g, None, pad_to(g.gather(ctx.dim, ctx.index), tuple(ctx.src.shape))


# scatter_reduce's reductions as the ufuncs of xp.ufunc_at
_REDUCE = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _identity(reduce: str, dtype: np.dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


@op(saves=("input", "index", "src"), save_output=True, inplace=True)
def scatter_reduce(xp, input: "Tensor", dim, index: "Tensor", src: "Tensor", reduce, *,
                   include_self=True):
    """scatter_reduce(input, dim, index, src, reduce, *, include_self=True) -> Tensor

    Reduces every ``src`` value into ``out`` at its scattered position with ``reduce`` in
    'sum', 'prod', 'mean', 'amax', 'amin'; ``include_self`` counts the existing value too."""
    if reduce not in _REDUCE:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d, x, idx, s = _scatter_prep(xp, "scatter", input, dim, index, src)
    out = _upcast(x).copy()
    flat = out.reshape(-1)
    lin = _linear(xp, idx, out.shape, d)
    vals = _region(s, idx.shape).astype(out.dtype, copy=False).reshape(-1)
    if not include_self:
        flat[lin] = _identity(reduce, out.dtype)
    xp.ufunc_at(_REDUCE[reduce], flat, lin, vals)
    if reduce == "mean":
        cnt = xp.bincount(lin, minlength=flat.size) + int(include_self)
        cnt = xp.maximum(cnt, 1).astype(out.dtype)
        flat[:] = xp.floor_divide(flat, cnt) if out.dtype.kind in "iub" else flat / cnt
    return out.astype(input.dtype, copy=False).reshape(input.shape)


@scatter_reduce.def_backward
def _(ctx, g):
    x, idx, src, out = ctx.input, ctx.index, ctx.src, ctx.out
    dim, red, incl = ctx.dim, ctx.reduce, ctx.include_self
    region = tuple(idx.shape)
    s = src if tuple(src.shape) == region else index_view(src, tuple(slice(0, n) for n in region))
    cnt = g.new_zeros(x.shape).scatter_add(dim, idx, g.new_ones(region))
    hit = cnt != 0  # positions that received a scattered value
    if red == "sum":
        gx, gs = (g if incl else g.masked_fill(hit, 0)), g.gather(dim, idx)
    elif red == "mean":
        gn = g / (cnt + 1 if incl else cnt.clamp_min(1))
        gx, gs = (gn if incl else gn.masked_fill(hit, 0)), gn.gather(dim, idx)
    elif red in ("amax", "amin"):
        # the gradient is shared evenly between every contributor equal to the result
        xtie = x == out if incl else (x == out) & ~hit
        stie = s == out.gather(dim, idx)
        n = xtie.to(g.dtype) + g.new_zeros(x.shape).scatter_add(dim, idx, stie.to(g.dtype))
        gn = g / n.clamp_min(1)
        gx, gs = gn.masked_fill(~xtie, 0), gn.gather(dim, idx).masked_fill(~stie, 0)
    else:
        gx, gs = _prod_backward(g, x, idx, s, dim, incl, hit)
    return gx, None, pad_to(gs, tuple(src.shape))


def _prod_backward(g, x, idx, s, dim, incl, hit):
    """d(prod)/d(contributor) is the product of the other contributors. With no zero among
    them it is result / contributor; with exactly one zero only that zero gets the product
    of the rest; with more zeros every derivative is 0."""
    x_in = x if incl else x.masked_fill(hit, 1)  # an excluded self contributes a neutral 1
    xz, sz = x_in == 0, s == 0
    zeros = xz.to(g.dtype) + g.new_zeros(x.shape).scatter_add(dim, idx, sz.to(g.dtype))
    x_nz, s_nz = x_in.masked_fill(xz, 1), s.masked_fill(sz, 1)
    q = x_nz.scatter_reduce(dim, idx, s_nz, "prod")  # product of the non-zero contributors

    def others(z, qv, vz, v_nz):
        return where(z == 0, qv / v_nz, where((z == 1) & vz, qv, 0))

    gx = g * others(zeros, q, xz, x_nz)
    if not incl:
        gx = gx.masked_fill(hit, 0)
    gs = g.gather(dim, idx) * others(zeros.gather(dim, idx), q.gather(dim, idx), sz, s_nz)
    return gx, gs


# ---------------------------------------------------------------------- index_* along a dim
def _vector_index(index: np.ndarray) -> np.ndarray:
    return index.reshape(-1)


def _moved(xp, a: np.ndarray, d: int) -> np.ndarray:
    return xp.moveaxis(_1d(a), d, 0)


@op(saves=("index",))
def index_select(xp, input: "Tensor", dim, index: "Tensor"):
    """index_select(input, dim, index) -> Tensor: the slices of ``input`` along ``dim`` at the
    positions in the vector ``index``."""
    d = _wrap_dim(dim, input.ndim)
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if input.ndim == 0 and index.size != 1:
        raise RuntimeError("index_select(): Index to scalar can have only 1 value, got "
                           f"{index.size} value(s)")
    idx = _vector_index(index)
    n = _1d(input).shape[d]
    xp.check_index(idx, 0, n, "index_select",
                   lambda v: IndexError("index out of range in self"))
    out = xp.take(_1d(input), idx, axis=d)
    return out.reshape(()) if input.ndim == 0 else out


@index_select.def_backward
def _(ctx, g):
    return g.new_zeros(ctx.input.shape).index_add(ctx.dim, ctx.index, g), None


def _check_source(name, input, d, idx, source) -> None:
    """index_add/index_copy: source is self with ``dim`` resized to the number of indices."""
    if name == "index_add_":
        if source.ndim != input.ndim or any(a != b for k, (a, b) in enumerate(
                zip(source.shape, input.shape)) if k != d):
            raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                               f"specified dimension. Got self.shape = {list(input.shape)} "
                               f"source.shape = {list(source.shape)}")
        if _1d(source).shape[d] != idx.size:
            raise RuntimeError(f"index_add_(): Number of indices ({idx.size}) should be equal "
                               f"to source.size(dim): ({_1d(source).shape[d]}), for dim: {d}")
        return
    if source.ndim and input.ndim and source.ndim != input.ndim:
        raise IndexError("index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.ndim}), "
                         f"destination dimensionality ({input.ndim})")
    if _1d(source).shape[d] != idx.size:
        raise IndexError(f"index_copy_(): Number of indices ({idx.size}) should be equal to "
                         f"source.size(dim) ({_1d(source).shape[d]})")
    for k, (a, b) in enumerate(zip(_1d(input).shape, _1d(source).shape)):
        if k != d and a != b:
            raise RuntimeError("index_copy_(): Source/destination tensor must have same slice "
                               f"shapes. Destination slice shape: {a} at dimension {k} and "
                               f"source slice shape: {b} at dimension {k}.")


@op(saves=("index",), inplace=True)
def index_add(xp, input: "Tensor", dim, index: "Tensor", source: "Tensor", *, alpha=1):
    """index_add(input, dim, index, source, *, alpha=1) -> Tensor: adds ``alpha * source``
    into the slices of ``input`` along ``dim`` at ``index`` (repeated indices add up)."""
    d = _wrap_dim(dim, input.ndim)
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_tname(index)}")
    if index.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} with type: {_tname(index)} and size: "
                         f"{list(index.shape)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_add_(): self ({_tname(input)}) and source ({_tname(source)}) "
                           "must have the same scalar type")
    idx = _vector_index(index)
    _check_source("index_add_", input, d, idx, source)
    _bounds(xp, "index_add", idx, _1d(input).shape[d], d)
    out = _upcast(input).copy()
    src = _upcast(source)
    if alpha != 1:
        src = src * (int(alpha) if out.dtype.kind in "iu" else alpha)
    xp.ufunc_at("add", _moved(xp, out, d), idx, _moved(xp, src.astype(out.dtype, copy=False), d))
    return out.astype(input.dtype, copy=False)


@index_add.def_backward
def _(ctx, g):
    a = ctx.alpha
    gs = g.index_select(ctx.dim, ctx.index)
    gs = gs if a == 1 else gs * a
    return g, None, gs.reshape(ctx.source.shape)


@op(saves=("index",), inplace=True)
def index_copy(xp, input: "Tensor", dim, index: "Tensor", source: "Tensor"):
    """index_copy(input, dim, index, source) -> Tensor: copies the slices of ``source`` along
    ``dim`` into ``input`` at ``index``."""
    d = _wrap_dim(dim, input.ndim)
    if index.dtype != np.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{_tname(index)}")
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if source.dtype != input.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_tname(input)} and (source) {_tname(source)}")
    idx = _vector_index(index)
    _check_source("index_copy_", input, d, idx, source)
    _bounds(xp, "index_copy", idx, _1d(input).shape[d], d, IndexError, "index_copy_(): ")
    out = input.copy()
    _moved(xp, out, d)[idx] = _moved(xp, source, d)
    return out


@index_copy.def_backward
def _(ctx, g):
    dim, idx = ctx.dim, ctx.index
    return g.index_fill(dim, idx, 0), None, g.index_select(dim, idx).reshape(ctx.source.shape)


@op(saves=("index",), inplace=True)
def index_fill(xp, input: "Tensor", dim, index: "Tensor", value: "Scalar|Tensor"):
    """index_fill(input, dim, index, value) -> Tensor: fills the slices of ``input`` along
    ``dim`` at ``index`` with ``value`` (a number or a 0-dim tensor)."""
    d = _wrap_dim(dim, input.ndim)
    if index.dtype != np.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if type(value) in ARRAY_TYPES:
        if value.ndim:
            raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        value = value.item()
    idx = _vector_index(index)
    _bounds(xp, "index_fill", idx, _1d(input).shape[d], d, IndexError, negative=True)
    out = input.copy()
    _moved(xp, out, d)[idx] = scalar_value(xp, value, D.from_np(input.dtype))
    return out


@index_fill.def_backward
def _(ctx, g):
    filled = g.index_fill(ctx.dim, ctx.index, 0)
    # each filled position counts once, however often the index repeats it
    gv = (g - filled).sum() if hasattr(ctx.value, "shape") else None
    return filled, None, gv


# ---------------------------------------------------------------------- masked ops
def _bool_mask(name: str, mask: np.ndarray, c_name=True) -> None:
    if mask.dtype != np.bool_:
        dt = _C_NAME.get(mask.dtype, str(mask.dtype)) if c_name else _tname(mask)
        raise RuntimeError(f"{name} only supports boolean masks, but got mask with dtype {dt}")


def _broadcast(xp, *arrays):
    try:
        return xp.broadcast_arrays(*arrays)
    except ValueError:
        raise RuntimeError(broadcast_error([a.shape for a in arrays])) from None


@op(saves=("mask",), inplace=True)
def masked_fill(xp, input: "Tensor", mask: "Tensor", value: "Scalar|Tensor"):
    """masked_fill(input, mask, value) -> Tensor: ``value`` (a number or 0-dim tensor) where
    ``mask`` is True; ``mask`` broadcasts with ``input``."""
    _bool_mask("masked_fill_", mask)
    dt = D.from_np(input.dtype)
    if type(value) in ARRAY_TYPES:
        if value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        value = value.item()
    v = scalar_value(xp, value, dt)
    x, m = _broadcast(xp, input, mask)
    return xp.where(m, v, x)


@masked_fill.def_backward
def _(ctx, g):
    mask = ctx.mask
    gv = g.masked_fill(~mask, 0).sum() if hasattr(ctx.value, "shape") else None
    return g.masked_fill(mask, 0), None, gv


@op(saves=("mask",), tags=("dynamic_shape",))
def masked_select(xp, input: "Tensor", mask: "Tensor"):
    """masked_select(input, mask) -> Tensor: the 1-D tensor of ``input``'s elements where the
    (broadcast) ``mask`` is True."""
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    x, m = _broadcast(xp, input, mask)
    return x[m]


@masked_select.def_backward
def _(ctx, g):
    mask = ctx.mask
    shape = np.broadcast_shapes(tuple(ctx.input.shape), tuple(mask.shape))
    return g.new_zeros(shape).masked_scatter(mask, g), None


@op(saves=("mask",), inplace=True)
def masked_scatter(xp, input: "Tensor", mask: "Tensor", source: "Tensor"):
    """masked_scatter(input, mask, source) -> Tensor: the positions where ``mask`` is True
    take ``source``'s elements in row-major order."""
    _bool_mask("masked_scatter_", mask, c_name=False)
    if source.dtype != input.dtype:
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes but "
                           f"got{_tname(input)} and {_tname(source)}")
    x, m = _broadcast(xp, input, mask)
    k = int(xp.count_nonzero(m))
    if k > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out = x.copy()
    out[m] = source.reshape(-1)[:k]
    return out


@masked_scatter.def_backward
def _(ctx, g):
    mask, src = ctx.mask, ctx.source
    sel = g.masked_select(mask)
    g_src = pad_to(sel, (src.numel(),)).reshape(src.shape)
    return g.masked_fill(mask, 0), None, g_src


# ---------------------------------------------------------------------- take_along_dim
@takes_tensors("input", "indices")
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """take_along_dim(input, indices, dim=None) -> Tensor

    ``gather`` with broadcasting between ``input`` and ``indices`` off ``dim``; with
    ``dim=None`` both are flattened. Negative indices count from the end."""
    if indices._dtype is not D.int64:
        raise RuntimeError("take_along_dim(): dtype of indices should be Long but got "
                           f"{D.TYPE_NAME[indices._dtype]}")
    if dim is None:
        return take_along_dim(input.reshape(-1), indices.reshape(-1), 0)
    nd = input.ndim
    d = _wrap_dim(dim, nd)
    if indices.ndim != nd:
        raise RuntimeError("take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {nd} dimensions for input, and {indices.ndim} "
                           "dimensions for indices")
    n = input.shape[d] if nd else 1
    ishape, xshape = list(indices.shape), list(input.shape)
    if nd:
        ishape[d] = xshape[d] = 1
    try:
        common = list(np.broadcast_shapes(tuple(ishape), tuple(xshape)))
    except ValueError:
        raise RuntimeError(broadcast_error([tuple(xshape), tuple(ishape)])) from None
    ti, tx = list(common), list(common)
    if nd:
        ti[d], tx[d] = indices.shape[d], input.shape[d]
    idx = where(indices < 0, indices + n, indices).expand(tuple(ti))
    return input.expand(tuple(tx)).gather(d, idx)


tensor_method("take_along_dim")(take_along_dim)
