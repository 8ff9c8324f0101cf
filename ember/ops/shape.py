"""Views and shape ops. A view's impl returns a numpy view of its input, and the table's
``view=True`` makes the result share the input's storage and version counter.

Views that select part of their input (``narrow``, ``select``, ...) live in strided.py;
multi-output views (``split``, ``unbind``, ...) in joining.py beside ``cat``/``stack``.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import Size, Tensor, _wrap_dim
from .bind import tensor_method
from .arguments import takes_tensors
from .arguments import broadcast_error
from .registry import alias_all, op
from .._dispatch import STATE

_new = object.__new__

PUBLIC = ["broadcast_to", "broadcast_shapes", "broadcast_tensors"]


def wrap_dim(dim, ndim):
    return _wrap_dim(dim, ndim)


def wrap_dim_nonscalar(dim: int, ndim: int) -> int:
    """``wrap_dim`` for ops that PyTorch refuses on 0-d tensors with its own message."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return _wrap_dim(dim, ndim)


def _sizes(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:  # the common case, plain ints, needs no conversion
        if type(s) is not int:
            break
    else:
        return tuple(size)
    for s in size:
        if not isinstance(s, numbers.Integral) and not hasattr(s, "__index__"):
            raise TypeError(f"expected a sequence of integers for the shape, but got an element "
                            f"of type {type(s).__name__}")
    # a compiler's symbolic size (marked ``_symbolic``) passes through unspecialised
    return tuple(s if getattr(s, "_symbolic", False) else operator.index(s) for s in size)


def _int_list(values, opname: str, argname: str, pos: int) -> tuple:
    """A ``int[]`` argument as PyTorch's parser takes it: a sequence of ints (0-d integer
    tensors count as ints), never a bare int."""
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{opname}(): argument '{argname}' (position {pos}) must be tuple of "
                        f"ints, not {type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{opname}(): argument '{argname}' (position {pos}) must be tuple "
                            f"of ints, but found element of type {type(v).__name__} at pos {i}")
        out.append(operator.index(v))
    return tuple(out)


def _type_name(a) -> str:
    return D.TYPE_NAME[D.from_np(a.dtype)]


def infer_size(shape, numel: int) -> tuple:
    """Resolve one -1 in ``shape`` against ``numel`` with PyTorch's errors."""
    if math.prod(shape) == numel and (not shape or min(shape) >= 0):
        return tuple(shape)  # the common case: no -1 to infer, nothing wrong
    shape = list(shape)
    infer = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
        elif s >= 0:
            known *= s
        else:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    if numel == known or (infer is not None and known > 0 and numel % known == 0):
        if infer is not None:
            if known == 0:
                raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} "
                                   "because the unspecified dimension size -1 can be any value "
                                   "and is ambiguous")
            shape[infer] = numel // known
        return tuple(shape)
    raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")


def _reshape_view(a: np.ndarray, shape) -> np.ndarray | None:
    """``a`` reshaped without copying, or None when its strides do not allow it."""
    try:
        return a.reshape(shape, copy=False)
    except ValueError:
        return None


# ---------------------------------------------------------------------- storage geometry
def _elem_strides(a: np.ndarray) -> tuple:
    isz = a.itemsize
    return tuple(s // isz for s in a.strides)


# ---------------------------------------------------------------------- view / reshape
@op(view=True, method=False, function=False, out=False)
def view(xp, self: "Tensor", shape):
    shape = infer_size(shape, self.size)
    try:
        return self.reshape(shape, copy=False)  # _reshape_view, inline: a hot call
    except ValueError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None


@view.def_backward
def _(ctx, g):
    return g.reshape(ctx.self.shape)


@tensor_method("view")
def _view_method(self, *shape, dtype=None):
    # the commonest case inline (plain int sizes, nothing to infer, no autograd, no trace):
    # what the op's dispatcher would do for it, at a third of the cost
    if dtype is None and STATE.top is None and not self._leaf_rg and self.grad_fn is None \
            and type(self) is Tensor and all(type(s) is int and s >= 0 for s in shape):
        a = self._data
        if math.prod(shape) == a.size:
            try:
                res = a.reshape(shape, copy=False)
            except ValueError:
                pass  # not expressible as a view: the general path raises PyTorch's error
            else:
                out = _new(Tensor)
                out._data = res
                out._dtype = self._dtype
                if self._backend is not Tensor._backend:
                    out._backend = self._backend
                base = self._base
                out._base = base if base is not None else self
                vc = self._vc
                out._vc = vc if vc is not None else self._version_counter()
                return out
    if dtype is not None:
        return view_dtype(self, dtype)
    if len(shape) == 1 and type(shape[0]) is not int and isinstance(shape[0], D.dtype):
        return view_dtype(self, shape[0])
    return _view_fast(self, _sizes(shape))


_view_fast = view.method  # x.view(...) is a hot small-tensor call: its call path
@op(view=True, method=False, function=False, out=False, differentiable=False)
def view_dtype(xp, self: "Tensor", dtype):
    old, new = self.dtype.itemsize, dtype.itemsize
    if old != new:
        what = f"view {_type_name(self)} as {D.TYPE_NAME[dtype]} (different element sizes)"
        if self.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 to {what}")
        st = _elem_strides(self)
        if st[-1] != 1 and self.shape[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 to {what}, but got {st[-1]}")
        if new > old:
            ratio = new // old
            if self.shape[-1] % ratio:
                raise RuntimeError(f"self.size(-1) must be divisible by {ratio} to {what}, but "
                                   f"got {self.shape[-1]}")
            off = xp.storage_offset(self)
            if off % ratio:
                raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} to "
                                   f"{what}, but got {off}")
            for i, s in enumerate(st[:-1]):
                if s % ratio:
                    raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} to "
                                       f"{what}, but got {s}")
    return self.view(dtype.np)


@op(view="maybe", out=False, method=False)
def reshape(xp, input: "Tensor", shape):
    _int_list(shape, "reshape", "shape", 2)
    shape = infer_size(_sizes((shape,)), input.size)
    v = _reshape_view(input, shape)
    return v if v is not None else input.reshape(shape)


@reshape.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@tensor_method("reshape")
def _reshape_method(self, *shape):
    return reshape(self, _sizes(shape))


@tensor_method("view_as")
@takes_tensors("other")
def view_as(self, other):
    return view(self, tuple(other.shape))


@tensor_method("reshape_as")
@takes_tensors("other")
def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


# ---------------------------------------------------------------------- expand
@op(view=True, method=False, function=False, out=False)
def expand(xp, input: "Tensor", size, *, implicit=False):
    size = list(size)
    nd = input.ndim
    if len(size) < nd:
        raise RuntimeError(f"expand(torch.{_type_name(input)}Tensor{{{list(input.shape)}}}, "
                           f"size={size}): the number of sizes provided ({len(size)}) must be "
                           f"greater or equal to the number of dimensions in the tensor ({nd})")
    lead = len(size) - nd
    target = list(size)
    for i, s in enumerate(size):
        if i < lead:
            if s == -1:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
        elif s == -1:
            target[i] = input.shape[i - lead]
        elif input.shape[i - lead] not in (1, s):
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({input.shape[i - lead]}) at non-singleton dimension {i}. "
                               f" Target sizes: {size}.  Tensor sizes: {list(input.shape)}")
    if any(s < 0 for s in target):
        raise RuntimeError("numel: integer multiplication overflow")
    target = tuple(target)
    # An expansion that repeats no element is an ordinary (writable) view; one that does is
    # read-only, so a write through it cannot silently hit one element several times.
    if input.size == math.prod(target):
        v = _reshape_view(input, target)
        if v is not None:
            return v
    return xp.broadcast_to(input, target)


@expand.def_backward
def _(ctx, g):
    return g.sum_to_size(ctx.input.shape)


@tensor_method("expand")
def _expand_method(self, *size):
    return _expand_fast(self, _sizes(size))


_expand_fast = expand.method  # backward rules expand gradients: its call path


@tensor_method("expand_as")
@takes_tensors("other")
def expand_as(self, other):
    return expand(self, tuple(other.shape))


def broadcast_to(input: Tensor, size) -> Tensor:
    """``broadcast_to(input, size)``: ``input.expand(size)``."""
    return expand(input, _sizes((size,)))


tensor_method("broadcast_to")(broadcast_to)


# ---------------------------------------------------------------------- permutations
@op(view=True, method=False, out=False)
def permute(xp, input: "Tensor", dims):
    nd = input.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    d = [wrap_dim(x, nd) for x in dims]
    if len(set(d)) != len(d):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return input.transpose(d)


@permute.def_backward
def _(ctx, g):
    nd = len(ctx.dims)
    inv = [0] * nd
    for i, d in enumerate(ctx.dims):
        inv[wrap_dim(d, nd)] = i
    return g.permute(inv)


@tensor_method("permute")
def _permute_method(self, *dims):
    return permute(self, _sizes(dims))


@op(view=True, out=False)
def transpose(xp, input: "Tensor", dim0, dim1):
    nd = input.ndim
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    return xp.swapaxes(input, a, b) if nd else input.view()


@transpose.def_backward
def _(ctx, g):
    return g.transpose(ctx.dim0, ctx.dim1)


alias_all({"swapaxes": "transpose", "swapdims": "transpose"})


@op(view=True, out=False)
def t(xp, input: "Tensor"):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input.ndim}D")
    return input.T


@t.def_backward
def _(ctx, g):
    return g.t()


# complex input: numpy has no lazy conjugation, so the result is a conjugated copy
@op(view="maybe", out=False)
def adjoint(xp, input: "Tensor"):
    if input.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.ndim}-D tensor.")
    m = xp.swapaxes(input, -1, -2)
    return xp.conj(m) if input.dtype.kind == "c" else m


@adjoint.def_backward
def _(ctx, g):
    return g.adjoint()


def _T(self):
    if self.ndim == 0:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                      "these cases.", stacklevel=2)
    elif self.ndim != 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or `x.permute(*torch."
                      "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      stacklevel=2)
    return permute(self, tuple(range(self.ndim - 1, -1, -1)))


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def _H(self):
    if self.ndim == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
                      stacklevel=2)
        return self.conj()
    if self.ndim != 2:
        hint = ". For batches of matrices, consider using tensor.mH" if self.ndim > 2 else "."
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor{hint}")
    return adjoint(self)


def _mH(self):
    if self.ndim < 2:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. Got "
                           f"{self.ndim}-D tensor.")
    return adjoint(self)


tensor_method("T")(property(_T))
tensor_method("mT")(property(_mT))
tensor_method("H")(property(_H))
tensor_method("mH")(property(_mH))


@op(view=True, out=False)
def movedim(xp, input: "Tensor", source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    nd = input.ndim
    ws, wd = [wrap_dim(s, nd) for s in src], [wrap_dim(d, nd) for d in dst]
    for name, raw, wrapped in (("source", src, ws), ("destination", dst, wd)):
        if len(set(wrapped)) != len(wrapped):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({raw})")
    return xp.moveaxis(input, ws, wd) if nd else input.view()


@movedim.def_backward
def _(ctx, g):
    return g.movedim(ctx.destination, ctx.source)


alias_all({"moveaxis": "movedim"})


# ---------------------------------------------------------------------- squeeze / unsqueeze
@op(view=True, out=False)
def unsqueeze(xp, input: "Tensor", dim):
    d = wrap_dim(dim, input.ndim + 1)
    return xp.expand_dims(input, d)


@unsqueeze.def_backward
def _(ctx, g):
    return g.squeeze(ctx.dim)


@op(view=True, out=False)
def squeeze(xp, input: "Tensor", dim=None):
    nd = input.ndim
    if dim is None:
        axes = tuple(i for i, s in enumerate(input.shape) if s == 1)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        wrapped = [wrap_dim(x, nd) for x in dims]
        for w in wrapped:
            if wrapped.count(w) > 1:
                raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        axes = tuple(d for d in wrapped if nd and input.shape[d] == 1)
    return xp.squeeze(input, axis=axes) if axes else input.view()


@squeeze.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@op(view="maybe", out=False)
def flatten(xp, input: "Tensor", start_dim=0, end_dim=-1):
    nd = input.ndim
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if nd == 0:
        return input.reshape(1)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    # numpy-only: host arithmetic on a shape
    shape = input.shape[:s] + (int(np.prod(input.shape[s:e + 1])),) + input.shape[e + 1:]
    v = _reshape_view(input, shape)
    return v if v is not None else input.reshape(shape)


@flatten.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@op(view="maybe", out=False)
def unflatten(xp, input: "Tensor", dim, sizes):
    nd = input.ndim
    d = wrap_dim(dim, nd)
    sizes = _sizes((tuple(sizes),))
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[d]
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in sizes if s != -1]))  # numpy-only: host arithmetic on a shape
    if (known != n and -1 not in sizes) or (-1 in sizes and (known == 0 or n % known)):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {d} ({n}) in the input tensor")
    shape = input.shape[:d] + infer_size(sizes, n) + input.shape[d + 1:]
    v = _reshape_view(input, shape)
    return v if v is not None else input.reshape(shape)


@unflatten.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


# ---------------------------------------------------------------------- broadcasting
def broadcast_shapes(*shapes) -> Size:
    """``broadcast_shapes(*shapes)``: the shape tensors of these shapes broadcast to, without
    making tensors. Each shape is an int or a sequence of ints."""
    norm = []
    for s in shapes:
        if s is None:
            s = ()
        elif isinstance(s, numbers.Integral) and not isinstance(s, bool):
            s = (int(s),)
        elif isinstance(s, (tuple, list)):
            for v in s:
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise TypeError(f"torch.Size() takes an iterable of 'int' (item "
                                    f"{list(s).index(v)} is '{type(v).__name__}')")
            s = tuple(int(v) for v in s)
        else:
            raise RuntimeError("Input shapes should be of type ints, a tuple of ints, or a list "
                               f"of ints, got {s}")
        norm.append(s)
    result = [1] * max((len(s) for s in norm), default=0)
    for k, s in enumerate(norm):
        for i in range(-1, -len(s) - 1, -1):
            if s[i] < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
            if s[i] == 1 or s[i] == result[i]:
                continue
            if result[i] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {s[i]} at "
                                   f"{i}! Mismatching argument at index {k} had {s}; but "
                                   f"expected shape should be broadcastable to {result}")
            result[i] = s[i]
    return Size(result)


def check_tensors(tensors, argpos: int = 0) -> None:
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument {argpos}, but got "
                            f"{type(t).__name__}")


def broadcast_tensors(*tensors) -> tuple:
    """``broadcast_tensors(*tensors)``: views of the tensors expanded to their common shape."""
    check_tensors(tensors)
    shapes = [tuple(t.shape) for t in tensors]
    try:
        shape = tuple(broadcast_shapes(*shapes))
    except RuntimeError:
        raise RuntimeError(broadcast_error(shapes)) from None
    return tuple(expand(t, shape) for t in tensors)
