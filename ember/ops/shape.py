"""Views and shape ops. A view's impl returns a numpy view of its input, and the table's
``view=True`` makes the result share the input's storage and version counter."""

from __future__ import annotations

import numbers

import numpy as np

from .._tensor import _wrap_dim
from .bind import tensor_method
from .registry import alias_all, op

PUBLIC = ["broadcast_to"]


def wrap_dim(dim, ndim):
    return _wrap_dim(dim, ndim)


def _sizes(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if not isinstance(s, numbers.Integral) and not hasattr(s, "__index__"):
            raise TypeError(f"expected a sequence of integers for the shape, but got an element "
                            f"of type {type(s).__name__}")
    return tuple(int(s) for s in size)


def infer_size(shape, numel: int) -> tuple:
    """Resolve one -1 in ``shape`` against ``numel`` with PyTorch's errors."""
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


# ---------------------------------------------------------------------- view / reshape
@op(view=True, method=False, function=False, out=False)
def view(xp, self: "Tensor", shape):
    shape = infer_size(shape, self.size)
    v = self.view()
    try:
        v.shape = shape
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None
    return v


@view.def_backward
def _(ctx, g):
    return g.reshape(ctx.self.shape)


@tensor_method("view")
def _view_method(self, *shape, dtype=None):
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, numbers.Integral)):
        return view_dtype(self, shape[0])
    return view(self, _sizes(shape))


@op(view=True, method=False, function=False, out=False, differentiable=False)
def view_dtype(xp, self: "Tensor", dtype):
    if self.dtype.itemsize != dtype.itemsize and self.ndim and not self.flags.c_contiguous:
        raise RuntimeError("self.stride(-1) must be 1 to view ScalarType with a different size")
    return self.view(dtype.np)


@op(view="maybe", out=False, method=False)
def reshape(xp, input: "Tensor", shape):
    shape = infer_size(_sizes((shape,)), input.size)
    v = input.view()
    try:
        v.shape = shape
        return v
    except AttributeError:
        return input.reshape(shape)


@reshape.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@tensor_method("reshape")
def _reshape_method(self, *shape):
    return reshape(self, _sizes(shape))


@tensor_method("view_as")
def view_as(self, other):
    return view(self, tuple(other.shape))


@tensor_method("reshape_as")
def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


# ---------------------------------------------------------------------- expand
@op(view=True, method=False, out=False)
def expand(xp, input: "Tensor", size, *, implicit=False):
    size = list(size)
    nd = input.ndim
    if len(size) < nd:
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(input.shape)}}}, size={size}): the "
                           "number of sizes provided (" + str(len(size)) + ") must be greater "
                           "or equal to the number of dimensions in the tensor (" + str(nd) + ")")
    lead = len(size) - nd
    for i, s in enumerate(size):
        if s == -1:
            if i < lead:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            size[i] = input.shape[i - lead]
        elif i >= lead and input.shape[i - lead] not in (1, s):
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({input.shape[i - lead]}) at non-singleton dimension {i}. "
                               f" Target sizes: {list(size)}.  Tensor sizes: "
                               f"{list(input.shape)}")
    return xp.broadcast_to(input, tuple(size))


@expand.def_backward
def _(ctx, g):
    return g.sum_to_size(ctx.input.shape)


@tensor_method("expand")
def _expand_method(self, *size):
    return expand(self, _sizes(size))


@tensor_method("expand_as")
def expand_as(self, other):
    return expand(self, tuple(other.shape))


def broadcast_to(input, size):
    return expand(input, _sizes((size,)))


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


@op(view=True, out=False)
def adjoint(xp, input: "Tensor"):
    return xp.conj(xp.swapaxes(input, -1, -2)) if input.dtype.kind == "c" else \
        xp.swapaxes(input, -1, -2)


@adjoint.def_backward
def _(ctx, g):
    return g.adjoint()


def _T(self):
    if self.ndim not in (0, 2):
        import warnings
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or `x.permute(*torch."
                      "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.")
    return permute(self, tuple(range(self.ndim - 1, -1, -1)))


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def _H(self):
    return _T(self).conj() if self.ndim == 2 else _T(self)


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
    return xp.moveaxis(input, [wrap_dim(s, nd) for s in src], [wrap_dim(d, nd) for d in dst])


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
        axes = tuple(d for d in (wrap_dim(x, nd) for x in dims) if nd and input.shape[d] == 1)
    return xp.squeeze(input, axis=axes) if axes else input.view()


@squeeze.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@op(view="maybe", out=False)
def flatten(xp, input: "Tensor", start_dim=0, end_dim=-1):
    nd = input.ndim
    if nd == 0:
        return input.reshape(1)
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape[:s] + (int(np.prod(input.shape[s:e + 1])),) + input.shape[e + 1:]
    return view.impl(xp, input, shape) if _viewable(input, shape) else input.reshape(shape)


def _viewable(a, shape):
    v = a.view()
    try:
        v.shape = shape
        return True
    except AttributeError:
        return False


@flatten.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)


@op(view="maybe", out=False)
def unflatten(xp, input: "Tensor", dim, sizes):
    nd = input.ndim
    d = wrap_dim(dim, nd)
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    sizes = infer_size(sizes, input.shape[d])
    shape = input.shape[:d] + sizes + input.shape[d + 1:]
    return view.impl(xp, input, shape) if _viewable(input, shape) else input.reshape(shape)


@unflatten.def_backward
def _(ctx, g):
    return g.reshape(ctx.input.shape)
