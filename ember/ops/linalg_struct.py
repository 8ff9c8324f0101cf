"""Matrix structure: diagonals (diag, diag_embed, diagflat), trace, tril/triu and the cross
product.

Every diagonal op reads or writes through ember.diagonal's writable view, so the ops and their
backward rules (each one's gradient is ``diagonal`` or ``diagonal_backward``) agree on layout.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._tensor import _wrap_dim
from .bind import tensor_method
from .creation import eye
from .linalg import _LOW, tname
from .arguments import takes_tensors
from .arguments import broadcast_error
from .registry import op
from .strided import diagonal

PUBLIC = ["cross", "diagflat"]


def diagonal_view(xp, a: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    """The ``offset`` diagonal of ``a`` over (dim1, dim2) as a writable view (ember.diagonal's
    kernel)."""
    return diagonal.impl(xp, a, offset, dim1, dim2)


@op(out=False, function=False, method=False)
def diagonal_backward(xp, grad_output: "Tensor", input_sizes, offset, dim1, dim2):
    """Zeros of ``input_sizes`` with ``grad_output`` on the given diagonal."""
    out = xp.zeros(input_sizes, grad_output.dtype)
    diagonal_view(xp, out, offset, dim1, dim2)[...] = grad_output
    return out


@diagonal_backward.def_backward
def _(ctx, g):
    return diagonal(g, ctx.offset, ctx.dim1, ctx.dim2)


@op()
def diag_embed(xp, input: "Tensor", offset=0, dim1=-2, dim2=-1):
    """diag_embed(input, offset=0, dim1=-2, dim2=-1) -> Tensor: matrices whose ``offset``
    diagonal (over dim1, dim2) holds the last dimension of ``input``."""
    nd = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + abs(offset)
    batch = iter(input.shape[:-1])
    shape = [n if i in (d1, d2) else next(batch) for i in range(nd)]
    out = xp.zeros(shape, input.dtype)
    diagonal_view(xp, out, offset, d1, d2)[...] = input
    return out


@diag_embed.def_backward
def _(ctx, g):
    return diagonal(g, ctx.offset, ctx.dim1, ctx.dim2)


@op()
def diag(xp, input: "Tensor", diagonal=0):
    """diag(input, diagonal=0) -> Tensor: a 1-D tensor as a diagonal matrix, or the diagonal of
    a matrix (a copy)."""
    if input.ndim == 1:
        return diag_embed.impl(xp, input, diagonal, 0, 1)
    if input.ndim == 2:
        return diagonal_view(xp, input, diagonal, 0, 1).copy()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@diag.def_backward
def _(ctx, g):
    x = ctx.input
    if x.ndim == 1:
        return diagonal(g, ctx.diagonal, 0, 1)
    return diagonal_backward(g, tuple(x.shape), ctx.diagonal, 0, 1)


@takes_tensors("input")
def diagflat(input, offset: int = 0):
    """diagflat(input, offset=0) -> Tensor: the flattened input as a diagonal matrix."""
    return diag_embed(input.reshape(-1), offset)


tensor_method("diagflat")(diagflat)


@op()
def trace(xp, input: "Tensor"):
    """trace(input) -> Tensor: the sum of a matrix's main diagonal (integers sum as int64)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    dt = input.dtype
    if dt == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    d = diagonal_view(xp, input, 0, 0, 1)
    if dt.kind in "iu":
        return xp.asarray(d.sum(dtype=np.int64))
    if dt in _LOW:
        return xp.asarray(d.astype(np.float32).sum()).astype(dt)
    return xp.asarray(d.sum())


@trace.def_backward
def _(ctx, g):
    n, m = ctx.input.shape
    return g * eye(n, m, dtype=g.dtype, device=g.device)


def _register_tri(name, kernel):
    def impl(xp, input: "Tensor", diagonal=0):
        if input.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return kernel(xp, input, diagonal)

    impl.__name__ = name
    part = "lower" if name == "tril" else "upper"
    impl.__doc__ = (f"{name}(input, diagonal=0) -> Tensor: the {part} triangle of the last two "
                    "dimensions; the rest is zeroed.")
    d = op(name, inplace=True)(impl)
    d.def_backward(lambda ctx, g: getattr(g, name)(ctx.diagonal))
    return d


tril = _register_tri("tril", lambda xp, a, k: xp.tril(a, k))
triu = _register_tri("triu", lambda xp, a, k: xp.triu(a, k))


# ---------------------------------------------------------------------- cross product
@op(saves=("input", "other"), function=False, method=False, grad_name="LinalgCrossBackward0",
    out_exact=True)
def linalg_cross(xp, input: "Tensor", other: "Tensor", *, dim=-1):
    """linalg.cross(input, other, *, dim=-1) -> Tensor: the 3-vector cross product along
    ``dim``, broadcasting the other dimensions."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    msg = broadcast_error([input.shape, other.shape])
    if msg:
        raise RuntimeError(msg)
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {tname(input)} but found {tname(other)}")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    dt = input.dtype
    if dt == np.bool_:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if dt in _LOW:
        return xp.cross(input.astype(np.float32), other.astype(np.float32), axis=d).astype(dt)
    return xp.cross(input, other, axis=d)


@linalg_cross.def_backward
def _(ctx, g):
    a, b, dim = ctx.input, ctx.other, ctx.dim
    need_a, need_b = ctx.needs_input_grad
    return (linalg_cross(b.conj(), g, dim=dim) if need_a else None,
            linalg_cross(g, a.conj(), dim=dim) if need_b else None)


_CROSS_DIM_WARNING = ("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                      "The default value of dim will change to agree with that of linalg.cross "
                      "in a future release.")


def cross(input, other, dim: int | None = None, *, out=None):
    """cross(input, other, dim=None) -> Tensor: as linalg.cross, but ``dim=None`` means the first
    dimension of size 3 (deprecated in PyTorch, so it warns)."""
    if dim is None:
        warnings.warn(_CROSS_DIM_WARNING, UserWarning, stacklevel=2)
        dim = next((i for i, s in enumerate(input.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim, out=out)


tensor_method("cross")(cross)
