"""Cumulative reductions along one dimension: cumsum, cumprod, cummax, cummin, logcumsumexp.

Part of the reduction family (``reduction.py`` imports this module). The backward rules run
"from the end" (a reversed cumulative sum, ``reduction.reverse_scan``).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .. import return_types as RT
from ..autograd.grad_mode import state as _grad_mode
from .selection import where
from .creation import eye as _eye, ones as _ones
from .reduction import (_INT64, _acc_dtype, _along, _half_up, _no_complex, _tname, one_dim,
                        reverse_scan, select_backward)
from .bind import tensor_method
from .registry import call_inplace, op
from .writes import C_TYPE_NAME

SCAN = ("scan",)


def _scan_dim(a: np.ndarray, dim, name: str) -> int:
    return one_dim(dim, a.ndim, name)


# ---------------------------------------------------------------------- sums and products
def _cumulative(xp, a, dim, dtype, name, fn):
    d = _scan_dim(a, dim, name)
    acc = _acc_dtype(a, dtype)
    out_dt = acc or a.dtype
    if a.ndim == 0:
        return a.astype(out_dt)
    if out_dt == np.bool_ and a.size:  # dtype=bool or a bool out=: PyTorch has no bool kernel
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")
    if dtype is not None and a.dtype != out_dt:  # dtype= converts the elements first
        a = a.astype(out_dt)
    if acc in (np.float16, D.bfloat16.np):  # half results still accumulate in float32
        acc = np.float32
    return fn(_half_up(a), axis=d, dtype=acc).astype(out_dt, copy=False)


@op(tags=SCAN, out_dtype="dtype")
def cumsum(xp, input: "Tensor", dim, *, dtype=None):
    """cumsum(input, dim, *, dtype=None) -> Tensor (integers and bool accumulate in int64)"""
    return _cumulative(xp, input, dim, dtype, "cumsum", xp.cumsum)


@cumsum.def_backward
def _(ctx, g):
    if g.ndim == 0:
        return g
    d = one_dim(ctx.dim, g.ndim, "cumsum")
    return reverse_scan(lambda t, k: t.cumsum(k), g, d)


@op(tags=SCAN, saves=("input",), save_output=True, out_dtype="dtype")
def cumprod(xp, input: "Tensor", dim, *, dtype=None):
    """cumprod(input, dim, *, dtype=None) -> Tensor (integers and bool accumulate in int64)"""
    return _cumulative(xp, input, dim, dtype, "cumprod", xp.cumprod)


@cumprod.def_backward
def _(ctx, g):
    if g.ndim == 0:
        return g
    x, out = ctx.input, ctx.out
    if x.dtype is not g.dtype:
        x = x.to(g.dtype)
    d = one_dim(ctx.dim, g.ndim, "cumprod")
    if _grad_mode.enabled:  # create_graph: the rule itself will be differentiated
        return _cumprod_backward_polynomial(g, x, d)
    # grad_k = sum_{j>=k} g_j * prod_{i<=j, i!=k} x_i. Before the first zero of a slice that is
    # rcumsum(g * out)_k / x_k. At the first zero it is rcumsum(g * P)_k, with P the cumprod
    # of the slice where that zero is replaced by one. After the first zero every term holds
    # the zero, so the gradient is 0.
    zero = x == 0
    seen = zero.cumsum(d)
    before = seen == 0
    first = zero & (seen == 1)
    one, nil = x.new_ones(()), x.new_zeros(())
    x_before = where(before, x, one)
    p_first = (x + first).cumprod(d)
    if x.is_complex():
        out, x_before, p_first = out.conj(), x_before.conj(), p_first.conj()
    rcumsum = (lambda t: reverse_scan(lambda u, k: u.cumsum(k), t, d))
    return where(before, rcumsum(g * out) / x_before,
                 where(first, rcumsum(g * p_first), nil))


def _cumprod_backward_polynomial(g, x, d):
    """The same gradient as an explicit polynomial in x (O(n^2) per slice): row k of C is the
    cumprod of the slice with x_k replaced by one, so C[k, j] = prod_{i<=j, i!=k} x_i, and
    grad_k = sum_{j>=k} g_j C[k, j]. Unlike the division form, its derivative is exact at
    zeros."""
    n = x.shape[d]
    xm, gm = x.movedim(d, -1), g.movedim(d, -1)
    eye = _eye(n, dtype=x.dtype, device=x.device)
    rows = xm.unsqueeze(-2) * (1 - eye) + eye
    c = rows.cumprod(-1)
    if x.is_complex():
        c = c.conj()
    upper = _ones((n, n), dtype=D.bool_, device=x.device).triu()
    return (gm.unsqueeze(-2) * c * upper).sum(-1).movedim(-1, d)


def _scan_inplace(scan):
    def method(self, dim, *, dtype=None):
        # the scan runs in self's dtype (as with out=self): a bool tensor has no kernel, and
        # another dtype is refused
        if dtype is not None and dtype is not self.dtype:
            raise RuntimeError(f"Bad in-place call: input tensor dtype {C_TYPE_NAME[self.dtype]} "
                               f"and output tensor dtype {C_TYPE_NAME[dtype]} should match")
        return call_inplace(scan, self, (dim,), {"dtype": self.dtype})
    method.__name__ = scan.name + "_"
    return method


for _op in (cumsum, cumprod):  # Tensor.cumsum_ / cumprod_ (PyTorch has no torch.cumsum_)
    tensor_method(_op.name + "_")(_scan_inplace(_op))


# ---------------------------------------------------------------------- running extrema
def _running(xp, a, dim, name):
    _no_complex(a, f"{name}_cpu")
    d = _scan_dim(a, dim, name)
    if a.ndim == 0:
        return a.copy(), xp.zeros((), _INT64)
    ufunc = np.maximum if name == "cummax" else np.minimum  # numpy-only: max/min.accumulate
    vals = ufunc.accumulate(a, axis=d)  # NaN propagates, as in PyTorch
    # the running index moves to position j when x_j is the new extreme (ties included, so
    # the last of equal values wins) or x_j is NaN
    moved = a == vals
    if a.dtype.kind == "f":
        moved |= xp.isnan(a)
    # numpy-only: maximum.accumulate
    idx = np.maximum.accumulate(xp.where(moved, _along(xp, a.shape[d], d, a.ndim), 0), axis=d)
    return vals, idx


# PyTorch's message for an out= tensor of another dtype (registry option out_exact)
_RUNNING_OUT = "expected scalar_type {res} but found {out}"


def _running_backward(ctx, g, gi=None):
    x = ctx.input
    d = one_dim(ctx.dim, x.ndim, "")
    return select_backward(g, ctx.out[1], d, True, x.shape)


@op(tags=SCAN, upcast_half=True, save_output=True, returns=RT.cummax, out_exact=_RUNNING_OUT)
def cummax(xp, input: "Tensor", dim):
    """cummax(input, dim) -> (values, indices): running maximum and where it was found"""
    return _running(xp, input, dim, "cummax")


@op(tags=SCAN, upcast_half=True, save_output=True, returns=RT.cummin, out_exact=_RUNNING_OUT)
def cummin(xp, input: "Tensor", dim):
    """cummin(input, dim) -> (values, indices): running minimum and where it was found"""
    return _running(xp, input, dim, "cummin")


cummax.def_backward(_running_backward)
cummin.def_backward(_running_backward)


# ---------------------------------------------------------------------- logcumsumexp
@op(tags=SCAN, upcast_half=True, saves=("input",), save_output=True)
def logcumsumexp(xp, input: "Tensor", dim):
    """logcumsumexp(input, dim) -> Tensor: log(cumsum(exp(input))) computed stably"""
    if input.dtype.kind not in "fc":
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for '
                                  f"'{_tname(input)}'")
    d = _scan_dim(input, dim, "logcumsumexp")
    if input.ndim == 0 or input.size == 0:
        return input.copy()
    if input.dtype.kind == "f":
        return np.logaddexp.accumulate(input, axis=d)  # numpy-only: logaddexp.accumulate
    # complex: shift by the slice's largest finite real part before exponentiating
    m = xp.max(xp.where(xp.isfinite(input.real), input.real, -xp.inf), axis=d, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    return (xp.log(xp.cumsum(xp.exp(input - m), axis=d)) + m).astype(input.dtype)


@logcumsumexp.def_backward
def _(ctx, g):
    # grad_k = sum_{j>=k} g_j exp(x_k - out_j). For real inputs the positive and negative
    # parts of g are summed in log space (a reversed logcumsumexp), which cannot overflow.
    x, out = ctx.input, ctx.out
    if g.ndim == 0:
        return g
    d = one_dim(ctx.dim, g.ndim, "logcumsumexp")
    if x.is_complex():
        rc = reverse_scan(lambda u, k: u.cumsum(k), g * (-out).exp().conj(), d)
        return x.exp().conj() * rc
    lowest = g.new_full((), D.finfo(g.dtype).min)

    def part(sel):
        # log|g| where selected, else the lowest finite value (not -inf: its derivative would
        # be inf * 0); |g| + ~sel keeps the log finite where the value is discarded
        log_g = (g.abs() + sel.logical_not()).log() * sel + sel.logical_not() * lowest
        return (reverse_scan(lambda u, k: u.logcumsumexp(k), log_g - out, d) + x).exp()

    return part(g > 0) - part(g < 0)
