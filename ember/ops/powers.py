"""Powers: ``pow`` (integer, float and complex exponents, PyTorch's edge cases) and
``float_power`` (always in float64 / complex128), with their gradients."""

from __future__ import annotations

import cmath
import math

import numpy as np

from .. import _dtype as D
from ..backends.base import ARRAY_TYPES
from .binary import _conj, _is_t, _zeros
from ..backends.xp_ops import interpret
from .pointwise import kind, promoted_op as binop
from .pointwise_defn import fixed


def _check_pow(raw, rt, kwargs):
    e = raw["exponent"]
    if rt is D.bool_ and type(e) in ARRAY_TYPES:
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    if rt.kind in "ui" and isinstance(e, (int, float)) and not isinstance(e, bool) and e < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if rt.kind in "ui" and isinstance(e, int) and not isinstance(e, bool):
        info = np.iinfo(rt.np)
        if not info.min <= e <= info.max:  # a scalar exponent must fit the integer type
            raise RuntimeError(f"value cannot be converted to type {_C_INT[rt.name]} without "
                               "overflow")


_C_INT = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int",
          "int64": "int64_t"}


def _int_power(xp, a, e):
    # PyTorch: a negative exponent gives 0 unless |a| == 1 (and 0 ** -n is 0 too)
    neg = e < 0  # computed for every element: deciding first would read the device back
    r = xp.power(a, xp.where(neg, 0, e))
    ones = xp.where(a == -1, xp.where(e % 2 == 0, 1, -1), xp.where(a == 1, 1, 0)).astype(r.dtype)
    return xp.where(neg, ones, r)


@binop(inplace=True, check=_check_pow, saves=("input", "exponent"), save_output=True)
def pow(xp, input: "Scalar|Tensor", exponent: "Scalar|Tensor"):
    """``pow(input, exponent)``: either operand may be a Python number."""
    if input.dtype == np.bool_:  # bool ** bool (a Python exponent): x ** True = x, ** False = 1
        return xp.logical_or(xp.logical_not(exponent), input)
    if kind(input) == "i":
        return _int_power(xp, input, exponent)
    if kind(input) == "c":
        return _complex_power(xp, input, exponent)
    return _power(xp, input, exponent)


_power = interpret(lambda ops, input, exponent: ops.pow(input, exponent))
# floating powers lower from the definition (integer powers are repeated products, and a bool
# base is logic: those run eagerly)
pow.pointwise_defn = fixed(_power.kernels.defn, ("input", "exponent"), kinds="f")


def _complex_power(xp, a, e):
    r = xp.power(a, e)
    # exp(e log 0) with e real and negative is inf + nan j in C (numpy says nan + nan j)
    pole = (a == 0) & (e.imag == 0) & (e.real < 0)
    return xp.where(pole, xp.asarray(complex(math.inf, math.nan), r.dtype), r)


def _log_scalar(a, cplx):
    if cplx or isinstance(a, complex):
        return cmath.log(a) if a != 0 else complex(-math.inf, 0)
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def _nonneg(e):
    if e.is_complex():
        return (e.imag == 0) & (e.real >= 0)
    return e >= 0


def _pow_backward(ctx, g, a, e, out):
    """PyTorch's pow gradients: 0 for the base where the exponent is 0, and 0 for the
    exponent where the base is 0 and the exponent non-negative."""
    ga = gb = None
    dt = out.dtype  # differentiate in the result's precision
    a = a.to(dt) if _is_t(a) and a.dtype is not dt else a
    e = e.to(dt) if _is_t(e) and e.dtype is not dt else e
    if _is_t(a):
        if _is_t(e):
            ga = (g * _conj(e * a ** (e - 1))).masked_fill(e == 0, 0)
        else:
            ga = _zeros(g) if e == 0 else g * _conj(e * a ** (e - 1))
    if _is_t(e):
        if _is_t(a):
            gb = (g * _conj(out * a.log())).masked_fill((a == 0) & _nonneg(e), 0)
        elif a == 0:
            gb = (g * _conj(out * _log_scalar(a, e.is_complex()))).masked_fill(_nonneg(e), 0)
        else:
            gb = g * _conj(out * _log_scalar(a, e.is_complex()))
    return ga, gb


@pow.def_backward
def _(ctx, g):
    return _pow_backward(ctx, g, ctx.input, ctx.exponent, ctx.out)


@binop(None, saves=("input", "exponent"), save_output=True)
def float_power(xp, input: "Scalar|Tensor", exponent: "Scalar|Tensor"):
    """``float_power(input, exponent)``: computed and returned in double precision."""
    cplx = any(isinstance(v, complex) or type(v) in ARRAY_TYPES and kind(v) == "c"
               for v in (input, exponent))
    dt = np.complex128 if cplx else np.float64
    return _power(xp, xp.asarray(input, dtype=dt), xp.asarray(exponent, dtype=dt))


# both operands cast to float64 (the result's dtype: complex128 does not lower)
float_power.pointwise_defn = fixed(_power.kernels.defn, ("input", "exponent"), kinds="f")


@float_power.def_backward
def _(ctx, g):
    return _pow_backward(ctx, g, ctx.input, ctx.exponent, ctx.out)
