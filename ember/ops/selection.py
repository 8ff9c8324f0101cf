"""Selection and ternary pointwise ops: where, clamp (clamp_min, clamp_max), lerp, addcmul,
addcdiv. Their math is a definition over the scalar primitives (codegen/prims.py) that numpy
eager interprets and the compiler lowers (``OpDef.pointwise_defn``)."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from ..backends.base import ARRAY_TYPES
from ..backends.xp_ops import interpret
from .binary import _conj, _is_t, _zeros
from .bind import tensor_method
from .pointwise import kind, promoted_op as binop, to_compute, type_name
from .pointwise_defn import PointwiseDefn
from .registry import alias_all

_OPERANDS = ("input", "other")

# ---------------------------------------------------------------------- selection
def _where_operands(raw: dict, rt, kwargs) -> None:
    """where takes both of input and other or neither (then it is nonzero(as_tuple=True))."""
    if (raw["input"] is None) != (raw["other"] is None):
        given = ", ".join("Tensor" if type(v) in ARRAY_TYPES else type(v).__name__
                          for v in raw.values() if v is not None)
        e = TypeError(f"where() received an invalid combination of arguments - got (Tensor, "
                      f"{given}), but expected one of:\n * (Tensor condition)\n * (Tensor "
                      "condition, Tensor input, Tensor other)")
        e._ember_final = True
        raise e
    for v in (raw["input"], raw["other"]):
        if type(v) in (int, float) and _overflows(v, rt):
            raise RuntimeError(f"value cannot be converted to type {_C_NAME[rt]} without "
                               "overflow")


_C_NAME = {D.int8: "int8_t", D.uint8: "uint8_t", D.int16: "int16_t", D.int32: "int",
           D.int64: "int64_t", D.float32: "float"}


def _overflows(v, dtype) -> bool:
    """Whether PyTorch refuses the number ``v`` as a scalar operand of ``dtype``: an integer
    outside a signed type's range (an unsigned one takes negatives down to -max, which
    wrap); a finite float beyond float32's range. Half types take anything (as inf)."""
    if dtype not in _C_NAME:
        return False
    if dtype.kind == "f":
        return math.isfinite(v) and abs(v) > 3.4028234663852886e38
    if type(v) is not int:
        return False
    info = np.iinfo(dtype.np)
    if info.min == 0:
        return v > info.max or v < -info.max
    return not info.min <= v <= info.max


@binop(promote_args=("input", "other"), saves=("condition",), check=_where_operands,
       compiled=True)
def where(xp, condition: "Tensor", input: "Scalar|Tensor" = None, other: "Scalar|Tensor" = None):
    """``where(condition, input, other)``; ``where(condition)`` is ``nonzero(as_tuple=True)``."""
    if input is None and other is None:  # a 0-d condition counts as one element
        return tuple(xp.nonzero(xp.atleast_1d(condition)))
    if condition.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {type_name(condition)}")
    return _select(xp, condition, input, other)


_select = interpret(lambda ops, c, a, b: ops.where(c, a, b))


@where.def_backward
def _(ctx, g):
    c = ctx.condition
    z = _zeros(g)
    return None, where(c, g, z), where(c, z, g)


@tensor_method("where")
def _where_method(self, condition, other):
    """``x.where(condition, y)`` is ``where(condition, x, y)``."""
    return where(condition, self, other)


_CLAMP = {"c": (NotImplementedError, "clamp is not supported for complex types")}


def _check_clamp(raw, rt, kwargs):
    # bool tensors clamp against tensor bounds only (PyTorch has no bool scalar kernel)
    scalars = [n for n in ("min", "max") if n in raw and raw[n] is not None
               and type(raw[n]) not in ARRAY_TYPES]
    if raw.get("min") is not None and raw.get("max") is not None and len(scalars) == 1:
        got = ", ".join("Tensor" if type(v) in ARRAY_TYPES else type(v).__name__
                        for v in raw.values())
        raise TypeError(f"clamp() received an invalid combination of arguments - got ({got}): "
                        "min and max must both be tensors or both be numbers")
    if rt is D.bool_ and scalars:
        raise NotImplementedError(f'"clamp_{scalars[0]}_scalar_cpu" not implemented for \'Bool\'')
    if rt is D.bool_ and raw.get("min") is not None and raw.get("max") is not None:
        raise NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'")


@binop(tensor_only=("input",), kinds="bif", refuse=_CLAMP, check=_check_clamp, inplace=True,
       saves=("input", "min", "max"))
def clamp(xp, input: "Tensor", min: "Scalar|Tensor" = None, max: "Scalar|Tensor" = None):
    """``clamp(input, min=None, max=None)``: min(max(input, min), max); NaN propagates."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return _clamp(xp, input, min, max)


@interpret
def _clamp(ops, input, min, max):  # a bound that is None is left out
    r = input
    if min is not None:
        r = ops.max(r, min)
    if max is not None:
        r = ops.min(r, max)
    return r


@clamp.def_backward
def _(ctx, g):
    # PyTorch's masks: the input keeps the gradient where min <= x <= max, a tensor bound where
    # the result is that bound (max wins when min > max; nobody at min == max); NaN: nobody
    x, lo, hi = ctx.input, ctx.min, ctx.max
    keep = glo = ghi = None
    if lo is not None:
        keep = x >= lo
        if _is_t(lo):
            glo = g * ((x < lo) & (lo < hi) if hi is not None else x < lo)
    if hi is not None:
        keep = (x <= hi) if keep is None else keep & (x <= hi)
        if _is_t(hi):
            ghi = g * ((x > hi) | (lo > hi) if lo is not None else x > hi)
    return g * keep, glo, ghi


alias_all({"clip": "clamp"})


@binop(tensor_only=("input",), kinds="bif", refuse=_CLAMP, check=_check_clamp, inplace=True,
       saves=("input", "min"))
@interpret
def clamp_min(ops, input: "Tensor", min: "Scalar|Tensor"):
    """``clamp_min(input, min)``."""
    return ops.max(input, min)


@clamp_min.def_backward
def _(ctx, g):
    x, lo = ctx.input, ctx.min
    return g * (x >= lo), (g * (x < lo) if _is_t(lo) else None)


@binop(tensor_only=("input",), kinds="bif", refuse=_CLAMP, check=_check_clamp, inplace=True,
       saves=("input", "max"))
@interpret
def clamp_max(ops, input: "Tensor", max: "Scalar|Tensor"):
    """``clamp_max(input, max)``."""
    return ops.min(input, max)


@clamp_max.def_backward
def _(ctx, g):
    x, hi = ctx.input, ctx.max
    return g * (x <= hi), (g * (x > hi) if _is_t(hi) else None)


def _check_lerp(raw, rt, kwargs):
    # a Python weight: input and end of one float type; a tensor weight: the three promote
    # together, but an n-d weight must have input's type
    x, end, w = raw["input"], raw["end"], raw["weight"]
    if type(w) not in ARRAY_TYPES:
        if kind(x) not in "fc":
            raise NotImplementedError(f'"lerp_kernel_scalar" not implemented for '
                                      f"'{type_name(x)}'")
        if end.dtype != x.dtype:
            raise RuntimeError(f"expected dtype {_short(x)} for `end` but got dtype "
                               f"{_short(end)}")
        if isinstance(w, complex) and kind(x) != "c":
            raise RuntimeError(f"value cannot be converted to type {_short(x)} without overflow")
        return
    if w.ndim and w.dtype != x.dtype:
        raise RuntimeError(f"expected dtype {_short(x)} for `weight` but got dtype {_short(w)}")
    if rt.kind not in "fc":
        raise NotImplementedError(f'"lerp_kernel_tensor" not implemented for '
                                  f"'{D.TYPE_NAME[rt]}'")


def _short(a):
    return {np.float32: "float", np.float64: "double", np.float16: "c10::Half"}.get(
        a.dtype.type, str(a.dtype))


@binop(tensor_only=("input", "end"), kinds="fc", check=_check_lerp, inplace=True,
       saves=("input", "end", "weight"))
@interpret
def lerp(ops, input: "Tensor", end: "Tensor", weight: "Scalar|Tensor"):
    """``lerp(input, end, weight)``: input + weight * (end - input)."""
    # PyTorch's two-sided formula keeps lerp exact at weight 0 and 1 (weight arrives promoted
    # to input's dtype, a Python number included)
    d = ops.sub(end, input)
    return ops.where(ops.lt(ops.abs(weight), 0.5), ops.add(input, ops.mul(weight, d)),
                     ops.sub(end, ops.mul(d, ops.sub(1, weight))))


@lerp.def_backward
def _(ctx, g):
    x, e, w = ctx.input, ctx.end, ctx.weight
    gw = g * _conj(e - x) if _is_t(w) else None
    return g * _conj(1 - w), g * _conj(w), gw


_ADDCDIV_INT = ("Integer division with addcdiv is no longer supported, and in a future  release "
                "addcdiv will perform a true division of tensor1 and tensor2. The historic "
                "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
                "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
                "tensor2) for float inputs. The future addcdiv behavior is just the latter "
                "implementation: (input + value * tensor1 / tensor2), for all dtypes.")


def _check_addcdiv(raw, rt, kwargs):
    if all(kind(raw[n]) in "bi" for n in ("tensor1", "tensor2")):
        raise RuntimeError(_ADDCDIV_INT)


_ADDC_BOOL = {"b": (NotImplementedError, '"addcmul_cpu_out" not implemented for \'{T}\'')}


TERNARY = ("input", "tensor1", "tensor2")


@binop(tensor_only=TERNARY, kinds="ifc", refuse=_ADDC_BOOL, inplace=True,
       saves=("tensor1", "tensor2"))
def addcmul(xp, input: "Tensor", tensor1: "Tensor", tensor2: "Tensor", *, value=1):
    """``addcmul(input, tensor1, tensor2, *, value=1)``: input + value * tensor1 * tensor2."""
    return _addcmul(xp, input, tensor1, tensor2, to_compute(xp, value, input.dtype))


@interpret
def _addcmul(ops, input, tensor1, tensor2, value):
    return ops.add(input, ops.mul(value, ops.mul(tensor1, tensor2)))


@addcmul.def_backward
def _(ctx, g):
    v = ctx.value
    return g, g * _conj(ctx.tensor2 * v), g * _conj(ctx.tensor1 * v)


@binop(tensor_only=TERNARY, check=_check_addcdiv, inplace=True, saves=("tensor1", "tensor2"))
def addcdiv(xp, input: "Tensor", tensor1: "Tensor", tensor2: "Tensor", *, value=1):
    """``addcdiv(input, tensor1, tensor2, *, value=1)``: input + value * tensor1 / tensor2."""
    return _addcdiv(xp, input, tensor1, tensor2, to_compute(xp, value, input.dtype))


@interpret
def _addcdiv(ops, input, tensor1, tensor2, value):
    return ops.add(input, ops.mul(value, ops.div(tensor1, tensor2)))


@addcdiv.def_backward
def _(ctx, g):
    v, t1, t2 = ctx.value, ctx.tensor1, ctx.tensor2
    return g, g * _conj(v / t2), -g * _conj(v * t1 / (t2 * t2))


# ---------------------------------------------------------------------- definitions (compiler)
# (clamp_min, clamp_max and lerp are definitions themselves: promoted_op attaches those)
def _where_select(a, ct, out):
    c = a["condition"]
    if a["input"] is None or a["other"] is None or c.dtype is not D.bool_:
        return None
    return _select.kernels.defn, [c, a["input"], a["other"]]


where.pointwise_defn = PointwiseDefn(_where_select, _OPERANDS)


def _clamp_select(a, ct, out):
    if a.get("min") is None and a.get("max") is None:
        return None
    return _clamp.kernels.defn, [a["input"], a.get("min"), a.get("max")]


clamp.pointwise_defn = PointwiseDefn(_clamp_select, ("input", "min", "max"), kinds="fi")


def _addc_select(defn):
    def select(a, ct, out):
        return defn, [a["input"], a["tensor1"], a["tensor2"], a.get("value", 1)]
    return select


addcmul.pointwise_defn = PointwiseDefn(_addc_select(_addcmul.kernels.defn), TERNARY,
                                       kinds="fi")
# (integer tensor1 / tensor2 raise in the eager op: a float input leaves them integral there)
addcdiv.pointwise_defn = PointwiseDefn(_addc_select(_addcdiv.kernels.defn), TERNARY, kinds="f")
