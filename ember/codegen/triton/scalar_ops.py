"""The Triton spelling of the scalar primitives (codegen/prims.py): ``TritonScalarOps`` writes
each primitive as one line of a Triton kernel body, ``vN = <expr>``, and hands back the new
value (a ``Value``: the variable's name plus its dtype).

Values are Triton blocks of the compute type: float16 and bfloat16 values are float32 blocks
(loaded widened; the kernel rounds once at the store), bool is ``tl.int1``. A Python number
operand is weakly typed: it becomes a constant of its partner's dtype. Transcendental
functions are libdevice's (within the primitives' 4 ulp; ``tl.exp`` and friends lower to the
approximate PTX instructions); division and square root are the IEEE-rounded forms
(``div_rn``, ``sqrt_rn``), since Triton's ``/`` and ``tl.sqrt`` on float32 are approximate.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from ... import _dtype as D
from ..prims import ScalarOps

TL_DTYPE = {D.float32: "tl.float32", D.float64: "tl.float64", D.float16: "tl.float16",
            D.bfloat16: "tl.bfloat16", D.int8: "tl.int8", D.int16: "tl.int16",
            D.int32: "tl.int32", D.int64: "tl.int64", D.uint8: "tl.uint8", D.bool_: "tl.int1"}
HALF = (D.float16, D.bfloat16)


def compute_tl(dt: D.dtype) -> str:
    """The Triton type a value of ``dt`` computes in (half types widen to float32)."""
    return "tl.float32" if dt in HALF else TL_DTYPE[dt]


def literal(value, dt: D.dtype) -> str:
    """A Python number as a Triton constant of ``dt``'s compute type."""
    if dt is D.bool_:
        return f"tl.full([], {bool(value)}, tl.int1)"
    if dt.kind == "f":
        v = float(value)
        text = repr(v) if math.isfinite(v) else f"float('{v}')"
        return f"tl.full([], {text}, {compute_tl(dt)})"
    bits = dt.np.itemsize * 8
    v = int(value) % (1 << bits)  # integers wrap at their width
    if dt.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return f"tl.full([], {v}, {TL_DTYPE[dt]})"


class Value(str):
    """A kernel variable (its name) holding a block of ``dtype``."""

    dtype: D.dtype

    def __new__(cls, name: str, dtype: D.dtype):
        v = super().__new__(cls, name)
        v.dtype = dtype
        return v

    def __bool__(self):
        raise TypeError("a pointwise definition may not branch on a kernel value")


# primitive -> libdevice's function of that name (float kinds only)
LIBDEVICE = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "rsqrt", "pow", "sin",
             "cos", "tan", "asin", "acos", "atan", "atan2", "hypot", "sinh", "cosh", "tanh",
             "asinh", "acosh", "atanh", "erf", "erfc", "floor", "ceil", "trunc", "copysign")


class TritonScalarOps(ScalarOps):
    """Appends one assignment per primitive to ``body``; values are ``Value``s."""

    def __init__(self):
        self.body: list[str] = []

    def emit(self, expr: str, dtype: D.dtype) -> Value:
        name = f"v{len(self.body)}"
        self.body.append(f"{name} = {expr}")
        return Value(name, dtype)

    def _typed(self, *operands) -> tuple[list[str], D.dtype]:
        """The operands as expressions of one dtype: Python numbers, and numbers passed at
        launch (values of dtype None), take their partner's."""
        dts = [a.dtype for a in operands if isinstance(a, Value) and a.dtype is not None]
        if not dts:
            raise TypeError("a primitive needs at least one tensor operand")
        dt = dts[0]
        return [a if isinstance(a, Value) and a.dtype is not None else
                f"tl.cast({a}, {compute_tl(dt)})" if isinstance(a, Value) else literal(a, dt)
                for a in operands], dt

    def _binary(self, fmt: str, a, b, out: D.dtype | None = None) -> Value:
        (x, y), dt = self._typed(a, b)
        return self.emit(fmt.format(a=x, b=y), out or dt)

    def _unary(self, fmt: str, a) -> Value:
        return self.emit(fmt.format(a=a), a.dtype)

    def add(self, a, b): return self._binary("{a} + {b}", a, b)
    def sub(self, a, b): return self._binary("{a} - {b}", a, b)
    def mul(self, a, b): return self._binary("{a} * {b}", a, b)
    def div(self, a, b):  # float64 division is IEEE in PTX; float32's ``/`` is not
        (x, y), dt = self._typed(a, b)
        expr = f"{x} / {y}" if dt is D.float64 else f"tl.math.div_rn({x}, {y})"
        return self.emit(expr, dt)
    def neg(self, a): return self._unary("-{a}", a)

    def reciprocal(self, a):
        return self.div(1, a)

    def abs(self, a):
        return a if a.dtype is D.bool_ else self._unary("tl.abs({a})", a)

    def min(self, a, b):  # NaN propagates: a when a is NaN or smaller, else b (NaN or not)
        return self._binary("tl.where(({a} != {a}) | ({a} < {b}), {a}, {b})", a, b)

    def max(self, a, b):
        return self._binary("tl.where(({a} != {a}) | ({a} > {b}), {a}, {b})", a, b)

    def eq(self, a, b): return self._binary("{a} == {b}", a, b, D.bool_)
    def ne(self, a, b): return self._binary("{a} != {b}", a, b, D.bool_)
    def lt(self, a, b): return self._binary("{a} < {b}", a, b, D.bool_)
    def le(self, a, b): return self._binary("{a} <= {b}", a, b, D.bool_)
    def gt(self, a, b): return self._binary("{a} > {b}", a, b, D.bool_)
    def ge(self, a, b): return self._binary("{a} >= {b}", a, b, D.bool_)

    def where(self, c, a, b):
        (x, y), dt = self._typed(a, b)
        return self.emit(f"tl.where({c}, {x}, {y})", dt)

    def bitwise_not(self, a):  # xor with all ones (bool: with 1)
        return self.emit(f"{a} ^ {literal(-1 if a.dtype.kind != 'b' else 1, a.dtype)}",
                         a.dtype)

    def bitwise_and(self, a, b): return self._binary("{a} & {b}", a, b)
    def bitwise_or(self, a, b): return self._binary("{a} | {b}", a, b)
    def bitwise_xor(self, a, b): return self._binary("{a} ^ {b}", a, b)

    def sqrt(self, a):  # float64 sqrt is IEEE in PTX; float32's ``tl.sqrt`` is not
        return self._unary("tl.sqrt({a})" if a.dtype is D.float64 else "tl.sqrt_rn({a})", a)

    def sign(self, a):  # 0 at NaN (both comparisons false); bool: itself
        if a.dtype is D.bool_:
            return a
        t = compute_tl(a.dtype)
        return self._unary(f"({{a}} > 0).to({t}) - ({{a}} < 0).to({t})", a)

    def ncdf(self, a):
        """Phi(a) = erfc(zh + zl) / 2 ~ (erfc(zh) - zl erfc'(zh)) / 2, where -a / sqrt 2 =
        zh + zl, zh the rounded product and zl its error (an fma): erfc(zh) alone is off by
        ~a^2 / 2 half-ulps in the lower tail. Beyond +-40, Phi is 0 or 1."""
        k = 1 / math.sqrt(2)
        hi = float(np.float32(k)) if a.dtype is not D.float64 else k
        lo = float(np.float32(k - hi)) if a.dtype is not D.float64 else -4.833646656726457e-17
        xc = self.min(self.max(a, -40.0), 40.0)
        zh = self.mul(xc, -hi)
        zl = self.emit(f"tl.fma({xc}, {literal(-hi, a.dtype)}, -{zh}) + "
                       f"{xc} * {literal(-lo, a.dtype)}", a.dtype)
        tail = self.mul(self.mul(zl, 2 / math.sqrt(math.pi)),
                        self.exp(self.neg(self.mul(zh, zh))))
        return self.mul(self.sub(self.erfc(zh), tail), 0.5)

    def cast(self, a, dtype: D.dtype):
        if dtype is D.bool_:
            return self.emit(f"{a} != 0", dtype)
        if a.dtype is D.bool_:
            return self.emit(f"{a}.to({compute_tl(dtype)})", dtype)
        if dtype in HALF:  # round to the half type once, keep computing in float32
            return self.emit(f"{a}.to({TL_DTYPE[dtype]}).to(tl.float32)", dtype)
        return self.emit(f"{a}.to({TL_DTYPE[dtype]})", dtype)

    def constant(self, value, dtype: D.dtype):
        return self.emit(literal(value, dtype), dtype)


def _libdevice(name: str, arity: int):
    if arity == 1:
        def method(self, a):
            return self._unary(f"libdevice.{name}({{a}})", a)
    else:
        def method(self, a, b):
            return self._binary(f"libdevice.{name}({{a}}, {{b}})", a, b)
    method.__name__ = method.__qualname__ = name
    return method


for _name in LIBDEVICE:
    setattr(TritonScalarOps, _name, _libdevice(_name, 2 if _name in ("pow", "atan2", "hypot",
                                                                    "copysign") else 1))
abc.update_abstractmethods(TritonScalarOps)
