"""Joining and splitting (``atleast_nd``, ``meshgrid``, ``cat``/``stack`` and their h/v/d
variants, ``split``/``chunk``/``tensor_split``/``unbind``) and data-movement ops (``flip``,
``roll``, ``rot90``, ``repeat``, ``tile``, ``repeat_interleave``).

The splits return tuples of views; their backward joins the gradients again. Joining ops promote
their inputs' dtypes together, as PyTorch does.
"""

from __future__ import annotations

import numbers
import operator
from itertools import pairwise

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from .bind import tensor_method
from .arguments import takes_tensors
from ..backends.base import ARRAY_TYPES
from .registry import op
from .shape import (
    _int_list,
    _sizes,
    check_tensors,
    expand,
    reshape,
    unsqueeze,
    wrap_dim,
    wrap_dim_nonscalar,
)
from .strided import _view_grad

PUBLIC = ["atleast_1d", "atleast_2d", "atleast_3d", "cat", "concat", "concatenate", "hstack",
          "vstack", "row_stack", "dstack", "column_stack", "split_with_sizes", "chunk", "hsplit",
          "vsplit", "dsplit", "fliplr", "flipud", "tile", "meshgrid"]


def _promoted(arrays) -> np.dtype:
    """The dtype ``cat``/``stack`` give their inputs: all of them promoted together."""
    return D.result_type(arrays).np


def _dim_arg(opname: str, dim, axis):
    d = dim if axis is None else axis
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):
        raise TypeError(f"{opname}(): argument 'dim' (position 2) must be int, not "
                        f"{type(d).__name__}")
    return int(d)


# ---------------------------------------------------------------------- atleast_nd
def _atleast(nd: int):
    # how a tensor of each smaller rank is lifted to ``nd`` dimensions
    lift = {1: {0: lambda t: reshape(t, (1,))},
            2: {0: lambda t: reshape(t, (1, 1)), 1: lambda t: unsqueeze(t, 0)},
            3: {0: lambda t: reshape(t, (1, 1, 1)),
                1: lambda t: unsqueeze(unsqueeze(t, 0), -1),
                2: lambda t: unsqueeze(t, -1)}}[nd]

    def atleast(*tensors):
        single = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        if single and not isinstance(tensors[0], Tensor):
            raise TypeError(f"atleast_{nd}d() received an invalid combination of arguments - "
                            f"got ({type(tensors[0]).__name__}), but expected a Tensor or a "
                            "sequence of Tensors")
        check_tensors(tensors)
        out = tuple(lift[t.ndim](t) if t.ndim < nd else t for t in tensors)
        return out[0] if single else out

    atleast.__name__ = atleast.__qualname__ = f"atleast_{nd}d"
    atleast.__doc__ = (f"``atleast_{nd}d(*tensors)``: each tensor viewed with at least {nd} "
                       "dimension(s); one tensor in, one tensor out, else a tuple.")
    return atleast


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """``meshgrid(*tensors, indexing=None)``: coordinate grids from 0-d/1-d tensors, as
    expanded views. ``indexing='ij'`` (the default) gives shape ``(len(t0), len(t1), ...)``;
    ``'xy'`` swaps the first two dimensions (Cartesian indexing)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    check_tensors(tensors)
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f'received: {indexing}')
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    n = len(tensors)
    axes = list(range(n))
    if indexing == "xy" and n >= 2:
        axes[0], axes[1] = 1, 0
    shape = [0] * n
    for t, ax in zip(tensors, axes):
        shape[ax] = t.numel()
    return tuple(expand(reshape(t, tuple(-1 if k == ax else 1 for k in range(n))), tuple(shape))
                 for t, ax in zip(tensors, axes))


# ---------------------------------------------------------------------- cat / stack
@op("cat", method=False, function=False)
def _cat(xp, tensors: "Tensor[]", dim=0, *, axis=None):
    d = _dim_arg("cat", dim, axis)
    dt = _promoted(tensors)
    for i, a in enumerate(tensors):
        if a.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
    # PyTorch's legacy rule: 1-d empty tensors are skipped, whatever the other shapes
    kept = [(i, a) for i, a in enumerate(tensors) if a.shape != (0,)]
    if not kept:
        return xp.empty((0,), dt)
    ref = kept[0][1]
    nd = ref.ndim
    d = wrap_dim(d, nd)
    for i, a in kept:
        if a.ndim != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{a.ndim}")
        for k in range(nd):
            if k != d and a.shape[k] != ref.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ref.shape[k]} but got size {a.shape[k]} for "
                                   f"tensor number {i} in the list.")
    return xp.concatenate([a for _, a in kept], axis=d, dtype=dt, casting="unsafe")


@_cat.def_backward
def _(ctx, g):
    d = ctx.dim if ctx.axis is None else ctx.axis
    metas = ctx.tensors
    grads, start = [], 0
    for m in metas:
        if tuple(m.shape) == (0,):
            grads.append(g.new_zeros((0,)))
            continue
        n = m.shape[wrap_dim(d, g.ndim)]
        grads.append(g.narrow(d, start, n))
        start += n
    return grads


def cat(tensors, dim: int = 0, *, axis: int | None = None, out: Tensor | None = None) -> Tensor:
    """``cat(tensors, dim=0, *, out=None)``: join tensors along an existing dimension. Inputs
    are promoted to a common dtype; 1-d empty tensors are skipped (PyTorch's legacy rule)."""
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    if isinstance(tensors, Tensor):
        raise TypeError("cat(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        "Tensor")
    return _cat(tensors, dim, axis=axis, out=out)


def concat(tensors, dim: int = 0, *, axis: int | None = None, out: Tensor | None = None):
    """``concat(tensors, dim=0, *, out=None)``: alias of ``cat``."""
    return cat(tensors, dim, axis=axis, out=out)


def concatenate(tensors, axis: int = 0, out: Tensor | None = None, *, dim: int | None = None):
    """``concatenate(tensors, axis=0, out=None)``: alias of ``cat``."""
    return cat(tensors, axis if dim is None else dim, out=out)


@op()
def stack(xp, tensors: "Tensor[]", dim=0, *, axis=None):
    d = _dim_arg("stack", dim, axis)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tensors[0]
    for i, a in enumerate(tensors[1:], 1):
        if a.shape != ref.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(ref.shape)} at entry 0 and {list(a.shape)} at entry {i}")
    d = wrap_dim(d, ref.ndim + 1)
    return xp.stack(tensors, axis=d, dtype=_promoted(tensors), casting="unsafe")


@stack.def_backward
def _(ctx, g):
    return list(g.unbind(ctx.dim if ctx.axis is None else ctx.axis))


def _stack_fn(name: str, lift, dim_of, doc: str):
    def fn(tensors, *, out: Tensor | None = None) -> Tensor:
        if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
            raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of "
                            f"Tensors, not {type(tensors).__name__}")
        if not tensors:
            raise RuntimeError(f"{name} expects a non-empty TensorList")
        rep = lift(tensors)
        return cat(rep, dim_of(rep), out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _columns(tensors):
    check_tensors(tensors)
    return [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors]


hstack = _stack_fn("hstack", atleast_1d, lambda r: 0 if r[0].ndim == 1 else 1,
                   "``hstack(tensors, *, out=None)``: join column-wise (along dim 1; dim 0 for "
                   "1-d tensors).")
vstack = _stack_fn("vstack", atleast_2d, lambda r: 0,
                   "``vstack(tensors, *, out=None)``: join row-wise (tensors seen as >= 2-d).")
row_stack = _stack_fn("row_stack", atleast_2d, lambda r: 0,
                      "``row_stack(tensors, *, out=None)``: alias of ``vstack``.")
dstack = _stack_fn("dstack", atleast_3d, lambda r: 2,
                   "``dstack(tensors, *, out=None)``: join depth-wise (along dim 2; tensors seen "
                   "as >= 3-d).")
column_stack = _stack_fn("column_stack", _columns, lambda r: 1,
                         "``column_stack(tensors, *, out=None)``: 0-d and 1-d tensors become "
                         "columns, then ``hstack``.")


# ---------------------------------------------------------------------- split family
def _slices(d: int, bounds) -> list:
    """Index tuples selecting ``[start, stop)`` along dimension ``d`` for each bound pair."""
    pre = (slice(None),) * d
    return [pre + (slice(a, b),) for a, b in bounds]


def _piecewise_grad(grads, shape, d: int, bounds):
    """Gradient of pieces ``[start, stop)`` along ``d``: ``cat`` when they tile the dimension,
    else the sum of each piece written into zeros (pieces may overlap or leave gaps)."""
    n = shape[d]
    tiled = bounds and bounds[0][0] == 0 and bounds[-1][1] == n and all(
        b[1] == c[0] for b, c in pairwise(bounds))
    if tiled:
        return _cat(list(grads), d)
    total = None
    for g, (a, b) in zip(grads, bounds):
        if b > a:
            part = _view_grad(g, tuple(shape), "narrow", (d, a, b - a))
            total = part if total is None else total + part
    return total if total is not None else grads[0].new_zeros(tuple(shape))


@op(view=True, out=False)
def split(xp, tensor: "Tensor", split_size_or_sections, dim=0):
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, tensor.ndim)
    bounds = _split_bounds(tensor.shape[d], split_size_or_sections, d)
    return tuple(tensor[s] for s in _slices(d, bounds))


def _split_bounds(n: int, spec, d: int) -> list:
    if isinstance(spec, Tensor) and spec.ndim:
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 2) must be tuple "
                        "of ints, not Tensor")
    if isinstance(spec, (list, tuple)):
        sizes = list(_int_list(spec, "split_with_sizes", "split_sizes", 2))
        if any(s < 0 for s in sizes):
            raise RuntimeError("split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
    else:
        s = operator.index(spec)
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got "
                               f"split_size={s}")
        if s == 0 and n != 0:
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        k = max(-(-n // s), 1) if s else 1
        sizes = [s] * (k - 1) + [n - s * (k - 1)]
    ends = np.cumsum(sizes).tolist()  # numpy-only: host arithmetic on split sizes
    return [(e - s, e) for s, e in zip(sizes, ends)]


@split.def_backward
def _(ctx, g0, *gs):
    x = ctx.tensor
    d = wrap_dim(ctx.dim, x.ndim)
    return _cat([g0, *gs], d)


@tensor_method("split")
def _split_method(self, split_size, dim=0):
    return split(self, split_size, dim)


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """``split_with_sizes(input, split_sizes, dim=0)``: ``split`` with a list of sizes."""
    return split(input, list(_int_list(split_sizes, "split_with_sizes", "split_sizes", 2)), dim)


tensor_method("split_with_sizes")(split_with_sizes)


@takes_tensors("input")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunk(input, chunks, dim=0)``: at most ``chunks`` views of equal size (the last may
    be smaller) along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, input.ndim)
    n = input.shape[d]
    size = -(-n // chunks)
    if size == 0:  # an empty dimension still yields ``chunks`` empty pieces
        return split(input, [0] * chunks, d)
    return split(input, size, d)


tensor_method("chunk")(chunk)


@op(view=True, out=False)
def tensor_split(xp, input: "Tensor", indices_or_sections=None, dim=0, *, sections=None,
                 indices=None, tensor_indices_or_sections=None):
    spec = next((s for s in (indices_or_sections, sections, indices,
                             tensor_indices_or_sections) if s is not None), None)
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = wrap_dim(dim, input.ndim)
    return tuple(input[s] for s in _slices(d, _tensor_split_bounds(input.shape[d], spec)))


@tensor_split.def_meta
def _(input, indices_or_sections=None, dim=0, *, sections=None, indices=None,
      tensor_indices_or_sections=None):
    spec = next((s for s in (indices_or_sections, sections, indices,
                             tensor_indices_or_sections) if s is not None), None)
    if hasattr(spec, "shape"):  # a tensor of indices or sections: its values pick the pieces
        raise RuntimeError("tensor_split: output shapes depend on the input's values")
    shape = tuple(input.shape)
    if not shape:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = wrap_dim(dim, len(shape))
    return tuple((shape[:d] + (b - a,) + shape[d + 1:], input.dtype)
                 for a, b in _tensor_split_bounds(shape[d], spec))


def _tensor_split_bounds(n: int, spec) -> list:
    if isinstance(spec, Tensor):
        if spec.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {spec.ndim} dims")
        if spec.dtype is not D.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {D.TYPE_NAME[spec.dtype]}")
        spec = int(spec.item()) if spec.ndim == 0 else spec.tolist()
    if isinstance(spec, (list, tuple)):
        idx = _int_list(spec, "tensor_split", "indices", 2)
        starts = (0,) + idx
        stops = idx + (n,)
        # Python slice rules: negative indices wrap, out-of-range ones clamp, a stop before
        # its start gives an empty piece
        return [slice(a, b).indices(n)[:2] for a, b in zip(starts, stops)]
    s = operator.index(spec)
    if s <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {s}")
    q, r = divmod(n, s)
    sizes = [q + 1] * r + [q] * (s - r)
    ends = np.cumsum(sizes).tolist()  # numpy-only: host arithmetic on split sizes
    return [(e - z, e) for z, e in zip(sizes, ends)]


@tensor_split.def_backward
def _(ctx, *grads):
    x = ctx.input
    d = wrap_dim(ctx.dim, x.ndim)
    spec = next((s for s in (ctx.indices_or_sections, ctx.sections, ctx.indices,
                             ctx.tensor_indices_or_sections) if s is not None), None)
    bounds = [(a, max(a, b)) for a, b in _tensor_split_bounds(x.shape[d], spec)]
    return _piecewise_grad(grads, tuple(x.shape), d, bounds)


def _split_fn(name: str, min_dim: int, dim_of):
    def fn(input: Tensor, indices_or_sections=None, *, sections=None, indices=None) -> tuple:
        spec = next((s for s in (indices_or_sections, sections, indices) if s is not None),
                    None)
        if input.ndim < min_dim:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = dim_of(input.ndim)
        if not isinstance(spec, (list, tuple, Tensor)):
            s = operator.index(spec)
            if s == 0 or input.shape[d] % s:
                raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but "
                                   f"the size of the dimension {input.shape[d]} is not "
                                   f"divisible by the split_size {s}!")
        return tensor_split(input, spec, d)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name}(input, indices_or_sections)``: ``tensor_split`` along dimension "
                  f"{'1 (0 for 1-d input)' if name == 'hsplit' else dim_of(3)}; an int must "
                  "divide that dimension evenly.")
    fn = takes_tensors("input")(fn)
    tensor_method(name)(fn)
    return fn


hsplit = _split_fn("hsplit", 1, lambda nd: 0 if nd == 1 else 1)
vsplit = _split_fn("vsplit", 2, lambda nd: 0)
dsplit = _split_fn("dsplit", 3, lambda nd: 2)


@op(view=True, out=False)
def unbind(xp, input: "Tensor", dim=0):
    d = wrap_dim_nonscalar(dim, input.ndim)
    pre = (slice(None),) * d
    return tuple(input[pre + (i, Ellipsis)] for i in range(input.shape[d]))


@unbind.def_backward
def _(ctx, *grads):
    return stack(list(grads), ctx.dim)


# ---------------------------------------------------------------------- flips and rolls
def _dim_list(dims, nd: int, opname: str) -> tuple:
    out = [wrap_dim(d, nd) for d in dims]
    for w in out:
        if out.count(w) > 1:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
    return tuple(out)


@op()
def flip(xp, input: "Tensor", dims):
    dims = _int_list(dims, "flip", "dims", 2)
    axes = _dim_list(dims, input.ndim, "flip")
    if not axes or input.ndim == 0:
        return input.copy()
    return xp.flip(input, axes).copy()


@flip.def_backward
def _(ctx, g):
    return g.flip(ctx.dims)


@tensor_method("flip")
def _flip_method(self, *dims, **kwargs):
    if "dims" in kwargs and not dims:  # x.flip(dims=[0, 1])
        dims = (kwargs.pop("dims"),)
        if not isinstance(dims[0], (list, tuple)):
            raise TypeError("flip(): argument 'dims' must be tuple of ints, not "
                            f"{type(dims[0]).__name__}")
    if kwargs:
        raise TypeError(f"flip() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if not dims:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    return flip(self, _sizes(dims))


@takes_tensors("input")
def fliplr(input: Tensor) -> Tensor:
    """``fliplr(input)``: reverse the order of columns (dimension 1)."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@takes_tensors("input")
def flipud(input: Tensor) -> Tensor:
    """``flipud(input)``: reverse the order of rows (dimension 0)."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


tensor_method("fliplr")(fliplr)
tensor_method("flipud")(flipud)


def _ints(v, opname: str, argname: str) -> tuple:
    if isinstance(v, (list, tuple)):
        return _int_list(v, opname, argname, 2)
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{opname}(): argument '{argname}' (position 2) must be tuple of ints, "
                        f"not {type(v).__name__}")
    return (operator.index(v),)


@op()
def roll(xp, input: "Tensor", shifts, dims=None):
    shifts = _ints(shifts, "roll", "shifts")
    dims = () if dims is None else _ints(dims, "roll", "dims")
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if not dims:  # roll the flattened tensor
        return xp.roll(input, shifts[0])
    axes = [wrap_dim_nonscalar(d, input.ndim) for d in dims]
    return xp.roll(input, shifts, axes)


@roll.def_backward
def _(ctx, g):
    shifts = _ints(ctx.shifts, "roll", "shifts")
    return g.roll(tuple(-s for s in shifts), ctx.dims)


@op()
def rot90(xp, input: "Tensor", k=1, dims=(0, 1)):
    dims = _int_list(dims, "rot90", "dims", 3)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = wrap_dim(dims[0], input.ndim), wrap_dim(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    return xp.rot90(input, operator.index(k), (a, b)).copy()


@rot90.def_backward
def _(ctx, g):
    return g.rot90(-ctx.k, ctx.dims)


# ---------------------------------------------------------------------- repeat / tile
@op(method=False, function=False, out=False)
def repeat(xp, input: "Tensor", repeats):
    reps = _int_list(repeats, "repeat", "repeats", 1)
    nd = input.ndim
    if len(reps) < nd:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * (len(reps) - nd) + input.shape
    out_shape = [r * s for r, s in zip(reps, padded)]
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(out_shape)}: {out_shape}")
    # one broadcast copy: (1, s0, 1, s1, ...) -> (r0, s0, r1, s1, ...) -> (r0*s0, r1*s1, ...)
    inter_in = tuple(x for s in padded for x in (1, s))
    inter_out = tuple(x for r, s in zip(reps, padded) for x in (r, s))
    return xp.broadcast_to(input.reshape(inter_in), inter_out).reshape(out_shape)


@repeat.def_backward
def _(ctx, g):
    x = ctx.input
    reps = tuple(ctx.repeats)
    padded = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    inter = tuple(v for r, s in zip(reps, padded) for v in (r, s))
    if not inter:
        return g
    return g.reshape(inter).sum(tuple(range(0, len(inter), 2))).reshape(x.shape)


@tensor_method("repeat")
def _repeat_method(self, *repeats):
    if not repeats:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    return repeat(self, _sizes(repeats))


@takes_tensors("input")
def tile(input: Tensor, dims) -> Tensor:
    """``tile(input, dims)``: repeat ``input`` ``dims[i]`` times along each dimension; ``dims``
    shorter than ``input.ndim`` is padded with leading ones."""
    dims = _int_list(dims, "tile", "dims", 2)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


@tensor_method("tile")
def _tile_method(self, *dims):
    return tile(self, _sizes(dims))


def _check_repeats_dtype(r: np.ndarray) -> None:
    if r.dtype not in (np.int32, np.int64):
        raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for '
                                  f"'{D.TYPE_NAME[D.from_np(r.dtype)]}'")


@op(out=False, tags=("dynamic_shape",), saves=("repeats",))
def repeat_interleave(xp, input: "Tensor", repeats: "int|Tensor" = None, dim=None, *,
                      output_size=None):
    if repeats is None:  # repeat_interleave(repeats): the indices each repeated repeats[i] times
        r = input
        if r.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        _check_repeats_dtype(r)
        if (r < 0).any():
            raise RuntimeError("repeats can not be negative")
        out = xp.repeat(xp.arange(r.shape[0], dtype=r.dtype), r)
        if output_size is not None and output_size != out.shape[0]:
            raise RuntimeError("allocated size does not match required size")
        return out
    tensor_repeats = type(repeats) in ARRAY_TYPES
    if dim is None:
        a, d = input.reshape(-1), 0
    elif input.ndim == 0:  # PyTorch's own messages for a 0-d input with a dim
        if tensor_repeats:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got "
                         f"{wrap_dim(dim, 0) + 1})")
    else:
        a, d = input, wrap_dim(dim, input.ndim)
    n = a.shape[d]
    if tensor_repeats:
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        _check_repeats_dtype(repeats)
        r = repeats.reshape(-1)
        if r.size == 1:
            r = xp.broadcast_to(r, (n,))
        elif r.size != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {r.size} and input.size({d}) = {n}")
        if (r < 0).any():
            raise RuntimeError("repeats can not be negative")
        if output_size is not None and output_size != int(r.sum()):
            raise RuntimeError("allocated size does not match required size")
    else:
        if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral):
            raise TypeError("repeat_interleave(): argument 'repeats' (position 2) must be int or "
                            f"Tensor, not {type(repeats).__name__}")
        r = int(repeats)
        if r < 0:
            raise RuntimeError("Repeats must be non-negative")
        if output_size is not None and output_size != n * r:
            raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {n * r} but "
                               f"got {output_size}")
    return xp.repeat(a, r, axis=d)


@repeat_interleave.def_meta
def _(input, repeats=None, dim=None, *, output_size=None):
    if isinstance(repeats, numbers.Integral):
        n = input.numel() if dim is None else input.shape[wrap_dim(dim, len(input.shape))]
        shape = (n * repeats,) if dim is None else tuple(
            n * repeats if i == wrap_dim(dim, len(input.shape)) else s
            for i, s in enumerate(input.shape))
        return shape, input.dtype
    if output_size is None:
        raise RuntimeError("repeat_interleave: output shape depends on the input's values")
    if repeats is None:
        return (output_size,), input.dtype
    shape = list(input.shape) if dim is not None else [output_size]
    if dim is not None:
        shape[wrap_dim(dim, len(shape))] = output_size
    return tuple(shape), input.dtype


@repeat_interleave.def_backward
def _(ctx, g):
    x = ctx.input
    if ctx.repeats is None:
        return None
    d = 0 if ctx.dim is None else wrap_dim(ctx.dim, x.ndim)
    n = x.numel() if ctx.dim is None else x.shape[d]
    gi = _repeat_interleave_grad(g, ctx.repeats, d, n)
    return (gi.reshape(x.shape) if ctx.dim is None else gi), None


@op(method=False, function=False, out=False, saves=("repeats",))
def _repeat_interleave_grad(xp, grad: "Tensor", repeats: "int|Tensor", dim, n):
    """Sum ``grad`` over each run of repeated entries along ``dim`` (``n`` runs)."""
    shape = list(grad.shape)
    r = repeats.reshape(-1) if type(repeats) in ARRAY_TYPES else repeats
    if type(r) in ARRAY_TYPES and r.size == 1:
        r = int(r[0])
    if type(r) not in ARRAY_TYPES:
        shape[dim:dim + 1] = [n, r]
        return grad.reshape(shape).sum(axis=dim + 1, dtype=grad.dtype)
    shape[dim] = n
    out = xp.zeros(shape, grad.dtype)
    nz = xp.flatnonzero(r)
    if nz.size:
        starts = (xp.cumsum(r) - r)[nz]
        idx = (slice(None),) * dim + (nz,)
        # runs of non-zero length are contiguous, so reduceat sums exactly one run each
        out[idx] = np.add.reduceat(grad, starts, axis=dim)  # numpy-only: add.reduceat
    return out


@_repeat_interleave_grad.def_backward
def _(ctx, g):
    return repeat_interleave(g, ctx.repeats, ctx.dim), None
