"""Unary pointwise ops, defined by one table: name, numpy kernel, promotion, derivative."""

from __future__ import annotations

import math

import numpy as np

from ..backends import special
from .registry import ALWAYS_BOOL, DEFAULT, INT_TO_FLOAT, alias_all, op

POINTWISE = ("pointwise",)
LN2 = math.log(2.0)
LN10 = math.log(10.0)


def _no_bool(name, what):
    def check(x):
        if x.dtype == np.bool_:
            raise RuntimeError(what)
    return check


# name: (kernel(xp, x), promotion, backward(g, x, y) in ember ops, what backward needs)
# "x" saves the input, "y" the output, None neither.
UNARY = {
    "exp": (lambda xp, x: xp.exp(x), INT_TO_FLOAT, lambda g, x, y: g * y.conj(), "y"),
    "exp2": (lambda xp, x: xp.exp2(x), INT_TO_FLOAT, lambda g, x, y: g * y * LN2, "y"),
    "expm1": (lambda xp, x: xp.expm1(x), INT_TO_FLOAT, lambda g, x, y: g * (y + 1), "y"),
    "log": (lambda xp, x: xp.log(x), INT_TO_FLOAT, lambda g, x, y: g / x.conj(), "x"),
    "log2": (lambda xp, x: xp.log2(x), INT_TO_FLOAT, lambda g, x, y: g / (x * LN2), "x"),
    "log10": (lambda xp, x: xp.log10(x), INT_TO_FLOAT, lambda g, x, y: g / (x * LN10), "x"),
    "log1p": (lambda xp, x: xp.log1p(x), INT_TO_FLOAT, lambda g, x, y: g / (x + 1), "x"),
    "sqrt": (lambda xp, x: xp.sqrt(x), INT_TO_FLOAT, lambda g, x, y: g / (2 * y.conj()), "y"),
    "rsqrt": (lambda xp, x: 1 / xp.sqrt(x), INT_TO_FLOAT, lambda g, x, y: -0.5 * g * y ** 3,
              "y"),
    "reciprocal": (lambda xp, x: xp.reciprocal(x), INT_TO_FLOAT,
                   lambda g, x, y: -g * (y * y).conj(), "y"),
    "sin": (lambda xp, x: xp.sin(x), INT_TO_FLOAT, lambda g, x, y: g * x.cos().conj(), "x"),
    "cos": (lambda xp, x: xp.cos(x), INT_TO_FLOAT, lambda g, x, y: -g * x.sin().conj(), "x"),
    "tan": (lambda xp, x: xp.tan(x), INT_TO_FLOAT, lambda g, x, y: g * (1 + y * y).conj(), "y"),
    "asin": (lambda xp, x: xp.arcsin(x), INT_TO_FLOAT,
             lambda g, x, y: g * (1 - x * x).rsqrt(), "x"),
    "acos": (lambda xp, x: xp.arccos(x), INT_TO_FLOAT,
             lambda g, x, y: -g * (1 - x * x).rsqrt(), "x"),
    "atan": (lambda xp, x: xp.arctan(x), INT_TO_FLOAT, lambda g, x, y: g / (1 + x * x), "x"),
    "sinh": (lambda xp, x: xp.sinh(x), INT_TO_FLOAT, lambda g, x, y: g * x.cosh(), "x"),
    "cosh": (lambda xp, x: xp.cosh(x), INT_TO_FLOAT, lambda g, x, y: g * x.sinh(), "x"),
    "tanh": (lambda xp, x: xp.tanh(x), INT_TO_FLOAT, lambda g, x, y: g * (1 - y * y).conj(),
             "y"),
    "asinh": (lambda xp, x: xp.arcsinh(x), INT_TO_FLOAT,
              lambda g, x, y: g * (x * x + 1).rsqrt(), "x"),
    "acosh": (lambda xp, x: xp.arccosh(x), INT_TO_FLOAT,
              lambda g, x, y: g * (x * x - 1).rsqrt(), "x"),
    "atanh": (lambda xp, x: xp.arctanh(x), INT_TO_FLOAT, lambda g, x, y: g / (1 - x * x), "x"),
    "sigmoid": (lambda xp, x: special.sigmoid(x), INT_TO_FLOAT,
                lambda g, x, y: g * (y * (1 - y)).conj(), "y"),
    "erf": (lambda xp, x: special.erf(x), INT_TO_FLOAT,
            lambda g, x, y: g * (2 / math.sqrt(math.pi)) * (-x * x).exp(), "x"),
    "erfc": (lambda xp, x: special.erfc(x), INT_TO_FLOAT,
             lambda g, x, y: g * (-2 / math.sqrt(math.pi)) * (-x * x).exp(), "x"),
    "erfinv": (lambda xp, x: special.erfinv(x), INT_TO_FLOAT,
               lambda g, x, y: g * (math.sqrt(math.pi) / 2) * (y * y).exp(), "y"),
    "lgamma": (lambda xp, x: special.lgamma(x), INT_TO_FLOAT, lambda g, x, y: g * x.digamma(),
               "x"),
    "digamma": (lambda xp, x: special.digamma(x), INT_TO_FLOAT,
                lambda g, x, y: g * _trigamma(x), "x"),
    "square": (lambda xp, x: xp.square(x) if x.dtype != np.bool_ else x.astype(np.int64),
               DEFAULT, lambda g, x, y: g * 2 * x.conj(), "x"),
    "neg": (lambda xp, x: (_no_bool("neg", _NEG_BOOL)(x), xp.negative(x))[1], DEFAULT,
            lambda g, x, y: -g, None),
    "sign": (lambda xp, x: _sign(xp, x), DEFAULT, lambda g, x, y: g.new_zeros(g.shape), None),
    "floor": (lambda xp, x: xp.floor(x) if x.dtype.kind == "f" else x.copy(), DEFAULT,
              lambda g, x, y: g.new_zeros(g.shape), None),
    "ceil": (lambda xp, x: xp.ceil(x) if x.dtype.kind == "f" else x.copy(), DEFAULT,
             lambda g, x, y: g.new_zeros(g.shape), None),
    "trunc": (lambda xp, x: xp.trunc(x) if x.dtype.kind == "f" else x.copy(), DEFAULT,
              lambda g, x, y: g.new_zeros(g.shape), None),
    "frac": (lambda xp, x: x - xp.trunc(x), DEFAULT, lambda g, x, y: g, None),
    "bitwise_not": (lambda xp, x: _int_only("bitwise_not", x) or xp.invert(x), DEFAULT, None,
                    None),
}
_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
alias_all({"negative": "neg", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
           "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "fix": "trunc",
           "absolute": "abs"})


def _int_only(name, x):
    if x.dtype.kind in "fc":
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                           f"'{'Float' if x.dtype == np.float32 else str(x.dtype).capitalize()}'")


def _sign(xp, x):
    if x.dtype.kind == "c":
        raise RuntimeError("Unlike NumPy, torch.sign is not intended to support complex numbers. "
                           "Please use torch.sgn instead.")
    if x.dtype == np.bool_:
        return x.copy()
    return xp.sign(x)


def _trigamma(x):
    from .. import polygamma
    return polygamma(1, x)


def _register_unary(name, kernel, promote, deriv, needs):
    def impl(xp, input: "Tensor"):
        return kernel(xp, input)
    impl.__name__ = name
    d = op(name, tags=POINTWISE, promote=promote, inplace=True,
           saves=("input",) if needs == "x" else (), save_output=needs == "y",
           differentiable=deriv is not None)(impl)
    if deriv is not None:
        def backward(ctx, g):
            x = ctx.input if needs == "x" else None
            y = ctx.out if needs == "y" else None
            return deriv(g, x, y)
        d.def_backward(backward)
    return d


for _name, _spec in UNARY.items():
    globals()[_name] = _register_unary(_name, *_spec)


# ---------------------------------------------------------------------- the rest, one by one
@op(tags=POINTWISE, inplace=True, saves=("input",))
def abs(xp, input: "Tensor"):  # no promotion: complex input gives a real result
    if input.dtype == np.bool_:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    return xp.abs(input)


@abs.def_backward
def _(ctx, g):
    return g * ctx.input.sgn()


@op(tags=POINTWISE, promote=DEFAULT, inplace=True, save_output=True, saves=("input",))
def sgn(xp, input: "Tensor"):
    if input.dtype.kind != "c":
        return _sign(xp, input)
    a = xp.abs(input)
    return xp.where(a == 0, 0, input / xp.where(a == 0, 1, a)).astype(input.dtype)


@sgn.def_backward
def _(ctx, g):
    x = ctx.input
    if not x.is_complex():
        return g.new_zeros(g.shape)
    s, a = ctx.out, x.abs()
    res = (g - (g * s.conj()).real * s) / a
    return res.masked_fill(a == 0, 0)


@op(tags=POINTWISE, promote=INT_TO_FLOAT, inplace=True, saves=("input",))
def logit(xp, input: "Tensor", eps=None):
    x = input if eps is None else xp.clip(input, eps, 1 - eps)
    return xp.log(x / (1 - x))


@logit.def_backward
def _(ctx, g):
    x, eps = ctx.input, ctx.eps
    res = g / (x * (1 - x))
    if eps is not None:
        res = res.masked_fill((x < eps) | (x > 1 - eps), 0)
    return res


@op(tags=POINTWISE, promote=DEFAULT, inplace=True)
def round(xp, input: "Tensor", *, decimals=0):
    if input.dtype.kind not in "fc":
        return input.copy()
    if decimals == 0:
        return xp.round(input)
    scale = 10.0 ** decimals  # PyTorch: round(x * 10^d) / 10^d, half to even
    if decimals > 0:
        return xp.round(input * input.dtype.type(scale)) / input.dtype.type(scale)
    return xp.round(input / input.dtype.type(10.0 ** -decimals)) * input.dtype.type(
        10.0 ** -decimals)


@round.def_backward
def _(ctx, g):
    return g.new_zeros(g.shape)


@op(tags=POINTWISE, inplace=True, saves=("input",))
def nan_to_num(xp, input: "Tensor", nan=0.0, posinf=None, neginf=None):
    if input.dtype.kind not in "fc":
        return input.copy()
    return xp.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


@nan_to_num.def_backward
def _(ctx, g):
    x = ctx.input
    return g * x.isfinite()


def _predicate(name, fn):
    def impl(xp, input: "Tensor"):
        return fn(xp, input)
    impl.__name__ = name
    return op(name, tags=POINTWISE, differentiable=False)(impl)


isnan = _predicate("isnan", lambda xp, x: xp.isnan(x) if x.dtype.kind in "fc"
                   else xp.zeros(x.shape, bool))
isinf = _predicate("isinf", lambda xp, x: xp.isinf(x) if x.dtype.kind in "fc"
                   else xp.zeros(x.shape, bool))
isfinite = _predicate("isfinite", lambda xp, x: xp.isfinite(x) if x.dtype.kind in "fc"
                      else xp.ones(x.shape, bool))
isposinf = _predicate("isposinf", lambda xp, x: xp.isposinf(x) if x.dtype.kind == "f"
                      else xp.zeros(x.shape, bool))
isneginf = _predicate("isneginf", lambda xp, x: xp.isneginf(x) if x.dtype.kind == "f"
                      else xp.zeros(x.shape, bool))
isreal = _predicate("isreal", lambda xp, x: xp.isreal(x))
signbit = _predicate("signbit", lambda xp, x: xp.signbit(x) if x.dtype.kind == "f"
                     else (x < 0) if x.dtype.kind == "i" else xp.zeros(x.shape, bool))
logical_not = _predicate("logical_not", lambda xp, x: xp.logical_not(x))
logical_not.has_inplace = True


@op(tags=POINTWISE, promote=INT_TO_FLOAT, differentiable=True, saves=("input",))
def polygamma(xp, n, input: "Tensor"):
    return special.polygamma(n, input)


@polygamma.def_backward
def _(ctx, g):
    from .. import polygamma as pg
    return (g * pg(ctx.n + 1, ctx.input),)


@op(tags=POINTWISE, promote=INT_TO_FLOAT, saves=("input",))
def mvlgamma(xp, input: "Tensor", p):
    j = xp.arange(p, dtype=input.dtype)
    return (p * (p - 1) / 4 * math.log(math.pi) + special.lgamma(
        input[..., None] - j / 2).sum(-1)).astype(input.dtype)


@mvlgamma.def_backward
def _(ctx, g):
    from .. import arange
    x, p = ctx.input, ctx.p
    j = arange(p, dtype=x.dtype)
    return g * (x.unsqueeze(-1) - j / 2).digamma().sum(-1)


_ = ALWAYS_BOOL
