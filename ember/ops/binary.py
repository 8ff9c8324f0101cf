"""Binary and ternary pointwise ops: arithmetic, comparisons, logic, bitwise, where, clamp."""

from __future__ import annotations

import numpy as np

from .bind import tensor_method
from .registry import ALWAYS_BOOL, DEFAULT, INT_TO_FLOAT, alias_all, op

PW = ("pointwise",)


def _zeros(g):
    return g.new_zeros(g.shape)


# ---------------------------------------------------------------------- arithmetic
@op(tags=PW, promote=DEFAULT, inplace=True)
def add(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, alpha=1):
    if alpha != 1:
        _check_alpha("add", input, alpha)
        return xp.add(input, xp.multiply(other, alpha, dtype=_dt(input, other)))
    return xp.add(input, other)


@add.def_backward
def _(ctx, g):
    a = ctx.alpha
    return g, g if a == 1 else g * a


@op(tags=PW, promote=DEFAULT, inplace=True)
def sub(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, alpha=1):
    if _dt(input, other) == np.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if alpha != 1:
        _check_alpha("sub", input, alpha)
        return xp.subtract(input, xp.multiply(other, alpha, dtype=_dt(input, other)))
    return xp.subtract(input, other)


@sub.def_backward
def _(ctx, g):
    a = ctx.alpha
    return g, -g if a == 1 else -g * a


def _dt(a, b):
    return a.dtype if isinstance(a, np.ndarray) else b.dtype


def _check_alpha(name, x, alpha):
    dt = _dt(x, x) if isinstance(x, np.ndarray) else None
    if dt is not None and dt.kind in "iub" and isinstance(alpha, float):
        raise RuntimeError(f"For integral input tensors, argument alpha must not be a floating "
                           f"point number.")


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "other"))
def mul(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    if _dt(input, other) == np.bool_:
        return xp.logical_and(input, other)
    return xp.multiply(input, other)


@mul.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g * _conj(b), g * _conj(a)


def _is_t(x):
    return hasattr(x, "_data")


def _conj(x):
    """Complex conjugate of a tensor or a Python number (scalars may sit on either side)."""
    return x.conj() if _is_t(x) else (x.conjugate() if isinstance(x, complex) else x)


def _div_promote(kwargs):
    return INT_TO_FLOAT if kwargs.get("rounding_mode") is None else DEFAULT


def _int_zero_div(name, b):
    if isinstance(b, np.ndarray) and b.dtype.kind in "iub" and not b.all() or (
            not isinstance(b, np.ndarray) and b == 0 and isinstance(b, (int, np.integer))):
        raise RuntimeError("ZeroDivisionError")


@op(tags=PW, promote=_div_promote, inplace=True, saves=("input", "other"))
def div(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, rounding_mode=None):
    if rounding_mode is None:
        return xp.true_divide(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    dt = _dt(input, other)
    if dt.kind in "iub":
        _int_zero_div("div", other)
        if rounding_mode == "floor":
            return xp.floor_divide(input, other)
        q = xp.floor_divide(input, other)
        fix = (xp.remainder(input, other) != 0) & ((input < 0) != (other < 0))
        return q + fix.astype(q.dtype)
    q = xp.true_divide(input, other)
    return xp.trunc(q) if rounding_mode == "trunc" else xp.floor(q)


@div.def_backward
def _(ctx, g):
    if ctx.rounding_mode is not None:
        return _zeros(g), (_zeros(g) if _is_t(ctx.other) else None)
    return _true_div_backward(ctx, g)


def _true_div_backward(ctx, g):
    a, b = ctx.input, ctx.other
    if not _is_t(b):
        return g / b, None
    ga = g / b.conj()
    gb = -g * (a / (b * b)).conj() if _is_t(a) else -g * a / (b * b)
    return ga, gb


alias_all({"divide": "div", "multiply": "mul", "subtract": "sub"})


@op(tags=PW, promote=INT_TO_FLOAT, inplace=True, saves=("input", "other"))
def true_divide(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    return xp.true_divide(input, other)


true_divide.def_backward(_true_div_backward)


@op(tags=PW, promote=DEFAULT, inplace=True)
def floor_divide(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    if _dt(input, other).kind in "iub":
        _int_zero_div("floor_divide", other)
    return xp.floor_divide(input, other)


@floor_divide.def_backward
def _(ctx, g):
    return _zeros(g), _zeros(g)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "other"))
def remainder(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    if _dt(input, other).kind in "iub":
        _int_zero_div("remainder", other)
    return xp.remainder(input, other)


@remainder.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g, (-g * (a / b).floor() if _is_t(b) else None)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "other"))
def fmod(xp, input: "Tensor", other: "Scalar|Tensor"):
    if _dt(input, other).kind in "iub":
        _int_zero_div("fmod", other)
    return xp.fmod(input, other)


@fmod.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g, (-g * (a / b).trunc() if _is_t(b) else None)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "exponent"), save_output=True)
def pow(xp, input: "Scalar|Tensor", exponent: "Scalar|Tensor"):
    dt = _dt(input, exponent)
    if dt.kind in "iu":
        e = exponent
        if (isinstance(e, np.ndarray) and (e < 0).any()) or (not isinstance(e, np.ndarray)
                                                             and e < 0):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    if dt == np.bool_:
        return xp.logical_or(xp.logical_not(exponent), input)
    return xp.power(input, exponent)


@pow.def_backward
def _(ctx, g):
    a, e = ctx.input, ctx.exponent
    ga = gb = None
    if _is_t(a):
        if _is_t(e):
            ga = g * (e * a ** (e - 1)).conj()
        else:
            ga = _zeros(g) if e == 0 else g * (e * a ** (e - 1)).conj()
    if _is_t(e):
        out = ctx.out
        base = a.log() if _is_t(a) else _log_scalar(a, g)
        gb = g * (out * base).conj()
        if _is_t(a):
            gb = gb.masked_fill((a == 0) & (e >= 0), 0)
    return ga, gb


def _log_scalar(a, like):
    import math
    if isinstance(a, complex):
        import cmath
        return cmath.log(a)
    return math.log(a) if a > 0 else (float("-inf") if a == 0 else float("nan"))


@op(tags=PW, saves=("input", "exponent"))
def float_power(xp, input: "Scalar|Tensor", exponent: "Scalar|Tensor"):
    """Always computes (and returns) double precision."""
    cplx = any(isinstance(v, np.ndarray) and v.dtype.kind == "c" or isinstance(v, complex)
               for v in (input, exponent))
    dt = np.complex128 if cplx else np.float64
    return xp.power(xp.asarray(input, dtype=dt), xp.asarray(exponent, dtype=dt))


@float_power.def_backward
def _(ctx, g):
    a, e = ctx.input, ctx.exponent
    a64 = a.double() if _is_t(a) else a
    e64 = e.double() if _is_t(e) else e
    ga = g * e64 * a64 ** (e64 - 1) if _is_t(a) else None
    gb = None
    if _is_t(e):
        base = a64.log() if _is_t(a) else _log_scalar(a, g)
        gb = g * (a64 ** e64) * base
    return ga, gb


@op(tags=PW, promote=INT_TO_FLOAT, inplace=True, saves=("input", "other"))
def atan2(xp, input: "Tensor", other: "Tensor"):
    return xp.arctan2(input, other)


@atan2.def_backward
def _(ctx, g):
    y, x = ctx.input, ctx.other
    r = x * x + y * y
    return g * x / r, -g * y / r


alias_all({"arctan2": "atan2"})


def _tie_split(ctx, g, pick_input):
    a, b = ctx.input, ctx.other
    half = g / 2
    z = _zeros(g)
    ties = a == b
    return where(ties, half, where(pick_input, g, z)), where(ties, half, where(pick_input, z, g))


@op(tags=PW, promote=DEFAULT, saves=("input", "other"))
def maximum(xp, input: "Tensor", other: "Tensor"):
    _no_complex("maximum", input, other)
    return xp.maximum(input, other)


@maximum.def_backward
def _(ctx, g):
    return _tie_split(ctx, g, ctx.input > ctx.other)


@op(tags=PW, promote=DEFAULT, saves=("input", "other"))
def minimum(xp, input: "Tensor", other: "Tensor"):
    _no_complex("minimum", input, other)
    return xp.minimum(input, other)


@minimum.def_backward
def _(ctx, g):
    return _tie_split(ctx, g, ctx.input < ctx.other)


def _no_complex(name, *xs):
    for x in xs:
        if isinstance(x, np.ndarray) and x.dtype.kind == "c":
            raise RuntimeError(f"{name} not implemented for complex tensors.")


@op(tags=PW, promote=DEFAULT, saves=("input", "other"))
def fmax(xp, input: "Tensor", other: "Tensor"):
    return xp.fmax(input, other)


@fmax.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    take_a = (a >= b) | b.isnan()
    return g * take_a, g * ~take_a


@op(tags=PW, promote=DEFAULT, saves=("input", "other"))
def fmin(xp, input: "Tensor", other: "Tensor"):
    return xp.fmin(input, other)


@fmin.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    take_a = (a <= b) | b.isnan()
    return g * take_a, g * ~take_a


@op(tags=PW, promote=INT_TO_FLOAT, inplace=True, saves=("input", "other"), save_output=True)
def hypot(xp, input: "Tensor", other: "Tensor"):
    return xp.hypot(input, other)


@hypot.def_backward
def _(ctx, g):
    out = ctx.out
    return g * ctx.input / out, g * ctx.other / out


@op(tags=PW, promote=INT_TO_FLOAT, saves=("input", "other"))
def logaddexp(xp, input: "Tensor", other: "Tensor"):
    return xp.logaddexp(input, other)


@logaddexp.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g / (1 + (b - a).exp()), g / (1 + (a - b).exp())


@op(tags=PW, promote=INT_TO_FLOAT, saves=("input", "other"))
def logaddexp2(xp, input: "Tensor", other: "Tensor"):
    return xp.logaddexp2(input, other)


@logaddexp2.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g / (1 + (b - a).exp2()), g / (1 + (a - b).exp2())


@op(tags=PW, promote=INT_TO_FLOAT, inplace=True, saves=("input",), save_output=True)
def copysign(xp, input: "Tensor", other: "Scalar|Tensor"):
    return xp.copysign(input, other)


@copysign.def_backward
def _(ctx, g):
    a, out = ctx.input, ctx.out
    ratio = (out / a).masked_fill(a == 0, 0)
    return g * ratio, (_zeros(g) if _is_t(ctx.other) else None)


@op(tags=PW, promote=INT_TO_FLOAT, inplace=True, saves=("input", "other"))
def xlogy(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    x, y = input, other
    with np.errstate(all="ignore"):
        r = xp.multiply(x, xp.log(y))
    zero = (xp.asarray(x) == 0) & ~xp.isnan(y)
    return xp.where(zero, xp.zeros((), r.dtype), r)


@xlogy.def_backward
def _(ctx, g):
    x, y = ctx.input, ctx.other
    gx = gy = None
    if _is_t(x):
        ly = y.log() if _is_t(y) else _log_scalar(y, g)
        gx = (g * ly).masked_fill((x == 0) & ((y <= 0) if _is_t(y) else (y <= 0)), 0)
    if _is_t(y):
        gy = g * x / y
    return gx, gy


# ---------------------------------------------------------------------- comparisons and logic
def _compare(name, fn, promote=ALWAYS_BOOL, inplace=True):
    def impl(xp, input: "Tensor", other: "Scalar|Tensor"):
        return fn(xp, input, other)
    impl.__name__ = name
    return op(name, tags=PW, promote=promote, inplace=inplace, differentiable=False)(impl)


eq = _compare("eq", lambda xp, a, b: xp.equal(a, b))
ne = _compare("ne", lambda xp, a, b: xp.not_equal(a, b))
lt = _compare("lt", lambda xp, a, b: _ordered("lt", a, b) or xp.less(a, b))
le = _compare("le", lambda xp, a, b: _ordered("le", a, b) or xp.less_equal(a, b))
gt = _compare("gt", lambda xp, a, b: _ordered("gt", a, b) or xp.greater(a, b))
ge = _compare("ge", lambda xp, a, b: _ordered("ge", a, b) or xp.greater_equal(a, b))
alias_all({"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne"})
logical_and = _compare("logical_and", lambda xp, a, b: xp.logical_and(a, b))
logical_or = _compare("logical_or", lambda xp, a, b: xp.logical_or(a, b))
logical_xor = _compare("logical_xor", lambda xp, a, b: xp.logical_xor(a, b))


def _ordered(name, a, b):
    for x in (a, b):
        if isinstance(x, np.ndarray) and x.dtype.kind == "c":
            raise RuntimeError(f"\"{name}_cpu\" not implemented for 'ComplexFloat'")
    return None


def _bitwise(name, fn):
    def impl(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
        for x in (input, other):
            if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
                raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                   f"'{'Float' if x.dtype == np.float32 else 'Double'}'")
        return fn(xp, input, other)
    impl.__name__ = name
    return op(name, tags=PW, promote=DEFAULT, inplace=True, differentiable=False)(impl)


bitwise_and = _bitwise("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b))
bitwise_or = _bitwise("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b))
bitwise_xor = _bitwise("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b))
bitwise_left_shift = _bitwise("bitwise_left_shift", lambda xp, a, b: xp.left_shift(a, b))
bitwise_right_shift = _bitwise("bitwise_right_shift", lambda xp, a, b: xp.right_shift(a, b))


@op(tags=PW, promote=DEFAULT, differentiable=False)
def isclose(xp, input: "Tensor", other: "Tensor", rtol=1e-05, atol=1e-08, equal_nan=False):
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    return xp.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


@op(returns="python", differentiable=False, out=False)
def allclose(xp, input: "Tensor", other: "Tensor", rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(xp.allclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan))


@op(returns="python", differentiable=False, out=False)
def equal(xp, input: "Tensor", other: "Tensor"):
    return input.shape == other.shape and bool(xp.array_equal(input, other))


# ---------------------------------------------------------------------- selection
@op(tags=PW, promote=DEFAULT, promote_args=("input", "other"), saves=("condition",))
def where(xp, condition: "Tensor", input: "Scalar|Tensor" = None, other: "Scalar|Tensor" = None):
    if input is None and other is None:
        return tuple(xp.nonzero(condition))
    if condition.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {_torch_name(condition.dtype)}")
    return xp.where(condition, input, other)


def _torch_name(npdt):
    from .. import _dtype as D
    return D.TYPE_NAME[D.from_np(npdt)]


@where.def_backward
def _(ctx, g):
    c = ctx.condition
    z = _zeros(g)
    return None, where(c, g, z), where(c, z, g)


@tensor_method("where")
def _where_method(self, condition, other):
    """``x.where(condition, y)`` is ``where(condition, x, y)``."""
    return where(condition, self, other)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "min", "max"))
def clamp(xp, input: "Tensor", min: "Scalar|Tensor" = None, max: "Scalar|Tensor" = None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if input.dtype.kind == "c":
        raise RuntimeError("clamp is not supported for complex types")
    r = input
    if min is not None:
        r = xp.maximum(r, min)  # maximum/minimum propagate NaN, like PyTorch's clamp
    if max is not None:
        r = xp.minimum(r, max)
    if r is input:
        r = input.copy()
    return r


@clamp.def_backward
def _(ctx, g):
    x, lo, hi = ctx.input, ctx.min, ctx.max
    keep = None
    glo = ghi = None
    if lo is not None:
        keep = x >= lo
        if _is_t(lo):
            glo = g * (x < lo)
    if hi is not None:
        k2 = x <= hi
        keep = k2 if keep is None else keep & k2
        if _is_t(hi):
            ghi = g * (x > hi)
    return g * keep, glo, ghi


alias_all({"clip": "clamp"})


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "min"))
def clamp_min(xp, input: "Tensor", min: "Scalar|Tensor"):
    return xp.maximum(input, min)


@clamp_min.def_backward
def _(ctx, g):
    x, lo = ctx.input, ctx.min
    return g * (x >= lo), (g * (x < lo) if _is_t(lo) else None)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "max"))
def clamp_max(xp, input: "Tensor", max: "Scalar|Tensor"):
    return xp.minimum(input, max)


@clamp_max.def_backward
def _(ctx, g):
    x, hi = ctx.input, ctx.max
    return g * (x <= hi), (g * (x > hi) if _is_t(hi) else None)


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("input", "end", "weight"))
def lerp(xp, input: "Tensor", end: "Tensor", weight: "Scalar|Tensor"):
    for v in (input, end):
        if v.dtype.kind not in "fc":
            raise RuntimeError(f"\"lerp_kernel_scalar\" not implemented for "
                               f"'{_torch_name(v.dtype)}'")
    # PyTorch's two-sided formula keeps lerp exact at weight 0 and 1
    w = weight
    small = xp.abs(w) < 0.5
    return xp.where(small, input + w * (end - input), end - (end - input) * (1 - w))


@lerp.def_backward
def _(ctx, g):
    x, e, w = ctx.input, ctx.end, ctx.weight
    gw = g * (e - x) if _is_t(w) else None
    return g * (1 - w), g * w, gw


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("tensor1", "tensor2"))
def addcmul(xp, input: "Tensor", tensor1: "Tensor", tensor2: "Tensor", *, value=1):
    return input + value * (tensor1 * tensor2)


@addcmul.def_backward
def _(ctx, g):
    v = ctx.value
    return g, g * ctx.tensor2 * v, g * ctx.tensor1 * v


@op(tags=PW, promote=DEFAULT, inplace=True, saves=("tensor1", "tensor2"))
def addcdiv(xp, input: "Tensor", tensor1: "Tensor", tensor2: "Tensor", *, value=1):
    if tensor1.dtype.kind in "iub" and tensor2.dtype.kind in "iub":
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future release addcdiv will perform a true division of tensor1 and "
                           "tensor2. The historic addcdiv behavior can be implemented as "
                           "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                           "integer inputs and as (input + value * tensor1 / tensor2) for float "
                           "inputs. The future addcdiv behavior is just the latter "
                           "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    return input + value * (tensor1 / tensor2)


@addcdiv.def_backward
def _(ctx, g):
    v, t1, t2 = ctx.value, ctx.tensor1, ctx.tensor2
    return g, g * v / t2, -g * v * t1 / (t2 * t2)
