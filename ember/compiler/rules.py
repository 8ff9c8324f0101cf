"""Lowering rules: op-table name -> scalar expression over its (broadcast) operands.

A rule gets the call node, its arguments by parameter name with tensor operands already as
``Expr``s of the output shape (Python scalars as ``Const``), and the raw graph arguments (for
promotion). It returns the output ``Expr``, or None when this call cannot be lowered (it then
runs eagerly). Each rule follows the op's eager kernel step by step, in the same compute type
(float16/bfloat16 in float32, rounded back after every op as the eager kernels do).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import _dtype as D
from .lower import Const, Expr, Op, cast, compute_dtype, promoted

_SQRT1_2 = 1 / math.sqrt(2.0)
_TANH_K = math.sqrt(2.0 / math.pi)


def _out(node) -> tuple[D.dtype, D.dtype, tuple]:
    out = node.meta.dtype
    return out, compute_dtype(out), node.meta.shape


def _float_unary(prim: str) -> Callable:
    def rule(node, a, raw):
        out, c, shape = _out(node)
        if out.kind != "f":
            return None
        return cast(Op(prim, [cast(a["input"], c)], c, shape, label=node.target.name), out)
    return rule


def _same_unary(prim: str, kinds: str = "fiu") -> Callable:
    def rule(node, a, raw):
        out, c, shape = _out(node)
        if out.kind not in kinds:
            return None
        return cast(Op(prim, [cast(a["input"], c)], c, shape, label=node.target.name), out)
    return rule


def _binary(prim: str, first: str = "input", second: str = "other", kinds: str = "fiu"):
    def rule(node, a, raw):
        out, c, shape = _out(node)
        if out.kind not in kinds or a.get("rounding_mode") is not None:
            return None
        x, y = cast(a[first], c), cast(a[second], c)
        alpha = a.get("alpha", 1)
        if alpha != 1:
            y = Op("mul", [y, Const(alpha, c)], c, shape)
        return cast(Op(prim, [x, y], c, shape, label=node.target.name), out)
    return rule


def _compare(prim: str) -> Callable:
    def rule(node, a, raw):
        c = compute_dtype(promoted([raw["input"], raw["other"]]))
        if c.kind not in "fiub":
            return None
        return Op(prim, [cast(a["input"], c), cast(a["other"], c)], D.bool_, node.meta.shape,
                  label=node.target.name)
    return rule


def _where(node, a, raw):
    out, c, shape = _out(node)
    if out.kind not in "fiu":
        return None
    return cast(Op("where", [cast(a["condition"], D.bool_), cast(a["input"], c),
                             cast(a["other"], c)], c, shape, label="where"), out)


def _clamp(node, a, raw):
    out, c, shape = _out(node)
    if out.kind not in "fiu":
        return None
    e: Expr = cast(a["input"], c)
    if a.get("min") is not None:
        e = Op("max", [e, cast(a["min"], c)], c, shape, label="clamp")
    if a.get("max") is not None:
        e = Op("min", [e, cast(a["max"], c)], c, shape, label="clamp")
    return cast(e, out)


def _pow(node, a, raw):
    out, c, shape = _out(node)
    if out.kind != "f":
        return None
    return cast(Op("pow", [cast(a["input"], c), cast(a["exponent"], c)], c, shape, label="pow"),
                out)


def _square(node, a, raw):
    out, c, shape = _out(node)
    if out.kind not in "fiu":
        return None
    x = cast(a["input"], c)
    return cast(Op("mul", [x, x], c, shape, label="square"), out)


def _silu(node, a, raw):
    out, c, shape = _out(node)
    if out.kind != "f":
        return None
    x = cast(a["input"], c)
    return cast(Op("mul", [x, Op("sigmoid", [x], c, shape)], c, shape, label="silu"), out)


def _gelu(node, a, raw):
    out, c, shape = _out(node)
    if out.kind != "f" or a["approximate"] not in ("none", "tanh"):
        return None
    x = cast(a["input"], c)

    def op(prim, *args):
        return Op(prim, [v if isinstance(v, Expr) else Const(v, c) for v in args], c, shape)
    if a["approximate"] == "none":  # x * (erf(x / sqrt 2) + 1) * 0.5, as the eager kernel
        inner = op("add", op("erf", op("mul", x, _SQRT1_2)), 1)
    else:  # x * (tanh((x + x**3 * 0.044715) * k) + 1) * 0.5
        cube = op("mul", op("pow", x, 3), 0.044715)
        inner = op("add", op("tanh", op("mul", op("add", x, cube), _TANH_K)), 1)
    r = op("mul", op("mul", x, inner), 0.5)
    r.label = "gelu"
    return cast(r, out)


def _to_copy(node, a, raw):
    return cast(a["self"], a["dtype"])


def _identity(node, a, raw):
    return a["input"] if "input" in a else a["self"]


RULES: dict[str, Callable] = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"),
    "div": _binary("div", kinds="f"), "maximum": _binary("max"), "minimum": _binary("min"),
    "clamp_min": _binary("max", second="min"), "clamp_max": _binary("min", second="max"),
    "clamp": _clamp, "pow": _pow, "square": _square, "where": _where,
    "neg": _same_unary("neg"), "abs": _same_unary("abs"), "relu": _same_unary("relu"),
    "exp": _float_unary("exp"), "log": _float_unary("log"), "sqrt": _float_unary("sqrt"),
    "rsqrt": _float_unary("rsqrt"), "tanh": _float_unary("tanh"),
    "sigmoid": _float_unary("sigmoid"), "erf": _float_unary("erf"),
    "reciprocal": _float_unary("reciprocal"), "sin": _float_unary("sin"),
    "cos": _float_unary("cos"), "log1p": _float_unary("log1p"),
    "expm1": _float_unary("expm1"), "silu": _silu, "gelu": _gelu,
    "eq": _compare("eq"), "ne": _compare("ne"), "lt": _compare("lt"), "le": _compare("le"),
    "gt": _compare("gt"), "ge": _compare("ge"),
    "_to_copy": _to_copy, "clone": _identity,
}

# views lowered as index arithmetic (the output's element order is row-major of the input's)
RESHAPES = frozenset(["view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze"])
PERMUTES = frozenset(["transpose", "permute", "t"])
REDUCTIONS = frozenset(["sum", "mean", "amax", "amin"])
SOFTMAXES = frozenset(["softmax", "log_softmax"])
