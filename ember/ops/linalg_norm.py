"""Norms: linalg.vector_norm (the one op), and linalg.matrix_norm, linalg.norm and
linalg.vecdot composed from it, the singular values and sums.

A matrix 1-norm is a max (an inf vector norm) over column sums (1 vector norms), so the nested
vector norms give its value and, through vector_norm's backward, its gradient (ties in a max
share the gradient equally, as PyTorch's amax does).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dtype as D
from .._tensor import _wrap_dim
from .linalg import _LOW, is_inexact, tname
from .linalg_decomp import linalg_svdvals
from .reduction import _norm, reduce_dims, unreduce
from .arguments import takes_tensors
from .bind import tensor_method
from .registry import op

PUBLIC = ["norm"]  # torch.norm, over reduction.py's "norm" op (the rest: ember.linalg)
INF = math.inf


def _vector_norm_dtypes(x: np.ndarray, dtype) -> tuple[np.dtype, np.dtype]:
    """(dtype to compute in, dtype of the result) with PyTorch's checks on ``dtype=``."""
    xd = D.from_np(x.dtype)
    if dtype is None:
        cd = xd
    else:
        if xd.is_complex and not dtype.is_complex:
            raise RuntimeError(f"linalg.vector_norm: dtype should be complex for complex inputs, "
                               f"but got {D.TYPE_NAME[dtype]}")
        if not xd.is_complex and dtype.is_complex:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point for real "
                               f"inputs, but got {D.TYPE_NAME[dtype]}")
        if D.promote_types(xd, dtype) is not dtype:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({tname(x)}) should "
                               f"be convertible without narrowing to the specified dtype "
                               f"({D.TYPE_NAME[dtype]})")
        cd = dtype
    out = cd.to_real()
    compute = np.dtype(np.float32) if out.np in _LOW else out.np
    return compute, out.np


@op(saves=("x",), save_output=True, function=False, method=False,
    grad_name="LinalgVectorNormBackward0")
def linalg_vector_norm(xp, x: "Tensor", ord=2, dim=None, keepdim=False, *, dtype=None):
    """linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor: the
    ord-norm of the entries over ``dim`` (all of them by default)."""
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    if not is_inexact(x):
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {tname(x)}")
    compute, out = _vector_norm_dtypes(x, dtype)
    axes = reduce_dims(dim, x.ndim)
    if (ord < 0 or ord == INF) and any(x.shape[a] == 0 for a in axes):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty "
                           "tensor because the operation does not have an identity")
    kw = dict(axis=axes, keepdims=keepdim)
    if ord == 2 and x.dtype.kind == "f":  # x * x is |x| * |x| exactly: no pass for abs
        a = x.astype(compute, copy=False)
        r = xp.sqrt(xp.sum(a * a, **kw))
        return xp.asarray(r).astype(out)
    a = xp.abs(x).astype(compute, copy=False)
    if ord == 2:
        r = xp.sqrt(xp.sum(a * a, **kw))
    elif ord == INF:
        r = xp.max(a, **kw)
    elif ord == -INF:
        r = xp.min(a, **kw)
    elif ord == 0:
        r = xp.sum(a != 0, **kw)
    elif ord == 1:
        r = xp.sum(a, **kw)
    else:
        r = xp.sum(a ** ord, **kw) ** (1.0 / ord)
    return xp.asarray(r).astype(out)


@linalg_vector_norm.def_backward
def _(ctx, g):
    x, ord, dim, keepdim = ctx.x, ctx.ord, ctx.dim, ctx.keepdim
    if ctx.dtype is not None:
        x = x.to(ctx.dtype)
    if ord == 0:
        return x.new_zeros(x.shape)
    gk = unreduce(g, x.shape, dim, keepdim)
    if ord == 1:
        return gk * x.sgn()
    nk = unreduce(ctx.out, x.shape, dim, keepdim)
    safe_nk = nk + (nk == 0)  # a zero norm has zero gradient; never divide by it
    if ord == 2:
        return gk * x / safe_nk
    if ord in (INF, -INF):  # ties at the max (min) share the gradient equally
        hit = (x.abs() == nk).to(g.dtype)
        count = hit.sum(dim=reduce_dims(dim, x.ndim), keepdim=True)
        return gk * x.sgn() * hit / count
    ax = x.abs()
    ax = ax + (ax == 0)  # x = 0 contributes 0 (sgn) even where |x|^(p-1) is infinite
    return gk * x.sgn() * ax ** (ord - 1) / safe_nk ** (ord - 1)


@takes_tensors("A", name="linalg_matrix_norm")
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None):
    """linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor:
    'fro', 'nuc', inf, -inf, 1, -1, 2 or -2 norm of the matrices over ``dim``."""
    from .linalg import write_out_as
    valid = ord in ("fro", "nuc") if isinstance(ord, str) else ord in (INF, -INF, 1, -1, 2, -2)
    if not valid:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if A.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as "
                           f"input. Got {tname(A)}")
    dim = tuple(dim)
    d0, d1 = (_wrap_dim(d, A.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    if ord == "fro":
        r = linalg_vector_norm(A, 2, (d0, d1), keepdim, dtype=dtype)
    elif ord in ("nuc", 2, -2):
        if A.dtype in (D.float16, D.bfloat16):
            raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got "
                               f"{tname(A)}")
        x = A.to(dtype) if dtype is not None else A
        s = linalg_svdvals(x.movedim((d0, d1), (-2, -1)))
        r = s.sum(-1) if ord == "nuc" else linalg_vector_norm(s, INF if ord == 2 else -INF, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
    else:  # 1: max over columns of column sums; inf: max over rows of row sums
        inner, outer = (d0, d1) if abs(ord) == 1 else (d1, d0)
        s = linalg_vector_norm(A, 1, inner, True, dtype=dtype)
        r = linalg_vector_norm(s, INF if ord > 0 else -INF, outer, True)
        if not keepdim:
            r = r.squeeze((d0, d1))
    return write_out_as("linalg.matrix_norm", out, r)


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor."""
    return linalg_vector_norm(x, ord, dim, keepdim, dtype=dtype, out=out)


def linalg_norm(A, ord=None, dim=None, keepdim: bool = False, *, out=None, dtype=None):
    """linalg.norm(A, ord=None, dim=None, keepdim=False, *, dtype=None) -> Tensor: a vector
    norm over one dim, a matrix norm over two; without dim, of a 1-D or 2-D input (or the
    2-norm of all entries when ord is None too)."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype,
                               out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got "
                           f"{list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 2 or isinstance(ord, str):
        if A.ndim > 2:
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                               f"be 1D or 2D. Got {A.ndim}D.")
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or "
                       f"2D. Got {A.ndim}D.")


@takes_tensors("x", "y", name="linalg_vecdot")
def vecdot(x, y, *, dim: int = -1, out=None):
    """linalg.vecdot(x, y, *, dim=-1) -> Tensor: sum(conj(x) * y) over ``dim``, broadcasting."""
    from .linalg import write_out_as
    return write_out_as("linalg.vecdot", out, (x.conj() * y).sum(dim))


# ---------------------------------------------------------------------- torch.norm
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """norm(input, p='fro', dim=None, keepdim=False, out=None, dtype=None) -> Tensor

    The vector p-norm over ``dim`` (every dimension when None); ``p`` is a number, ``inf``,
    ``-inf`` or ``'fro'`` (the 2-norm). ``'nuc'`` is the nuclear matrix norm, computed by
    ``ember.linalg.matrix_norm``.
    """
    if isinstance(p, str) and p == "nuc":
        return matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim, keepdim=keepdim,
                           dtype=dtype, out=out)
    return _norm(input, p, dim, keepdim, dtype=dtype, out=out)


tensor_method("norm")(norm)
