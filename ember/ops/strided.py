"""Views that select part of their input by strides: ``narrow``, ``select``, ``diagonal``,
``unfold`` and ``as_strided``. They share one backward: ``_view_grad`` writes the gradient into
zeros of the input's shape at the positions the view reads, and ``_view_take`` (its own
backward) reads them back.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .._tensor import Tensor
from .bind import tensor_method
from .registry import OPS, op
from .shape import _elem_strides, _int_list, wrap_dim

PUBLIC = ["as_strided"]


@op(view=True, out=False)
def narrow(xp, input: "Tensor", dim, start, length):
    nd = input.ndim
    if nd == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, nd)
    if isinstance(start, Tensor) and (start.ndim != 0 or start.dtype.kind not in "iu"):
        raise RuntimeError("start must be an 0-dim integral Tensor.")
    start, length = operator.index(start), operator.index(length)
    n = input.shape[d]
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return input[(slice(None),) * d + (slice(start, start + length),)]


@narrow.def_backward
def _(ctx, g):
    return _view_grad(g, ctx.input.shape, "narrow",
                      (ctx.dim, operator.index(ctx.start), operator.index(ctx.length)))


@op(view=True, out=False)
def select(xp, input: "Tensor", dim, index):
    nd = input.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, nd)
    index = operator.index(index)
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    return input[(slice(None),) * d + (index, Ellipsis)]


@select.def_backward
def _(ctx, g):
    return _view_grad(g, ctx.input.shape, "select", (ctx.dim, operator.index(ctx.index)))


@op(view=True, out=False)
def diagonal(xp, input: "Tensor", offset=0, dim1=0, dim2=1):
    nd = input.ndim
    a, b = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    d = xp.diagonal(input, offset, a, b)
    # numpy hands out read-only diagonals (PyTorch's are writable; CuPy's have no such flag)
    if not getattr(d.flags, "writeable", True) and input.flags.writeable:
        d.flags.writeable = True
    return d


@diagonal.def_backward
def _(ctx, g):
    return _view_grad(g, ctx.input.shape, "diagonal", (ctx.offset, ctx.dim1, ctx.dim2))


@op("as_strided", view=True, out=False, function=False, method=False)
def _as_strided(xp, input: "Tensor", size, stride, storage_offset=None, *, geometry=None):
    size = _int_list(size, "as_strided", "size", 2)
    stride = _int_list(stride, "as_strided", "stride", 3)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")
    off = xp.storage_offset(input) if storage_offset is None else operator.index(storage_offset)
    if off < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {off}")
    isz = input.itemsize
    need = 0 if 0 in size else off + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    have = xp.storage_nbytes(input)
    if need * isz > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {off}, and itemsize {isz} requiring a storage size of "
                           f"{need * isz} are out of bounds for storage of size {have}")
    return xp.strided_view(input, size, stride, off)


@_as_strided.def_meta
def _(input, size, stride, storage_offset=None, *, geometry=None):
    return tuple(size), input.dtype


@_as_strided.def_backward
def _(ctx, g):
    x = ctx.input
    if ctx.geometry is None:  # called without the public wrapper: assume a contiguous input
        st, acc = [], 1
        for n in reversed(tuple(x.shape)):
            st.append(acc)
            acc *= max(n, 1)
        in_stride, in_offset = tuple(reversed(st)), 0
    else:
        in_stride, in_offset = ctx.geometry
    off = in_offset if ctx.storage_offset is None else ctx.storage_offset
    return _view_grad(g, x.shape, "as_strided",
                      (tuple(ctx.size), tuple(ctx.stride), off, in_stride, in_offset))


def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """``as_strided(input, size, stride, storage_offset=None)``: a view of ``input``'s storage
    with the given sizes and strides (in elements), starting ``storage_offset`` elements into
    the storage (default: ``input.storage_offset()``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"as_strided(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return _as_strided(input, size, stride, storage_offset,
                       geometry=(tuple(input.stride()), input.storage_offset()))


tensor_method("as_strided")(as_strided)


@op(view=True, out=False, function=False)
def unfold(xp, input: "Tensor", dimension, size, step):
    nd = input.ndim
    d = wrap_dim(dimension, nd)
    n = input.shape[d] if nd else 1
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if nd == 0:
        return xp.strided_view(input, (size,), (1,))
    st = _elem_strides(input)
    shape = input.shape[:d] + ((n - size) // step + 1,) + input.shape[d + 1:] + (size,)
    strides = st[:d] + (st[d] * step,) + st[d + 1:] + (st[d],)
    return xp.strided_view(input, shape, strides)


@unfold.def_backward
def _(ctx, g):
    return _view_grad(g, ctx.input.shape, "unfold", (ctx.dimension, ctx.size, ctx.step))


# ---------------------------------------------------------------------- gradients of views
# views whose elements are distinct input elements: their gradient is a plain write
_DISJOINT = frozenset({"narrow", "select", "diagonal"})


def _storage_index(xp, shape, stride, offset) -> np.ndarray:
    pos = xp.full(tuple(shape), offset, np.int64)
    for k, (n, s) in enumerate(zip(shape, stride)):
        pos += (xp.arange(n, dtype=np.int64) * s).reshape((-1,) + (1,) * (len(shape) - k - 1))
    return pos


def _positions(xp, base_shape, view_name: str, args: tuple) -> np.ndarray:
    """For each element of the view, the flat index of the input element it reads (-1: an
    ``as_strided`` element outside the input's own elements). Part of the kernels of
    ``_view_grad`` and ``_view_take``: the positions come from shapes and strides alone."""
    n = math.prod(base_shape)
    if view_name == "as_strided":
        size, stride, offset, in_stride, in_offset = args
        in_pos = _storage_index(xp, base_shape, in_stride, in_offset).ravel()
        out_pos = _storage_index(xp, size, stride, offset)
        # the storage span both cover, from the geometry (no reduction over the arrays)
        span = max(_max_position(in_stride, base_shape, in_offset),
                   _max_position(stride, size, offset)) + 1
        owner = xp.full(span, -1, np.int64)
        owner[in_pos] = xp.arange(n, dtype=np.int64)
        return owner[out_pos]
    idx = xp.arange(n, dtype=np.int64).reshape(base_shape)
    return xp.array(OPS[view_name].impl(xp, idx, *args))


def _max_position(stride, shape, offset: int) -> int:
    """The largest storage position ``_storage_index`` gives (-1 for an empty shape)."""
    if not all(shape):
        return -1
    return offset + sum(max((k - 1) * st, 0) for k, st in zip(shape, stride))


def _scatter_add(xp, n: int, pos: np.ndarray, vals: np.ndarray) -> np.ndarray:
    pos, vals = pos.ravel(), vals.ravel()
    keep = pos >= 0  # positions outside the view add nothing (no host read to drop them)
    pos, vals = xp.where(keep, pos, 0), xp.where(keep, vals, xp.zeros((), vals.dtype))
    if vals.dtype.kind == "c":
        return xp.bincount(pos, vals.real, n) + 1j * xp.bincount(pos, vals.imag, n)
    return xp.bincount(pos, vals.astype(np.float64, copy=False), n)


@op(method=False, function=False, out=False)
def _view_grad(xp, grad: "Tensor", base_shape, view_name, args):
    """Zeros of ``base_shape`` with ``grad`` added at the positions view ``view_name`` reads."""
    base_shape = tuple(base_shape)
    if view_name in _DISJOINT:
        z = xp.zeros(base_shape, grad.dtype)
        OPS[view_name].impl(xp, z, *args)[...] = grad
        return z
    if view_name == "unfold" and base_shape:
        return _unfold_grad(xp, grad, base_shape, *args)
    n = math.prod(base_shape)
    r = _scatter_add(xp, n, _positions(xp, base_shape, view_name, args), grad)
    return r.astype(grad.dtype, copy=False).reshape(base_shape)


def _unfold_grad(xp, grad, base_shape, dimension, size, step):
    """Windows overlap when ``step < size``: add them back one slice at a time, looping over
    whichever is fewer, the offsets within a window or the windows."""
    d = wrap_dim(dimension, len(base_shape))
    z = xp.zeros(base_shape, grad.dtype)
    pre = (slice(None),) * d
    count = grad.shape[d]
    if size <= count:
        for k in range(size):  # offset k of every window: input positions k, k+step, ...
            z[pre + (slice(k, k + step * (count - 1) + 1, step),)] += grad[..., k]
    else:
        for i in range(count):  # window i covers input positions i*step ... i*step+size-1
            z[pre + (slice(i * step, i * step + size),)] += xp.moveaxis(grad[pre + (i,)], -1, d)
    return z


@_view_grad.def_backward
def _(ctx, g):
    if ctx.view_name in _DISJOINT or ctx.view_name == "unfold":
        return OPS[ctx.view_name](g, *ctx.args)
    return _view_take(g, ctx.base_shape, ctx.view_name, ctx.args)


@op(method=False, function=False, out=False)
def _view_take(xp, input: "Tensor", base_shape, view_name, args):
    """What view ``view_name`` reads from ``input``, as a new array (0 where it reads none)."""
    pos = _positions(xp, tuple(base_shape), view_name, args)
    flat = input.reshape(-1)
    out = flat[xp.maximum(pos, 0)] if flat.size else xp.zeros(pos.shape, input.dtype)
    return xp.where(pos < 0, xp.zeros((), out.dtype), out)  # no host read of the positions


@_view_take.def_backward
def _(ctx, g):
    return _view_grad(g, ctx.base_shape, ctx.view_name, ctx.args)
