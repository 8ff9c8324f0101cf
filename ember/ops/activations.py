"""Activation kernels of ``nn.functional``: elementwise activations, softmax family, logsumexp.

Each elementwise activation is one numpy kernel plus a derivative written in ember ops. The
derivative's behaviour at kinks follows PyTorch's backward kernels (``relu'(0) = 0``,
``leaky_relu'(0) = negative_slope``, ``hardtanh'`` is 0 at both clip points, ...), including
which way a NaN input goes: each condition below is written the way PyTorch tests it, so a NaN
lands in the same branch.

The hot ones of a transformer's training step have fused kernels instead: GELU's forward and
its backward (one op, ``gelu_backward``, whose own backward is in ember ops) run as in-place
numpy passes over cache-sized blocks split over the CPU threads, float32 in float32
(``special.erf32``); softmax's and log_softmax's backward are one op each
(``_softmax_backward_data``, ``_log_softmax_backward_data``).
"""

from __future__ import annotations

import functools
import math
import threading
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import _wrap_dim
from ..backends import special
from ..backends.cpu import parallel_rows
from .binary import where
from .reduction import reduce_dims, unreduce
from .registry import DEFAULT, call_inplace, op

PW = ("pointwise",)
PUBLIC = ["selu", "selu_", "celu", "celu_", "rrelu", "rrelu_"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_SQRT1_2 = 1 / math.sqrt(2.0)
_TANH_K = math.sqrt(2.0 / math.pi)
_GELU_PDF = 1 / math.sqrt(2.0 * math.pi)


def type_name(npdt) -> str:
    """PyTorch's scalar-type name ("Float", "Long") of a numpy dtype, for error messages."""
    return D.TYPE_NAME[D.from_np(np.dtype(npdt))]


def is_float(npdt) -> bool:
    """Floating point, bfloat16 included (numpy files ml_dtypes' bfloat16 under kind "V")."""
    return D.from_np(np.dtype(npdt)).is_floating_point


def _activation(kernel_name: str | None = None, *, saves: str = "input", function=False,
                method=False, inplace=False):
    """Register one elementwise activation.

    ``kernel_name`` set: the op is floating-point only and integer inputs get PyTorch's
    NotImplementedError naming its CPU kernel. ``saves``: "input" or "out" (what the
    derivative reads). Half inputs are computed in float32 by the DEFAULT promotion.
    """

    def register(kernel):
        impl = kernel
        if kernel_name is not None:
            @functools.wraps(kernel)
            def impl(xp, input, *args, **kwargs):
                if input.dtype.kind not in "fc":
                    raise NotImplementedError(f'"{kernel_name}" not implemented for '
                                              f"'{type_name(input.dtype)}'")
                return kernel(xp, input, *args, **kwargs)
        return op(kernel.__name__, tags=PW, promote=DEFAULT, function=function, method=method,
                  inplace=inplace, saves=("input",) if saves == "input" else (),
                  save_output=saves == "out")(impl)

    return register


# ---------------------------------------------------------------------- piecewise linear
@_activation(saves="out", function=True, method=True, inplace=True)
def relu(xp, input: "Tensor"):
    """relu(input) -> Tensor: max(input, 0)."""
    return xp.maximum(input, input.dtype.type(0))


@relu.def_backward
def _(ctx, g):
    return where(ctx.out <= 0, 0, g)


@_activation()
def hardtanh(xp, input: "Tensor", min_val=-1.0, max_val=1.0):
    """hardtanh(input, min_val=-1.0, max_val=1.0) -> Tensor: clip to [min_val, max_val]."""
    return xp.minimum(xp.maximum(input, min_val), max_val)


@hardtanh.def_backward
def _(ctx, g):
    x = ctx.input
    return where((x <= ctx.min_val) | (x >= ctx.max_val), 0, g)


@_activation(function=True, inplace=True)
def threshold(xp, input: "Tensor", threshold, value):
    """threshold(input, threshold, value) -> Tensor: input where input > threshold, else value."""
    return xp.where(input <= threshold, value, input)


@threshold.def_backward
def _(ctx, g):
    return where(ctx.input <= ctx.threshold, 0, g)


@_activation("leaky_relu_cpu")
def leaky_relu(xp, input: "Tensor", negative_slope=0.01):
    """leaky_relu(input, negative_slope=0.01) -> Tensor."""
    return xp.where(input > 0, input, input * negative_slope)


@leaky_relu.def_backward
def _(ctx, g):
    return where(ctx.input > 0, g, g * ctx.negative_slope)


@_activation("hardshrink_cpu", function=True, method=True)
def hardshrink(xp, input: "Tensor", lambd=0.5):
    """hardshrink(input, lambd=0.5) -> Tensor: 0 on [-lambd, lambd], input elsewhere."""
    return xp.where((input >= -lambd) & (input <= lambd), input.dtype.type(0), input)


@hardshrink.def_backward
def _(ctx, g):
    x, lambd = ctx.input, ctx.lambd
    return where((x >= -lambd) & (x <= lambd), 0, g)


@_activation("softshrink_cpu")
def softshrink(xp, input: "Tensor", lambd=0.5):
    """softshrink(input, lambd=0.5) -> Tensor: shrink towards 0 by lambd."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, {_fmt_max(input.dtype)}] for input dtype "
                           f"{type_name(input.dtype)}, but found {lambd:g}")
    return input - xp.clip(input, -lambd, lambd)  # NaN stays NaN


softshrink.def_backward(hardshrink.backward)


def _fmt_max(npdt) -> str:
    return f"{float(np.finfo(np.float32 if npdt != np.float64 else npdt).max):g}"


@_activation("hardswish_cpu")
def hardswish(xp, input: "Tensor"):
    """hardswish(input) -> Tensor: input * relu6(input + 3) / 6."""
    return input * xp.minimum(xp.maximum(input + 3, 0), 6) / 6


@hardswish.def_backward
def _(ctx, g):
    x = ctx.input
    return where(x <= -3, 0, where(x < 3, g * (x / 3 + 0.5), g))


@_activation("hardsigmoid_cpu")
def hardsigmoid(xp, input: "Tensor"):
    """hardsigmoid(input) -> Tensor: relu6(input + 3) / 6."""
    return xp.minimum(xp.maximum(input + 3, 0), 6) / 6


@hardsigmoid.def_backward
def _(ctx, g):
    x = ctx.input
    return where((x > -3) & (x < 3), g / 6, 0)


# ---------------------------------------------------------------------- smooth
@_activation("elu_cpu")
def elu(xp, input: "Tensor", alpha=1.0, scale=1.0, input_scale=1.0):
    """elu(input, alpha=1.0, scale=1.0, input_scale=1.0) -> Tensor (selu and celu are elus)."""
    neg = xp.expm1(input * input_scale) * (alpha * scale)
    return xp.where(input <= 0, neg, input * scale)


@elu.def_backward
def _(ctx, g):
    x, a, s, si = ctx.input, ctx.alpha, ctx.scale, ctx.input_scale
    return where(x <= 0, g * (x * si).exp() * (a * s * si), g * s)


@_activation("GeluKernelImpl")
def gelu(xp, input: "Tensor", approximate="none"):
    """gelu(input, approximate='none') -> Tensor; approximate='tanh' uses the tanh formula."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _flat_kernel(_gelu_rows, approximate, input)


_BLOCK = 1 << 15  # elements per pass of the fused GELU kernels: temporaries stay in L2
_SCRATCH = threading.local()


def _scratch(n: int, dtype, k: int) -> list:
    """``k`` temporaries of ``n`` elements for this thread, reused across calls (fresh arrays
    cost page faults)."""
    key = (np.dtype(dtype).str, n, k)
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None or bufs[0] != key:
        bufs = _SCRATCH.bufs = (key, [np.empty(n, dtype) for _ in range(k)])
    return bufs[1]


def _flat_kernel(kernel, approximate, *arrays):
    """``kernel(approximate, out, *arrays, scratch)`` over the flattened arrays (same shape) in
    cache-sized blocks, the blocks split over the CPU threads; returns the result shaped like
    the arrays."""
    flat = [np.ascontiguousarray(a).reshape(-1, 1) for a in arrays]
    out = np.empty(flat[0].shape, arrays[0].dtype)

    def rows(o, *a):
        o = o.reshape(-1)
        a = [v.reshape(-1) for v in a]
        tmp = _scratch(min(o.size, _BLOCK), o.dtype, 2)
        with np.errstate(all="ignore"):  # pool threads do not share ember's numpy settings
            for i in range(0, o.size, _BLOCK):
                j = min(i + _BLOCK, o.size)
                kernel(approximate, o[i:j], *(v[i:j] for v in a), [b[:j - i] for b in tmp])
    parallel_rows(rows, out, *flat)
    return out.reshape(arrays[0].shape)


def _erf_inplace(r):
    """r = erf(r) (float32 stays in float32: special.erf32)."""
    if r.dtype == np.float32:
        special.erf32_serial(r, r)
    else:
        r[...] = special.erf(r)


def _tanh_inner(x, r):
    """r = sqrt(2/pi) (x + 0.044715 x^3)."""
    np.multiply(x, x, out=r)
    r *= x
    r *= 0.044715
    r += x
    r *= _TANH_K


def _gelu_rows(approximate, r, x, tmp):
    # 0.5 x (1 + erf(x / sqrt 2)) or 0.5 x (1 + tanh(inner)), in place in r
    if approximate == "none":
        np.multiply(x, x.dtype.type(_SQRT1_2), out=r)
        _erf_inplace(r)
    else:
        _tanh_inner(x, r)
        np.tanh(r, out=r)
    r += 1
    r *= 0.5  # before x: 2 x overflows where x / 2 (PyTorch's order) does not
    r *= x


def _gelu_backward_rows(approximate, t, grad, x, tmp):
    d, u = tmp
    if approximate == "tanh":
        # gelu' = (1 + t) / 2 + x / 2 (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
        _tanh_inner(x, t)
        np.tanh(t, out=t)
        np.multiply(x, x, out=d)
        d *= 3 * 0.044715
        d += 1
        d *= _TANH_K * 0.5
        d *= x
        np.multiply(t, t, out=u)
        np.subtract(1, u, out=u)
        d *= u
    else:
        # gelu' = cdf + x pdf = (1 + erf(x / sqrt 2)) / 2 + x exp(-x^2 / 2) / sqrt(2 pi)
        np.multiply(x, x.dtype.type(_SQRT1_2), out=t)
        _erf_inplace(t)
        np.multiply(x, x, out=d)
        d *= -0.5
        np.exp(d, out=d)
        d *= _GELU_PDF
        d *= x
    t += 1
    t *= 0.5
    t += d
    t *= grad


@op(tags=PW, promote=DEFAULT, saves=("grad", "input"), function=False, method=False)
def gelu_backward(xp, grad: "Tensor", input: "Tensor", approximate="none"):
    """gelu_backward(grad, input, approximate='none') -> Tensor: grad * gelu'(input), one fused
    kernel (a few in-place passes over two temporaries)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    if grad.shape != input.shape:
        grad, input = np.broadcast_arrays(grad, input)
    return _flat_kernel(_gelu_backward_rows, approximate, grad, input)


@gelu.def_backward
def _(ctx, g):
    return gelu_backward(g, ctx.input, ctx.approximate)


@gelu_backward.def_backward
def _(ctx, gg):
    # d/dgrad = gelu'(x); d/dx = grad gelu''(x), written in ember ops (differentiable again)
    g, x = ctx.grad, ctx.input
    gx = None
    if ctx.needs_input_grad[1]:
        if ctx.approximate == "tanh":
            inner = (x + x * x * x * 0.044715) * _TANH_K
            t = inner.tanh()
            du = (x * x * (3 * 0.044715) + 1) * _TANH_K
            sech2 = 1 - t * t
            # gelu'' = (1 - t^2) (u' + x / 2 (u'' - 2 t u'^2)), u'' = 6 c k x
            second = sech2 * (du + x * 0.5 * (x * (6 * 0.044715 * _TANH_K) - 2 * t * du * du))
        else:
            # gelu'' = pdf(x) (2 - x^2)
            second = (x * x * -0.5).exp() * _GELU_PDF * (2 - x * x)
        gx = gg * g * second
    gg_out = gelu_backward(gg, x, ctx.approximate) if ctx.needs_input_grad[0] else None
    return gg_out, gx


@_activation("silu_cpu")
def silu(xp, input: "Tensor"):
    """silu(input) -> Tensor: input * sigmoid(input)."""
    return input * special.sigmoid(input)


@silu.def_backward
def _(ctx, g):
    x = ctx.input
    s = x.sigmoid()
    return g * s * (x * (1 - s) + 1)


def _softplus_np(xp, x):
    # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


@_activation("mish_cpu")
def mish(xp, input: "Tensor"):
    """mish(input) -> Tensor: input * tanh(softplus(input))."""
    return input * xp.tanh(_softplus_np(xp, input))


@mish.def_backward
def _(ctx, g):
    x = ctx.input
    t = softplus(x).tanh()
    return g * (t + x * x.sigmoid() * (1 - t * t))


@_activation("softplus_cpu")
def softplus(xp, input: "Tensor", beta=1.0, threshold=20.0):
    """softplus(input, beta=1.0, threshold=20.0) -> Tensor: log(1 + exp(beta x)) / beta, linear
    where beta x > threshold."""
    bx = input * beta
    return xp.where(bx > threshold, input, _softplus_np(xp, bx) / beta)


@softplus.def_backward
def _(ctx, g):
    x = ctx.input
    bx = x * ctx.beta
    return where(bx > ctx.threshold, g, g * bx.sigmoid())


@_activation("log_sigmoid_forward")
def logsigmoid(xp, input: "Tensor"):
    """logsigmoid(input) -> Tensor: log(sigmoid(input)), computed without overflow."""
    return xp.minimum(input, 0) - xp.log1p(xp.exp(-xp.abs(input)))


@logsigmoid.def_backward
def _(ctx, g):
    return g * (-ctx.input).sigmoid()


# ---------------------------------------------------------------------- with parameters
@op(promote=DEFAULT, saves=("input", "weight"))
def prelu(xp, input: "Tensor", weight: "Tensor"):
    """prelu(input, weight) -> Tensor: input where > 0, else weight * input; weight is one value
    or one per channel (dim 1)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.size != 1 and weight.size != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {weight.size} and channel size = {channels}.")
    return xp.where(input > 0, input, input * _channel_view(weight, input.ndim))


def _channel_view(weight, ndim: int):
    """``weight`` shaped to broadcast along dim 1 of an ``ndim``-d input."""
    if weight.size == 1 or ndim < 2:
        return weight.reshape(())
    return weight.reshape((1, -1) + (1,) * (ndim - 2))


@prelu.def_backward
def _(ctx, g):
    x, w = ctx.input, ctx.weight
    gx = gw = None
    pos = x > 0
    if ctx.needs_input_grad[0]:
        gx = where(pos, g, g * _channel_view(w, x.ndim))
    if ctx.needs_input_grad[1]:
        gw = where(pos, 0, g * x)
        if w.numel() == 1 or x.ndim < 2:
            gw = gw.sum().reshape(w.shape)
        else:
            gw = gw.sum([d for d in range(x.ndim) if d != 1])
    return gx, gw


def selu(input):
    """selu(input) -> Tensor: scale * elu(input, alpha) with the self-normalising constants."""
    return elu(input, SELU_ALPHA, SELU_SCALE)


def selu_(input):
    """In-place selu."""
    return call_inplace(elu, input, (SELU_ALPHA, SELU_SCALE), {})


def celu(input, alpha: float = 1.0):
    """celu(input, alpha=1.0) -> Tensor: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return elu(input, alpha, 1.0, 1.0 / alpha)


def celu_(input, alpha: float = 1.0):
    """In-place celu."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return call_inplace(elu, input, (alpha, 1.0, 1.0 / alpha), {})


def _rrelu_noise(input, lower, upper, training):
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return None
    from .nn_ops import uniform_like
    # each negative element gets its own slope drawn from U(lower, upper); positives keep 1
    return where(input >= 0, 1.0, uniform_like(input, lower, upper))


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          generator=None):
    """rrelu(input, lower=1/8, upper=1/3, training=False) -> Tensor: leaky relu whose negative
    slope is random in U(lower, upper) when training and (lower + upper) / 2 otherwise."""
    noise = _rrelu_noise(input, lower, upper, training)
    if noise is None:
        return leaky_relu(input, (lower + upper) / 2)
    return input * noise


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           generator=None):
    """In-place rrelu."""
    noise = _rrelu_noise(input, lower, upper, training)
    if noise is None:
        return call_inplace(leaky_relu, input, ((lower + upper) / 2,), {})
    return input.mul_(noise)


# ---------------------------------------------------------------------- softmax family
def _float_input(x, dtype, what: str):
    """The array to compute on (float32 for half inputs) and the result's numpy dtype."""
    if dtype is not None:
        x = x.astype(dtype.np, copy=False)
    elif not is_float(x.dtype):
        raise NotImplementedError(f'"{what}" not implemented for \'{type_name(x.dtype)}\'')
    out_dt = x.dtype
    if out_dt.itemsize == 2:
        x = x.astype(np.float32)
    return x, out_dt


def _softmax_kernel(xp, x, dim, dtype, kind):
    axis = _wrap_dim(dim, x.ndim)
    x, out_dt = _float_input(x, dtype, "softmax_lastdim_kernel_impl" if kind != "log"
                             else "log_softmax_lastdim_kernel_impl")
    shape = x.shape
    if x.ndim == 0:
        x = x.reshape(1)
    if x.size == 0:
        return x.reshape(shape).astype(out_dt)
    if axis == x.ndim - 1 and x.dtype in (np.float32, np.float64) and x.ndim:
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty(rows.shape, x.dtype)
        parallel_rows(lambda a, o: _softmax_rows(a, o, kind), rows, out)
        return out.reshape(shape).astype(out_dt, copy=False)
    m = x.max(axis=axis, keepdims=True)
    z = x - m  # a row whose max is +-inf gives NaN here, as in PyTorch
    e = xp.exp(z)
    s = e.sum(axis=axis, keepdims=True)
    if kind == "log":
        r = z - xp.log(s)
    else:
        r = e / s
        if kind == "safe":  # rows with every entry -inf give zeros instead of NaN
            r = xp.where(m == -np.inf, 0, r)
    return r.reshape(shape).astype(out_dt, copy=False)


def _softmax_rows(x, out, kind):
    """Softmax over the last dim of a 2-D block, in place in ``out`` (one temporary at most)."""
    m = x.max(axis=1, keepdims=True)
    np.subtract(x, m, out=out)  # a row whose max is +-inf gives NaN here, as in PyTorch
    if kind == "log":
        out -= np.log(np.exp(out).sum(axis=1, keepdims=True))
        return
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)
    if kind == "safe":  # rows with every entry -inf give zeros instead of NaN
        out[(m == -np.inf)[:, 0]] = 0


@op(save_output=True)
def softmax(xp, input: "Tensor", dim, dtype=None):
    """softmax(input, dim, dtype=None) -> Tensor: exp(x) / sum(exp(x)) along ``dim``, computed
    after subtracting the maximum (stable for large inputs)."""
    return _softmax_kernel(xp, input, dim, dtype, "plain")


@op(save_output=True, method=False)
def _safe_softmax(xp, input: "Tensor", dim, dtype=None):
    """softmax whose fully masked rows (all -inf) are zeros rather than NaN (attention)."""
    return _softmax_kernel(xp, input, dim, dtype, "safe")


@op(save_output=True)
def log_softmax(xp, input: "Tensor", dim, dtype=None):
    """log_softmax(input, dim, dtype=None) -> Tensor: x - logsumexp(x) along ``dim``."""
    return _softmax_kernel(xp, input, dim, dtype, "log")


def _softmax_backward(ctx, g):
    return _softmax_backward_data(g, ctx.out, ctx.dim)


softmax.def_backward(_softmax_backward)
_safe_softmax.def_backward(_softmax_backward)


@log_softmax.def_backward
def _(ctx, g):
    return _log_softmax_backward_data(g, ctx.out, ctx.dim)


def _rows_view(g, y, dim):
    """(g, y, axis) with 0-d arrays seen as 1-d (a 0-d softmax is over one element)."""
    if y.ndim == 0:
        return g.reshape(1), y.reshape(1), 0
    return g, y, _wrap_dim(dim, y.ndim)


@op(saves=("grad_output", "output"), function=False, method=False, upcast_half=True)
def _softmax_backward_data(xp, grad_output: "Tensor", output: "Tensor", dim):
    """The input gradient of softmax from its output y: y * (g - sum(g * y)) along ``dim``, as
    one kernel (three passes and a reduction)."""
    g, y, axis = _rows_view(grad_output, output, dim)
    r = g * y
    s = r.sum(axis=axis, keepdims=True)
    np.subtract(g, s, out=r)
    r *= y
    return r.reshape(output.shape)


@_softmax_backward_data.def_backward
def _(ctx, gg):
    # r_j = y_j (g_j - s), s = sum_k g_k y_k:  dr/dg . gg = y (gg - sum(gg y)),
    # dr/dy . gg = gg (g - s) - g sum(gg y)
    g, y, dim = ctx.grad_output, ctx.output, ctx.dim
    ggy = (gg * y).sum(dim, keepdim=True)
    dg = y * (gg - ggy) if ctx.needs_input_grad[0] else None
    dy = None
    if ctx.needs_input_grad[1]:
        dy = gg * (g - (g * y).sum(dim, keepdim=True)) - g * ggy
    return dg, dy


@op(saves=("grad_output", "output"), function=False, method=False, upcast_half=True)
def _log_softmax_backward_data(xp, grad_output: "Tensor", output: "Tensor", dim):
    """The input gradient of log_softmax from its output: g - exp(y) * sum(g) along ``dim``."""
    g, y, axis = _rows_view(grad_output, output, dim)
    r = np.exp(y)
    r *= g.sum(axis=axis, keepdims=True)
    np.subtract(g, r, out=r)
    return r.reshape(output.shape)


@_log_softmax_backward_data.def_backward
def _(ctx, gg):
    # r_j = g_j - e_j S, e = exp(y), S = sum_k g_k:  dr/dg . gg = gg - sum(gg e),
    # dr/dy . gg = -gg e S
    g, y, dim = ctx.grad_output, ctx.output, ctx.dim
    e = y.exp()
    dg = gg - (gg * e).sum(dim, keepdim=True) if ctx.needs_input_grad[0] else None
    dy = -gg * e * g.sum(dim, keepdim=True) if ctx.needs_input_grad[1] else None
    return dg, dy


def legacy_softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    """The dim PyTorch picks when softmax-like functions are called without one (deprecated)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  "include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


@op(tags=("reduction",), saves=("input",), save_output=True)
def logsumexp(xp, input: "Tensor", dim, keepdim=False):
    """logsumexp(input, dim, keepdim=False) -> Tensor: log(sum(exp(input))) over ``dim``,
    stable for large inputs and for rows of +-inf."""
    x = input
    out_dt = x.dtype if is_float(x.dtype) else D.get_default_dtype().np
    x = x.astype(np.float32 if out_dt.itemsize == 2 else out_dt, copy=False)
    if x.ndim == 0:
        _wrap_dim(dim if isinstance(dim, int) else 0, 0)
        return x.astype(out_dt)
    axes = reduce_dims(dim, x.ndim)
    if x.size == 0:
        shape = [1 if i in axes else n for i, n in enumerate(x.shape)]
        r = xp.full(shape, -np.inf, x.dtype)
    else:
        m = x.max(axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)  # rows of +-inf: exp/log below give +-inf exactly
        r = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
    if not keepdim:
        r = r.squeeze(axis=axes)
    return r.astype(out_dt, copy=False)


@logsumexp.def_backward
def _(ctx, g):
    x = ctx.input
    if x.ndim == 0:
        return g
    return unreduce(g, x.shape, ctx.dim, ctx.keepdim) * (
        x - unreduce(ctx.out, x.shape, ctx.dim, ctx.keepdim)).exp()
