"""Normalisation kernels: batch, layer, group, instance and RMS norm.

The norms are single ops whose forward is a few in-place numpy passes over the data (no
autograd graph of primitives) and which save the statistics (mean, 1/std) for an explicit
backward. For a normalised x̂ = (x - mean) * rstd and g_x̂ the gradient reaching x̂, every norm
here shares

    dx = rstd * (g_x̂ - mean(g_x̂) - x̂ * mean(g_x̂ * x̂))

with the means over the normalised elements (RMS norm drops the mean(g_x̂) term). The backward
rules write it in ember ops (``_input_grad``), so second derivatives work; a plain first-order
backward of layer and batch norm (grad mode off, no gradient reaching the statistics) runs the
same formula as one fused numpy kernel instead (``_norm_backward``), which allocates a third
as many temporaries.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import state as _grad_state
from .arguments import takes_tensors
from .registry import op
from .._dispatch import STATE
from ..backends.cpu import BACKEND as CPU_BACKEND

PUBLIC = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _acc(x):
    """Half inputs are normalised in float32."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 else x


def _normalized(xp, x2, eps: float, center: bool = True):
    """Normalise the rows of a 2-D array: (x̂ in a fresh array, mean or None, rstd), each
    statistic shaped (rows, 1). One pass per step, no temporaries beyond x̂ itself."""
    n = x2.shape[1]
    if n == 0:
        nan = xp.full((x2.shape[0], 1), np.nan, x2.dtype)
        return x2.copy(), (nan if center else None), nan
    mean = x2.mean(axis=1, keepdims=True) if center else None
    xc = x2 - mean if center else x2.copy()
    var = xp.einsum("ij,ij->i", xc, xc)[:, None] / xc.dtype.type(n)
    rstd = 1 / xp.sqrt(var + xc.dtype.type(eps))
    xc *= rstd
    return xc, mean, rstd


def _input_grad(gh, xhat, rstd, dims, center=True, g_mean=None, g_rstd=None):
    """dx from the gradient gh reaching x̂ (see the module docstring), plus the gradients that
    reach the saved statistics (they are outputs too: double backward differentiates through
    them). mean = E[x] gives g_mean / n; rstd = (Var + eps)^-1/2 gives -g_rstd rstd^2 x̂ / n."""
    proj = xhat * (gh * xhat).mean(dims, keepdim=True)
    dx = rstd * (gh - gh.mean(dims, keepdim=True) - proj) if center else rstd * (gh - proj)
    g_mean, g_rstd = _live(g_mean), _live(g_rstd)
    if g_mean is None and g_rstd is None:
        return dx
    n = 1
    for d in dims:
        n *= xhat.shape[d]
    if g_mean is not None:
        dx = dx + g_mean / n
    if g_rstd is not None:
        dx = dx - g_rstd * rstd * rstd * xhat / n
    return dx


def _live(g):
    """``g`` unless it is absent or zeros (the engine fills unused output grads with zeros and
    marks them; skipping them saves whole-tensor passes in every first-order backward). A
    gradient a user passed is read only on the CPU: on a GPU, reading it would synchronise,
    and it counts as live. While the compiler traces, a present ``g`` counts as live: a traced
    value has no data to read."""
    if g is None or getattr(g, "_unused_grad", False):
        return None
    if STATE.tracing > 0 or g._traced or g._backend is not CPU_BACKEND:  # (meta tensors too)
        return g
    return g if g._data.any() else None


def _first_order(g_mean, g_rstd) -> bool:
    """Whether the fused kernel may run: no graph is being built over the backward and no
    gradient reaches the statistics."""
    return not _grad_state.enabled and _live(g_mean) is None and _live(g_rstd) is None


@op(differentiable=False, function=False, method=False, upcast_half=True)
def _norm_backward(xp, grad: "Tensor", input: "Tensor", mean: "Tensor?", rstd: "Tensor",
                   weight: "Tensor?", stat_dims, param_dims, needs):
    """First-order norm backward as one numpy kernel -> (grad_input, grad_weight, grad_bias);
    mean, rstd and weight arrive shaped to broadcast against input, or in batch norm's layout
    (statistics and parameters over every dim but 1) as vectors over dim 1."""
    k = len(stat_dims)
    if input.ndim > 2 and stat_dims == param_dims == (0,) + tuple(range(2, input.ndim)):
        chan = (1, -1) + (1,) * (input.ndim - 2)
        mean, rstd, weight = (a if a is None or a.ndim == input.ndim else a.reshape(chan)
                              for a in (mean, rstd, weight))
    if mean is not None and stat_dims == tuple(range(input.ndim - k, input.ndim)) and \
            param_dims == tuple(range(input.ndim - k)) and input.size:
        return _rows_backward(xp, grad, input, mean, rstd, weight, needs, k)
    xhat = input - mean if mean is not None else input.copy()
    xhat *= rstd
    gw = gb = gx = None
    if needs[1]:
        gw = grad * xhat
        gw = gw.sum(axis=param_dims) if param_dims else gw
    if needs[2]:
        gb = grad.sum(axis=param_dims) if param_dims else grad.copy()
    if needs[0]:
        gh = grad * weight if weight is not None else grad.copy()
        # sum / n is numpy's mean bit for bit, without its warning on an empty batch
        n = math.prod(input.shape[d] for d in stat_dims)
        c2 = (gh * xhat).sum(axis=stat_dims, keepdims=True) / n
        c1 = gh.sum(axis=stat_dims, keepdims=True) / n if mean is not None else None
        xhat *= c2
        gh -= xhat
        if c1 is not None:
            gh -= c1
        gh *= rstd
        gx = gh
    return gx, gw, gb


def _rows_backward(xp, grad, input, mean, rstd, weight, needs, k):
    """_norm_backward for layer norm's layout (statistics over the last ``k`` dims, parameters
    over the rest): the input is viewed as (rows, n) and the products are summed by einsum,
    without temporaries."""
    shape = input.shape
    pshape = shape[input.ndim - k:]
    rows = _numel(shape[:input.ndim - k])
    x2 = input.reshape(rows, -1)
    g2 = grad.reshape(rows, -1)
    r = rstd.reshape(rows, 1)
    xhat = x2 - mean.reshape(rows, 1)
    xhat *= r
    gx = gw = gb = None
    if needs[1]:
        gw = xp.einsum("ij,ij->j", g2, xhat).reshape(pshape)
    if needs[2]:
        gb = g2.sum(axis=0).reshape(pshape)
    if needs[0]:
        gh = g2 * weight.reshape(1, -1) if weight is not None else g2.copy()
        # dx = r gh - r mean(gh) - xhat r mean(gh xhat), the row factors formed first
        c2 = xp.einsum("ij,ij->i", gh, xhat)[:, None]
        c2 *= r / xhat.dtype.type(x2.shape[1])
        c1 = gh.mean(axis=1, keepdims=True)
        c1 *= r
        gh *= r
        xhat *= c2
        gh -= xhat
        gh -= c1
        gx = gh.reshape(shape)
    return gx, gw, gb


def _sum_over(t, dims):
    """``t`` summed over ``dims``; an empty ``dims`` leaves it as is (sum(()) means all dims)."""
    return t.sum(dims) if dims else t


# ---------------------------------------------------------------------- layer norm
def _shape_arg(name, normalized_shape):
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"{name}(): argument 'normalized_shape' (position 2) must be tuple of "
                        f"ints, not {type(normalized_shape).__name__}")


def _check_normalized(name, input, normalized_shape, weight, bias):
    ns = tuple(normalized_shape)
    if not ns:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != ns:
            raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but got "
                               f"{what} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(ns)}")
    k = len(ns)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != ns:
        star = "*, " if name == "layer_norm" else "*"
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[{star}{', '.join(map(str, ns))}], but got input of size"
                           f"{list(input.shape)}")
    return ns


@op(saves=("input", "weight"), save_output=True, method=False, upcast_half=True)
def native_layer_norm(xp, input: "Tensor", normalized_shape, weight: "Tensor?", bias: "Tensor?",
                      eps):
    """native_layer_norm(input, normalized_shape, weight, bias, eps) -> (output, mean, rstd):
    layer norm over the trailing ``normalized_shape`` dimensions, with its statistics."""
    ns = _check_normalized("layer_norm", input, normalized_shape, weight, bias)
    n = _numel(ns)
    lead = input.shape[:input.ndim - len(ns)]
    y, mean, rstd = _normalized(xp, input.reshape(-1, n), eps)
    if weight is not None:
        y *= weight.reshape(-1)
    if bias is not None:
        y += bias.reshape(-1)
    stat_shape = lead + (1,) * len(ns)
    return y.reshape(input.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


@native_layer_norm.def_backward
def _(ctx, g, g_mean=None, g_rstd=None):
    x, w = ctx.input, ctx.weight
    _, mean, rstd = ctx.out
    k = len(ctx.normalized_shape)
    dims = tuple(range(x.ndim - k, x.ndim))
    batch = tuple(range(x.ndim - k))
    need_x, need_w, need_b = ctx.needs_input_grad
    if _first_order(g_mean, g_rstd):
        return _norm_backward(g, x, mean, rstd, w, dims, batch, (need_x, need_w, need_b))
    xhat = (x - mean) * rstd
    gx = gw = gb = None
    if need_x:
        gx = _input_grad(g if w is None else g * w, xhat, rstd, dims, True, g_mean, g_rstd)
    if need_w:
        gw = _sum_over(g * xhat, batch)
    if need_b:
        gb = _sum_over(g, batch)
    return gx, gw, gb


# their rules take None for the statistics' gradients where nothing used them (the engine's
# zero fill, a whole-tensor allocation per norm, skipped)
native_layer_norm.optional_grads = frozenset((1, 2))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05) -> Tensor"""
    _shape_arg("layer_norm", normalized_shape)
    return native_layer_norm(input, tuple(normalized_shape), weight, bias, eps)[0]


# ---------------------------------------------------------------------- RMS norm
@op(saves=("input", "weight"), save_output=True, function=False, method=False,
    upcast_half=True)
def _fused_rms_norm(xp, input: "Tensor", normalized_shape, weight: "Tensor?", eps):
    """RMS norm with its statistic: (input * rstd * weight, rstd)."""
    ns = _check_normalized("rms_norm", input, normalized_shape, weight, None)
    y, _, rstd = _normalized(xp, input.reshape(-1, _numel(ns)), eps, center=False)
    if weight is not None:
        y *= weight.reshape(-1)
    lead = input.shape[:input.ndim - len(ns)]
    return y.reshape(input.shape), rstd.reshape(lead + (1,) * len(ns))


@_fused_rms_norm.def_backward
def _(ctx, g, g_rstd=None):
    x, w = ctx.input, ctx.weight
    rstd = ctx.out[1]
    k = len(ctx.normalized_shape)
    dims = tuple(range(x.ndim - k, x.ndim))
    xhat = x * rstd
    gx = gw = None
    if ctx.needs_input_grad[0]:
        gx = _input_grad(g if w is None else g * w, xhat, rstd, dims, False, None, g_rstd)
    if w is not None and ctx.needs_input_grad[1]:
        gw = _sum_over(g * xhat, tuple(range(x.ndim - k)))
    return gx, gw


_fused_rms_norm.optional_grads = frozenset((1,))


@takes_tensors("input", "weight?")
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    input / sqrt(mean(input^2) + eps) * weight; eps defaults to finfo(input.dtype).eps."""
    _shape_arg("rms_norm", normalized_shape)
    if eps is None:
        eps = D.finfo(input.dtype).eps
    return _fused_rms_norm(input, tuple(normalized_shape), weight, eps)[0]


# ---------------------------------------------------------------------- group norm
@op(saves=("input", "weight"), save_output=True, method=False, upcast_half=True)
def native_group_norm(xp, input: "Tensor", weight: "Tensor?", bias: "Tensor?", N, C, HxW, group,
                      eps):
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (output, mean, rstd):
    each of ``group`` channel groups normalised per sample; statistics are (N, group)."""
    y, mean, rstd = _normalized(xp, input.reshape(N * group, C // group * HxW), eps)
    y = y.reshape(N, C, HxW)
    if weight is not None:
        y *= weight.reshape(1, C, 1)
    if bias is not None:
        y += bias.reshape(1, C, 1)
    return y.reshape(input.shape), mean.reshape(N, group), rstd.reshape(N, group)


@native_group_norm.def_backward
def _(ctx, g, g_mean=None, g_rstd=None):
    x, w = ctx.input, ctx.weight
    _, mean, rstd = ctx.out
    n, c, grp = ctx.N, ctx.C, ctx.group
    need_x, need_w, need_b = ctx.needs_input_grad
    hw, d = ctx.HxW, c // grp * ctx.HxW
    r = rstd.reshape(n, grp, 1)
    xhat = ((x.reshape(n, grp, d) - mean.reshape(n, grp, 1)) * r).reshape(n, c, hw)
    g3 = g.reshape(n, c, hw)
    gx = gw = gb = None
    if need_x:
        gh = g3 if w is None else g3 * w.reshape(1, c, 1)
        gx = _input_grad(gh.reshape(n, grp, d), xhat.reshape(n, grp, d), r, (2,), True,
                         _unsqueezed(g_mean), _unsqueezed(g_rstd))
        gx = gx.reshape(x.shape)
    if need_w:
        gw = (g3 * xhat).sum((0, 2))
    if need_b:
        gb = g3.sum((0, 2))
    return gx, gw, gb


native_group_norm.optional_grads = frozenset((1, 2))


def _unsqueezed(g):
    return None if g is None else g.unsqueeze(-1)


@takes_tensors("input", "weight?", "bias?")
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    """group_norm(input, num_groups, weight=None, bias=None, eps=1e-05) -> Tensor"""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input.shape)} and num_groups="
                           f"{num_groups}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of "
                               f"channels in input, but got {what} of shape {list(t.shape)} and "
                               f"input of shape {list(input.shape)}")
    hxw = _numel(input.shape[2:])
    return native_group_norm(input, weight, bias, n, c, hxw, num_groups, eps)[0]


# ---------------------------------------------------------------------- batch norm
@op(saves=("input", "weight"), save_output=True, function=False, method=False)
def native_batch_norm(xp, input: "Tensor", weight: "Tensor?", bias: "Tensor?",
                      running_mean: "Tensor?", running_var: "Tensor?", training, momentum, eps):
    """Batch norm over every dim but 1 -> (output, mean, invstd). Training updates the running
    statistics in place (the variance with Bessel's correction); evaluation uses them."""
    c = input.shape[1] if input.ndim > 1 else 1
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and t.size != c:
            raise RuntimeError(f"{what} should contain {c} elements not {t.size}")
    x = _acc(input)
    axes = (0,) + tuple(range(2, x.ndim))
    count = x.size // max(c, 1)
    if training:
        if count == 0:
            mean = var = xp.full(c, np.nan, x.dtype)
        else:
            mean = x.mean(axis=axes)
            var = xp.square(x - mean.reshape(_chan_shape(c, x.ndim))).mean(axis=axes)
        if running_mean is not None and count:
            running_mean *= 1 - momentum
            running_mean += (momentum * mean).astype(running_mean.dtype)
        if running_var is not None and count:
            unbiased = var * (count / (count - 1)) if count > 1 else var * np.inf
            running_var *= 1 - momentum
            running_var += (momentum * unbiased).astype(running_var.dtype)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError(f"running_{'mean' if running_mean is None else 'var'} must be "
                               "defined in evaluation mode")
        mean = running_mean.astype(x.dtype)
        var = running_var.astype(x.dtype)
    invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype)
    scale = invstd if weight is None else invstd * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    shape = _chan_shape(c, x.ndim)
    y = x * scale.reshape(shape).astype(x.dtype) + shift.reshape(shape).astype(x.dtype)
    dt = input.dtype
    return y.astype(dt, copy=False), mean.astype(dt), invstd.astype(dt)


def _chan(g, shape):
    return None if g is None else g.reshape(shape)


def _chan_shape(c: int, ndim: int) -> tuple:
    return (1, c) + (1,) * (ndim - 2)


@native_batch_norm.def_backward
def _(ctx, g, g_mean=None, g_invstd=None):
    x, w = ctx.input, ctx.weight
    _, mean, invstd = ctx.out
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    c = x.shape[1] if x.ndim > 1 else 1
    shape = _chan_shape(c, x.ndim)
    axes = (0,) + tuple(range(2, x.ndim))
    if ctx.training and _first_order(g_mean, g_invstd):  # (vectors over dim 1 as they are)
        return _norm_backward(g, x, mean, invstd, w, axes, axes,
                              (need_x, need_w, need_b)) + (None, None)
    s = invstd.reshape(shape)
    xhat = (x - mean.reshape(shape)) * s
    gx = gw = gb = None
    if need_x:
        gh = g if w is None else g * w.reshape(shape)
        # in evaluation the statistics are constants, so the map x -> y is affine
        if ctx.training:
            gx = _input_grad(gh, xhat, s, axes, True, _chan(g_mean, shape), _chan(g_invstd, shape))
        else:
            gx = gh * s
    if need_w:
        gw = (g * xhat).sum(axes)
    if need_b:
        gb = g.sum(axes)
    return gx, gw, gb, None, None


native_batch_norm.optional_grads = frozenset((1, 2))


@takes_tensors("input", "weight?", "bias?", "running_mean?", "running_var?")
def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
    cudnn_enabled) -> Tensor (``torch.batch_norm``'s argument order)."""
    if input.ndim < 2:  # PyTorch counts no channels in a 1-D input
        for what, t in (("running_mean", running_mean), ("weight", weight)):
            if t is not None and t.numel():
                raise RuntimeError(f"{what} should contain 0 elements not {t.numel()}")
        if input.numel():
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but "
                             "got 1)")
        return input.clone()
    out = native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                            eps)[0]
    if training:
        for t in (running_mean, running_var):
            if t is not None:
                t._bump()
    return out


# ---------------------------------------------------------------------- instance norm
@takes_tensors("input", "weight?", "bias?", "running_mean?", "running_var?")
def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool = True) -> Tensor:
    """instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
    eps, cudnn_enabled) -> Tensor: each (sample, channel) normalised over its spatial dims.

    Runs batch norm on the input viewed as one sample of N*C channels; the running statistics
    become the batch mean of the per-instance updates.
    """
    n, c = input.shape[0], input.shape[1]

    def rep(t):
        return None if t is None else t.unsqueeze(0).expand(n, c).reshape(n * c)

    shaped = input.reshape((1, n * c) + tuple(input.shape[2:]))
    # per-instance copies of the running statistics, updated by the call below
    rm, rv = (None if t is None else rep(t.detach()).clone() for t in (running_mean, running_var))
    out = native_batch_norm(shaped, rep(weight), rep(bias), rm, rv, use_input_stats, momentum,
                            eps)[0]
    if use_input_stats:
        for src, dst in ((rm, running_mean), (rv, running_var)):
            if dst is not None:
                dst._data[...] = src._data.reshape(n, c).mean(axis=0).astype(dst._data.dtype)
                dst._bump()
    return out.reshape(input.shape)
