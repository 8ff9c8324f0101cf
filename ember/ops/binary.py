"""Binary pointwise ops: arithmetic, comparisons, logic, bitwise (powers are in powers.py;
where, clamp, lerp, addcmul and addcdiv in selection.py).

Registered with ``binop`` (pointwise.promoted_op): the impl receives its operands promoted to
one compute type, and a meta function comes with the op. Where an op's math is a composition
of the scalar primitives (codegen/prims.py) it is written as a definition over them,
``defn(ops, ...)``, that numpy eager interprets (backends/xp_ops.interpret); the rest are
numpy's algorithms (integer division, floor division and remainder, logaddexp, fmax/fmin,
logical ops, shifts) or the CPU backend's kernels.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from ..backends import xp_ops
from ..backends.xp_ops import COMPILERS, interpret
from .pointwise import kind, promoted_op as binop, to_compute, type_name
from ..backends.base import ARRAY_TYPES
from .pointwise_defn import PointwiseDefn, fixed
from .registry import ALWAYS_BOOL, DEFAULT, INT_TO_FLOAT, alias_all, op

PW = ("pointwise",)


def _zeros(g):
    return g.new_zeros(g.shape)


def _is_t(x):
    """A tensor argument (or its shape/dtype stand-in in a backward), not a Python number."""
    return hasattr(x, "shape")


def _conj(x):
    """Complex conjugate of a tensor or a Python number (scalars may sit on either side)."""
    if _is_t(x):
        return x.conj() if x.is_complex() else x
    return x.conjugate() if isinstance(x, complex) else x


def _no_grad_for(name):
    def backward(ctx, g):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return backward


def _int_zero_div(b):
    if type(b) in ARRAY_TYPES and kind(b) in "bi" and not b.all():
        raise RuntimeError("ZeroDivisionError")


# ---------------------------------------------------------------------- arithmetic
def _check_alpha(alpha, k):
    """PyTorch's alpha rules, for the result's category ``k`` (see pointwise.kind)."""
    if isinstance(alpha, bool) and k != "b":
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if k in "bi" and isinstance(alpha, (float, complex)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    if k != "c" and isinstance(alpha, complex):
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex "
                           "number.")


def _scaled(xp, other, alpha, negate=False):
    if alpha != 1 or type(alpha) is not int:
        _check_alpha(alpha, kind(other))
    if other.dtype.kind == "c":
        # PyTorch always multiplies a complex ``other`` by alpha (1 included), which turns an
        # infinite component's partner into NaN: (inf + 0j) * (1 + 0j) = inf + nan j
        return other * to_compute(xp, -alpha if negate else alpha, other.dtype)
    if alpha == 1:
        return other
    if other.dtype == np.bool_:
        return other & bool(alpha)
    return other * to_compute(xp, alpha, other.dtype)


# the arithmetic as definitions (backends/xp_ops.py), for backends that compile them
_sum, _sum_scaled = xp_ops.SUM, xp_ops.SUM_SCALED
_difference, _difference_scaled = xp_ops.DIFFERENCE, xp_ops.DIFFERENCE_SCALED
_product, _quotient = xp_ops.PRODUCT, xp_ops.QUOTIENT


def _compiles(xp, a, b) -> bool:
    """Whether ``xp``'s backend compiles pointwise definitions for these operands (promoted
    to one real dtype, not bool: bool arithmetic is logic here; a Python number beside an
    array is passed to the kernel as it is, see promoted_op)."""
    if xp not in COMPILERS:
        return False
    t = a if type(a) in ARRAY_TYPES else b
    return type(t) in ARRAY_TYPES and kind(t) in "fi"


@binop(inplace=True, compiled=True)
def add(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, alpha=1):
    """``add(input, other, *, alpha=1)``: input + alpha * other."""
    if _compiles(xp, input, other):
        if alpha == 1 and type(alpha) is int:
            return _sum(xp, input, other)
        _check_alpha(alpha, kind(input if type(input) in ARRAY_TYPES else other))
        return _sum_scaled(xp, input, other, alpha)
    other = _scaled(xp, other, alpha)
    return xp.logical_or(input, other) if input.dtype == np.bool_ else xp.add(input, other)


@add.def_backward
def _(ctx, g):
    a = ctx.alpha
    return g, (g if a == 1 else g * _conj(a))


def _check_sub(raw, rt, kwargs):
    bools = [isinstance(v, bool) or type(v) in ARRAY_TYPES and v.dtype == np.bool_
             for v in raw.values()]
    if all(bools):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if any(bools):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")


@binop(inplace=True, check=_check_sub, compiled=True)
def sub(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, alpha=1):
    """``sub(input, other, *, alpha=1)``: input - alpha * other."""
    if _compiles(xp, input, other):
        if alpha == 1 and type(alpha) is int:
            return _difference(xp, input, other)
        _check_alpha(alpha, kind(input if type(input) in ARRAY_TYPES else other))
        return _difference_scaled(xp, input, other, alpha)
    if input.dtype.kind == "c":
        return xp.add(input, _scaled(xp, other, alpha, negate=True))
    return xp.subtract(input, _scaled(xp, other, alpha))


@sub.def_backward
def _(ctx, g):
    a = ctx.alpha
    return g, (-g if a == 1 else -g * _conj(a))


@binop(inplace=True, saves=("input", "other"), compiled=True)
def mul(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    """``mul(input, other)``."""
    if _compiles(xp, input, other):
        return _product(xp, input, other)
    if input.dtype == np.bool_:
        return xp.logical_and(input, other)
    return xp.multiply(input, other)


@mul.def_backward
def _(ctx, g):
    return g * _conj(ctx.other), g * _conj(ctx.input)


def _rounded_division(xp, a, b, mode, name):
    if kind(a) == "i":
        _int_zero_div(b)
        q = xp.floor_divide(a, b)
        if mode == "trunc":  # floor rounds towards -inf: step back up where signs differ
            q += ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
        return q
    return xp.floor_divide(a, b) if mode == "floor" else xp.trunc(a / b)


def _div_kind(kwargs):
    mode = kwargs.get("rounding_mode")
    if mode not in (None, "trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                           f"found '{mode}'")
    return INT_TO_FLOAT if mode is None else DEFAULT


def _check_div(raw, rt, kwargs):
    mode = kwargs.get("rounding_mode")
    if mode is not None and rt.kind in "bc":
        raise NotImplementedError(f'"div_{mode}_cpu" not implemented for \'{D.TYPE_NAME[rt]}\'')


@binop(_div_kind, inplace=True, check=_check_div, saves=("input", "other"), compiled=True)
def div(xp, input: "Scalar|Tensor", other: "Scalar|Tensor", *, rounding_mode=None):
    """``div(input, other, *, rounding_mode=None)``: true division, or rounded ("trunc",
    "floor"; integer results stay integral and division by zero raises)."""
    if rounding_mode is None and _compiles(xp, input, other):
        return _quotient(xp, input, other)
    if rounding_mode is None:
        return xp.true_divide(input, other)
    return _rounded_division(xp, input, other, rounding_mode, "div")


def _true_div_backward(ctx, g):
    a, b = ctx.input, ctx.other
    ga = g / _conj(b)
    if not _is_t(b):
        return ga, None
    return ga, -g * _conj((a / b) / b)


@div.def_backward
def _(ctx, g):
    if ctx.rounding_mode is not None:
        return _zeros(g), (_zeros(g) if _is_t(ctx.other) else None)
    return _true_div_backward(ctx, g)


@binop(INT_TO_FLOAT, inplace=True, saves=("input", "other"))
@interpret
def true_divide(ops, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    """``true_divide(input, other)`` is ``div(input, other)``."""
    return ops.div(input, other)


true_divide.def_backward(_true_div_backward)
alias_all({"divide": "div", "multiply": "mul", "subtract": "sub"})


_DIV_FLOOR = (NotImplementedError, '"div_floor_cpu" not implemented for \'{T}\'')


@binop(inplace=True, kinds="if", refuse={"b": _DIV_FLOOR, "c": _DIV_FLOOR})
def floor_divide(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    """``floor_divide(input, other)``: division rounded towards -inf."""
    return _rounded_division(xp, input, other, "floor", "floor_divide")


floor_divide.def_backward(_no_grad_for("floor_divide"))


def _float_remainder(xp, a, b):
    # PyTorch's remainder: fmod, moved into b's sign (keeps -0.0 where fmod gives it)
    m = xp.fmod(a, b)
    return xp.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


@binop(inplace=True, kinds="if", saves=("input", "other"))
def remainder(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    """``remainder(input, other)``: Python's modulus (the result takes other's sign)."""
    if kind(input) == "i":
        _int_zero_div(other)
        return xp.remainder(input, other)
    return _float_remainder(xp, input, other)


@remainder.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    if not _is_t(a):
        raise RuntimeError("derivative for aten::remainder is not implemented")
    return g, (-g * a.div(b, rounding_mode="floor") if _is_t(b) else None)


@binop(inplace=True, kinds="if", tensor_only=("input",), saves=("input", "other"))
def fmod(xp, input: "Tensor", other: "Scalar|Tensor"):
    """``fmod(input, other)``: C's fmod (the result takes input's sign)."""
    if kind(input) == "i":
        _int_zero_div(other)
    return xp.fmod(input, other)


@fmod.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g, (-g * a.div(b, rounding_mode="trunc") if _is_t(b) else None)


# ---------------------------------------------------------------------- two-tensor functions
BOTH = ("input", "other")


@binop(INT_TO_FLOAT, tensor_only=BOTH, kinds="f", inplace=True, saves=BOTH)
@interpret
def atan2(ops, input: "Tensor", other: "Tensor"):
    """``atan2(input, other)``: the angle of (other, input)."""
    return ops.atan2(input, other)


@atan2.def_backward
def _(ctx, g):
    y, x = ctx.input, ctx.other
    recip = (x * x + y * y).reciprocal()
    recip = recip.masked_fill(recip.isinf(), 0)  # PyTorch: a zero gradient at the origin
    return g * x * recip, g * -y * recip


alias_all({"arctan2": "atan2"})


def _no_complex_extremum(name):
    return {"c": (RuntimeError, f"{name} not implemented for complex tensors.")}


def _extremum(name, prim, first_wins, nan_aware):
    if prim is not None:  # maximum, minimum: the primitive max/min (NaN propagates)
        def math(ops, input: "Tensor", other: "Tensor"):
            return getattr(ops, prim)(input, other)
        math.__name__ = name
        kernel = interpret(math)
    else:  # fmax, fmin: numpy's NaN-ignoring ufunc (the composition takes five array passes)
        def kernel(xp, input: "Tensor", other: "Tensor"):
            return getattr(xp, name)(input, other)
    kernel.__name__ = name
    kernel.__doc__ = f"``{name}(input, other)``, elementwise."
    impl = binop(tensor_only=BOTH, kinds="bif", refuse=_no_complex_extremum(name), saves=BOTH,
                 name=name)(kernel)

    @impl.def_backward
    def _(ctx, g):
        a, b = ctx.input, ctx.other
        if nan_aware:  # fmax/fmin: the gradient goes where the value came from
            take_a = first_wins(a, b) | b.isnan()
            return g * take_a, g * ~take_a
        # maximum/minimum: ties split the gradient; with a NaN both operands receive it
        half = (g / 2).where(a == b, g)  # (where's method: selection.py imports this module)
        return half.masked_fill(first_wins(b, a), 0), half.masked_fill(first_wins(a, b), 0)
    return impl


def _fmax(ops, input, other):
    """max ignoring a NaN operand (NaN only when both are): numpy's fmax, which the eager
    kernel calls as one ufunc (this composition would take five array passes there)."""
    return ops.where(ops.ne(input, input), other,
                     ops.where(ops.ne(other, other), input, ops.max(input, other)))


def _fmin(ops, input, other):
    return ops.where(ops.ne(input, input), other,
                     ops.where(ops.ne(other, other), input, ops.min(input, other)))


maximum = _extremum("maximum", "max", lambda a, b: a > b, False)
minimum = _extremum("minimum", "min", lambda a, b: a < b, False)
fmax = _extremum("fmax", None, lambda a, b: a >= b, True)
fmin = _extremum("fmin", None, lambda a, b: a <= b, True)


@binop(tensor_only=BOTH, kinds="f", inplace=True, saves=BOTH, save_output=True)
@interpret
def hypot(ops, input: "Tensor", other: "Tensor"):
    """``hypot(input, other)``: sqrt(input^2 + other^2) without overflow."""
    return ops.hypot(input, other)


@hypot.def_backward
def _(ctx, g):
    out = ctx.out
    return g * ctx.input / out, g * ctx.other / out


def _complex_logaddexp(xp, a, b):
    big = xp.where(a.real >= b.real, a, b)
    small = xp.where(a.real >= b.real, b, a)
    r = big + xp.log1p(xp.exp(small - big))
    # log(exp(-inf) + exp(-inf)) is -inf, not the NaN that -inf - -inf would give
    return xp.where(xp.isneginf(big.real), big, r)


def _log_add(exp, log1p_scale):
    """log_b(b^x + b^y) = max + log1p(b^-|x - y|) / ln b, and x + log_b 2 where x == y (so
    that two equal infinities give that infinity, not the NaN of inf - inf); NaN propagates
    through max."""
    def defn(ops, input, other):
        m = ops.max(input, other)
        t = ops.log1p(getattr(ops, exp)(ops.neg(ops.abs(ops.sub(input, other)))))
        r = ops.add(m, t if log1p_scale == 1 else ops.mul(t, log1p_scale))
        return ops.where(ops.eq(input, other), ops.add(input, math.log(2) * log1p_scale), r)
    return defn


_logaddexp = interpret(_log_add("exp", 1))
_logaddexp2 = interpret(_log_add("exp2", 1 / math.log(2)))


@binop(tensor_only=BOTH, kinds="fc", saves=BOTH)
def logaddexp(xp, input: "Tensor", other: "Tensor"):
    """``logaddexp(input, other)``: log(exp(input) + exp(other))."""
    if kind(input) == "c":
        return _complex_logaddexp(xp, input, other)
    return _logaddexp(xp, input, other)


logaddexp.pointwise_defn = fixed(_logaddexp.kernels.defn, BOTH, kinds="f")


@logaddexp.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g / _conj(1 + (b - a).exp()), g / _conj(1 + (a - b).exp())


@binop(tensor_only=BOTH, kinds="f", saves=BOTH)
def logaddexp2(xp, input: "Tensor", other: "Tensor"):
    """``logaddexp2(input, other)``: log2(2^input + 2^other)."""
    return _logaddexp2(xp, input, other)


logaddexp2.pointwise_defn = fixed(_logaddexp2.kernels.defn, BOTH, kinds="f")


@logaddexp2.def_backward
def _(ctx, g):
    a, b = ctx.input, ctx.other
    return g / (1 + (b - a).exp2()), g / (1 + (a - b).exp2())


@binop(INT_TO_FLOAT, tensor_only=("input",), kinds="f", inplace=True, saves=("input",),
       save_output=True)
@interpret
def copysign(ops, input: "Tensor", other: "Scalar|Tensor"):
    """``copysign(input, other)``: |input| with other's sign (including -0.0's)."""
    return ops.copysign(input, other)


@copysign.def_backward
def _(ctx, g):
    a = ctx.input
    ratio = (ctx.out / a).masked_fill(a == 0, 0)
    return g * ratio, (_zeros(g) if _is_t(ctx.other) else None)


@binop(INT_TO_FLOAT, kinds="f", inplace=True, saves=BOTH)
@interpret
def xlogy(ops, input: "Scalar|Tensor", other: "Scalar|Tensor"):
    """``xlogy(input, other)``: input * log(other), 0 where input is 0 (unless other is NaN)."""
    r = ops.mul(input, ops.log(other))
    return ops.where(ops.bitwise_and(ops.eq(input, 0), ops.eq(other, other)), 0, r)


@xlogy.def_backward
def _(ctx, g):
    x, y = ctx.input, ctx.other
    gx = gy = None
    if _is_t(x):  # PyTorch: xlogy(grad, y), zero where x == 0 and y <= 0 (a Python y: !(y > 0))
        mask = (x == 0) & (y <= 0) if _is_t(y) else (x == 0) & (not y > 0)
        gx = xlogy(g, y).masked_fill(mask, 0)
    if _is_t(y):
        gy = g * x / y
    return gx, gy


# ---------------------------------------------------------------------- comparisons and logic
def _comparison(name, ordered):
    refuse = {"c": (NotImplementedError, f'"{name}_cpu" not implemented for \'{{T}}\'')}

    def math(ops, input: "Tensor", other: "Scalar|Tensor"):  # the primitive of that name
        return getattr(ops, name)(input, other)
    math.__name__ = name
    math.__doc__ = f"``{name}(input, other)``: a bool tensor."
    return binop(ALWAYS_BOOL, tensor_only=("input",), kinds="bif" if ordered else "bifc",
                 refuse=refuse, inplace=True, differentiable=False, name=name,
                 compiled="rounded")(interpret(math))


eq = _comparison("eq", False)
ne = _comparison("ne", False)
lt = _comparison("lt", True)
le = _comparison("le", True)
gt = _comparison("gt", True)
ge = _comparison("ge", True)
alias_all({"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne"})


def _logical(name):
    combine = "bitwise_" + name.split("_")[1]  # and, or, xor

    def math(ops, input: "Tensor", other: "Tensor"):  # truth values combined bit by bit
        return getattr(ops, combine)(ops.ne(input, 0), ops.ne(other, 0))
    math.__name__ = name
    math.__doc__ = f"``{name}(input, other)``: a bool tensor."
    return binop(ALWAYS_BOOL, tensor_only=BOTH, inplace=True, differentiable=False,
                 name=name)(interpret(math))


logical_and = _logical("logical_and")
logical_or = _logical("logical_or")
logical_xor = _logical("logical_xor")


def _shift(xp, a, b, left):
    bits = a.dtype.itemsize * 8
    out_of_range = (b < 0) | (b >= bits)
    s = xp.where(out_of_range, 0, b).astype(a.dtype)
    r = xp.left_shift(a, s) if left else xp.right_shift(a, s)
    if left or kind(a) != "i" or a.dtype.kind == "u":
        fill = xp.zeros((), a.dtype)
    else:  # arithmetic right shift past the width leaves only the sign
        fill = xp.where(a < 0, -1, 0).astype(a.dtype)
    return xp.where(out_of_range, fill, r)


def _bitwise(name, kernel, kinds="bi", cpu_name=None):
    refuse = {"b": (NotImplementedError, f'"{cpu_name}_cpu" not implemented for \'{{T}}\'')}

    @binop(kinds=kinds, refuse=refuse if cpu_name else None, inplace=True,
           differentiable=False, name=name)
    def impl(xp, input: "Scalar|Tensor", other: "Scalar|Tensor"):
        return kernel(xp, input, other)
    impl.__doc__ = f"``{name}(input, other)`` on integers (and bools)."
    return impl


_BITWISE = {"bitwise_and": interpret(lambda ops, a, b: ops.bitwise_and(a, b)),
            "bitwise_or": interpret(lambda ops, a, b: ops.bitwise_or(a, b)),
            "bitwise_xor": interpret(lambda ops, a, b: ops.bitwise_xor(a, b))}
bitwise_and = _bitwise("bitwise_and", _BITWISE["bitwise_and"])
bitwise_or = _bitwise("bitwise_or", _BITWISE["bitwise_or"])
bitwise_xor = _bitwise("bitwise_xor", _BITWISE["bitwise_xor"])
bitwise_left_shift = _bitwise("bitwise_left_shift", lambda xp, a, b: _shift(xp, a, b, True),
                              "i", "lshift")
bitwise_right_shift = _bitwise("bitwise_right_shift", lambda xp, a, b: _shift(xp, a, b, False),
                               "i", "rshift")


def _same_dtype(name, a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{type_name(a)} did not match {type_name(b)}")


def _isclose_defn(ops, input, other, rtol, atol, equal_nan):
    """Equal (infinities included), both NaN where ``equal_nan``, or both finite and
    |input - other| <= atol + rtol |other|."""
    r = ops.eq(input, other)
    if equal_nan:
        r = ops.bitwise_or(r, ops.bitwise_and(ops.ne(input, input), ops.ne(other, other)))
    finite = ops.bitwise_and(ops.lt(ops.abs(input), math.inf), ops.lt(ops.abs(other), math.inf))
    near = ops.le(ops.abs(ops.sub(input, other)), ops.add(ops.mul(ops.abs(other), rtol), atol))
    return ops.bitwise_or(r, ops.bitwise_and(finite, near))


_isclose_kernel = interpret(_isclose_defn)


def _isclose(name, xp, a, b, rtol, atol, equal_nan):
    _tensor_args(name, a, b)
    _same_dtype(name, a, b)
    if a.dtype.kind == "V" or a.dtype == np.float16:  # half types: in float32
        a, b = a.astype(np.float32), b.astype(np.float32)
    if a.dtype.kind != "f":  # integers, bools, complex: numpy's
        return xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return _isclose_kernel(xp, a, b, rtol, atol, equal_nan)


@op(tags=PW, differentiable=False)
def isclose(xp, input: "Tensor", other: "Tensor", rtol=1e-05, atol=1e-08, equal_nan=False):
    """``isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)``."""
    return _isclose("isclose", xp, input, other, rtol, atol, equal_nan)


def _tensor_args(name, *xs):
    for k, x in enumerate(xs):
        if type(x) not in ARRAY_TYPES:
            raise TypeError(f"{name}(): argument '{('input', 'other')[k]}' (position {k + 1}) "
                            f"must be Tensor, not {type(x).__name__}")


@op(returns="python", differentiable=False, out=False)
def allclose(xp, input: "Tensor", other: "Tensor", rtol=1e-05, atol=1e-08, equal_nan=False):
    """``allclose(input, other, ...)``: True when every element is close (a Python bool)."""
    return bool(_isclose("allclose", xp, input, other, rtol, atol, equal_nan).all())


@op(returns="python", differentiable=False, out=False)
def equal(xp, input: "Tensor", other: "Tensor"):
    """``equal(input, other)``: same shape and equal values (a Python bool)."""
    _tensor_args("equal", input, other)
    return input.shape == other.shape and bool(xp.array_equal(input, other))


# ---------------------------------------------------------------------- definitions (compiler)
# The ops above whose impl calls its definition rather than being one (promoted_op attaches
# those itself): which definition a call uses, and with what arguments.
def _scaled_select(plain, scaled):
    def select(a, ct, out):
        alpha = a.get("alpha", 1)
        if alpha == 1 and type(alpha) is int:
            return plain, [a["input"], a["other"]]
        return scaled, [a["input"], a["other"], alpha]
    return select


_OPERANDS = ("input", "other")
add.pointwise_defn = PointwiseDefn(_scaled_select(_sum.kernels.defn, _sum_scaled.kernels.defn),
                                   _OPERANDS, kinds="fi")  # bool add is logic
sub.pointwise_defn = PointwiseDefn(
    _scaled_select(_difference.kernels.defn, _difference_scaled.kernels.defn), _OPERANDS,
    kinds="fi")
mul.pointwise_defn = fixed(_product.kernels.defn, _OPERANDS, kinds="fi")


def _div_select(a, ct, out):  # true division (a rounding mode runs eagerly)
    return None if a.get("rounding_mode") is not None else \
        (_quotient.kernels.defn, [a["input"], a["other"]])


div.pointwise_defn = PointwiseDefn(_div_select, _OPERANDS, kinds="f")


for _op in (bitwise_and, bitwise_or, bitwise_xor):
    _op.pointwise_defn = fixed(_BITWISE[_op.name].kernels.defn, _OPERANDS, kinds="bi")
for _op, _defn in ((fmax, _fmax), (fmin, _fmin)):
    _op.pointwise_defn = fixed(_defn, _OPERANDS, kinds="bif")
isclose.pointwise_defn = PointwiseDefn(
    lambda a, ct, out: (_isclose_defn, [a["input"], a["other"], a["rtol"], a["atol"],
                                        a["equal_nan"]]),
    _OPERANDS, compute="operands", kinds="f")

