"""The C spelling of the scalar primitives (codegen/prims.py): ``CScalarOps``, one method per
primitive, each returning a C expression over operands that are already C expressions
(identifiers or literals), plus the C types of the dtypes and the spelling of casts and
constants.

Values are C scalars of the compute type: float16 and bfloat16 are ``float`` (loaded widened,
rounded once at the store), bool is ``uint8_t`` holding 0 or 1. Complex dtypes have no C
spelling: code generation never sees them. Every primitive has a C spelling;
``C_MISSING`` would name one that had none, with why, and tests/test_prims.py reads it.
Integers narrower than ``int`` wrap as the primitives say (C computes them in ``int`` and the
conversion back wraps); ``int32_t`` and ``int64_t`` overflow is undefined in C, and wraps only
because the compilers do so in practice (the build flags, codegen/c/runtime.py, have no
``-fwrapv``).

The float32 spellings of exp, tanh, erf and ncdf call the branch-free helpers em_expf,
em_tanhf, em_erff and em_ncdff (vectorizable, within the primitives' accuracy; em_ncdf is the
float64 ncdf), which the compiler's C prelude defines (ember/compiler/codegen_c.py, PRELUDE).
The prelude stays there for now: its normal-CDF helper takes its coefficients from
backends/special.py, a layer above this one.
"""

from __future__ import annotations

import abc
import math

from ... import _dtype as D
from ..prims import ScalarOps

CTYPE = {D.float32: "float", D.float64: "double", D.float16: "float", D.bfloat16: "float",
         D.int8: "int8_t", D.int16: "int16_t", D.int32: "int32_t", D.int64: "int64_t",
         D.uint8: "uint8_t", D.bool_: "uint8_t"}

# primitives without a C spelling: name -> why (none today)
C_MISSING: dict[str, str] = {}


def c_literal(value, dt: D.dtype) -> str:
    """A Python number as a C constant of ``dt``'s C type (floats exact, in hex)."""
    ct = CTYPE[dt]
    if dt.kind == "f":
        v = float(value)
        if math.isnan(v):
            return f"(({ct})NAN)"
        if math.isinf(v):
            return f"(({ct})({'-' if v < 0 else ''}INFINITY))"
        return f"(({ct}){v.hex()})"
    if dt is D.bool_:
        return "1" if value else "0"
    return f"(({ct}){int(value)}LL)"


def cast_expr(src: D.dtype | None, dst: D.dtype, a: str) -> str:
    """``a`` converted to ``dst``'s compute type (half types: rounded, kept in a float)."""
    if dst is D.bool_:
        return f"(uint8_t)({a} != 0)"
    if dst is D.float16:
        return f"(float)(_Float16)({a})"
    if dst is D.bfloat16:
        return f"em_bf16_round((float)({a}))"
    return f"({CTYPE[dst]})({a})"


class CScalarOps(ScalarOps):
    """The C spelling of each primitive (operands are C expressions), for values of C type
    ``ct``; ``dtype``, where given, tells bool from uint8 (both ``uint8_t``)."""

    def __init__(self, ct: str, dtype: D.dtype | None = None):
        self.ct = ct
        self.dtype = dtype
        self.f = "f" if ct == "float" else ""
        self.is_float = ct in ("float", "double")

    def _fn(self, name, a):
        return f"{name}{self.f}({a})"

    def add(self, a, b): return f"{a} + {b}"
    def sub(self, a, b): return f"{a} - {b}"
    def mul(self, a, b): return f"{a} * {b}"
    def div(self, a, b): return f"{a} / {b}"
    def neg(self, a): return f"-{a}"
    # NaN propagates (from either side); a tie gives b (max(-0, +0) is +0), as numpy's
    def max(self, a, b): return f"(({a} != {a}) || {a} > {b}) ? {a} : {b}"
    def min(self, a, b): return f"(({a} != {a}) || {a} < {b}) ? {a} : {b}"
    def where(self, c, a, b): return f"{c} ? {a} : {b}"
    def eq(self, a, b): return f"{a} == {b}"
    def ne(self, a, b): return f"{a} != {b}"
    def lt(self, a, b): return f"{a} < {b}"
    def le(self, a, b): return f"{a} <= {b}"
    def gt(self, a, b): return f"{a} > {b}"
    def ge(self, a, b): return f"{a} >= {b}"
    def exp(self, a): return f"em_expf({a})" if self.f else f"exp({a})"
    def exp2(self, a): return self._fn("exp2", a)
    def expm1(self, a): return self._fn("expm1", a)
    def log(self, a): return self._fn("log", a)
    def log2(self, a): return self._fn("log2", a)
    def log10(self, a): return self._fn("log10", a)
    def log1p(self, a): return self._fn("log1p", a)
    def sqrt(self, a): return self._fn("sqrt", a)
    def rsqrt(self, a): return f"1 / {self._fn('sqrt', a)}"
    def reciprocal(self, a): return f"1 / {a}"
    def sin(self, a): return self._fn("sin", a)
    def cos(self, a): return self._fn("cos", a)
    def tan(self, a): return self._fn("tan", a)
    def asin(self, a): return self._fn("asin", a)
    def acos(self, a): return self._fn("acos", a)
    def atan(self, a): return self._fn("atan", a)
    def atan2(self, a, b): return f"atan2{self.f}({a}, {b})"
    def hypot(self, a, b): return f"hypot{self.f}({a}, {b})"
    def copysign(self, a, b): return f"copysign{self.f}({a}, {b})"
    def sinh(self, a): return self._fn("sinh", a)
    def cosh(self, a): return self._fn("cosh", a)
    def tanh(self, a): return f"em_tanhf({a})" if self.f else f"tanh({a})"
    def asinh(self, a): return self._fn("asinh", a)
    def acosh(self, a): return self._fn("acosh", a)
    def atanh(self, a): return self._fn("atanh", a)
    def erf(self, a): return f"em_erff({a})" if self.f else f"erf({a})"
    def erfc(self, a): return self._fn("erfc", a)
    def floor(self, a): return self._fn("floor", a)
    def ceil(self, a): return self._fn("ceil", a)
    def trunc(self, a): return self._fn("trunc", a)

    def sign(self, a):  # 0 at NaN (both comparisons false), as the primitive says
        return a if self.dtype is D.bool_ else f"({a} > 0) - ({a} < 0)"

    def bitwise_not(self, a):
        return f"!{a}" if self.dtype is D.bool_ else f"~{a}"

    def bitwise_and(self, a, b): return f"{a} & {b}"
    def bitwise_or(self, a, b): return f"{a} | {b}"
    def bitwise_xor(self, a, b): return f"{a} ^ {b}"

    def cast(self, a, dtype: D.dtype):
        return cast_expr(self.dtype, dtype, a)

    def constant(self, value, dtype: D.dtype):
        return c_literal(value, dtype)

    def ncdf(self, a):  # the prelude's helpers (float32: branch-free, vectorizable)
        return f"em_ncdff({a})" if self.f else f"em_ncdf({a})"

    def abs(self, a):
        return self._fn("fabs", a) if self.is_float else f"{a} < 0 ? -{a} : {a}"

    def pow(self, a, b, const=None):
        if const == 2:
            return f"{a} * {a}"
        if const == 1:
            return a
        if const == 0.5:
            return self._fn("sqrt", a)
        return f"pow{self.f}({a}, {b})"


def _missing(name: str, why: str):
    def method(self, *args):
        raise NotImplementedError(f"C has no spelling of primitive {name}: {why}")
    method.__name__ = method.__qualname__ = name
    return method


for _name, _why in C_MISSING.items():
    setattr(CScalarOps, _name, _missing(_name, _why))
abc.update_abstractmethods(CScalarOps)
