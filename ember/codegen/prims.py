"""The scalar primitives: the closed set of operations pointwise math is written in, and
``ScalarOps``, the protocol every backend implements them through.

An op's pointwise math is a definition over an abstract handler, ``defn(ops, x, ...)``
(``lambda ops, x: ops.exp(x)``), calling nothing but the methods below. Each backend brings
a handler: numpy eager interprets a definition primitive by primitive on whole arrays
(backends/xp_ops.py), C and Triton code generation spell each primitive as an expression
(codegen/c/scalar_ops.py). A function that can be written with these primitives is a
composition, never a new primitive; one joins the set only when no composition computes it
(or none does so as exactly), and then every backend implements it (tests/test_prims.py).
``ncdf`` is such a one: erfc(-a / sqrt 2) / 2 rounds a / sqrt 2 first, which costs up to a^2
half-ulps in the lower tail (GELU's), where the primitive stays within its bound.

Typed semantics, the same for every backend:

- Values have one dtype each. Kinds: "b" bool, "i" integer (signed or unsigned), "f"
  floating, "c" complex (numpy eager only: code generation has no complex types). A primitive
  refuses kinds outside its ``kinds``; the op above it checks dtypes first, so a definition
  never reaches that.
- float16 and bfloat16 values widen to float32 at the load and round once, to nearest even,
  at the store: every primitive on floating values sees float32 or float64, and an op's
  result is rounded once, not after every primitive (PyTorch's kernels compute so).
- Integers wrap at their width (two's complement): add, sub, mul and neg are taken modulo
  2^bits, and an integer constant or cast out of range wraps.
- ``cast(a, dtype)`` and ``constant(value, dtype)``: to a floating dtype, round to nearest
  even; floating to integer, truncate towards zero (undefined for NaN and out-of-range
  values, as in C); integer to narrower integer, wrap; anything to bool, ``a != 0``.
- Operands of a binary or ternary primitive have one dtype (the op promotes them first),
  except that a Python number is weakly typed: it takes its partner's dtype, as PyTorch's
  wrapped numbers do (``ops.sub(1, x)``). Comparisons return bool.
- A primitive's accuracy is promised for real floating results, in units in the last place
  (ulp) of the exact result: exact, correctly rounded (within half an ulp), or within N ulp.
  Complex results are the array library's. Special values (NaN, +-inf, +-0) follow C99's
  Annex F for the function of the same name, except where the semantics line says
  otherwise.
"""

from __future__ import annotations

import abc
import inspect
from typing import NamedTuple

EXACT = 0.0
CORRECTLY_ROUNDED = 0.5


class Prim(NamedTuple):
    """One primitive.

    arity:  how many values it takes (cast takes one value, constant none).
    kinds:  the dtype kinds of the values it accepts (see the module docstring).
    ulp:    its accuracy promise: EXACT, CORRECTLY_ROUNDED, or the bound N of "within N ulp".
    static: its parameters that are no values but Python constants (cast's dtype).
    """

    name: str
    arity: int
    kinds: str
    ulp: float
    semantics: str
    static: tuple = ()

    @property
    def accuracy(self) -> str:
        if self.ulp == EXACT:
            return "exact"
        if self.ulp == CORRECTLY_ROUNDED:
            return "correctly rounded"
        return f"<= {self.ulp:g} ulp"


# A transcendental function is within 4 ulp of the exact result on every backend: numpy's
# SIMD kernels (SVML on AVX-512), libm, and the branch-free float32 helpers of the C prelude
# (em_expf 1.01 ulp, em_tanhf 2 ulp, em_erff 2.5 ulp) all keep that bound.
TRANSCENDENTAL = 4.0

_ROWS = (
    # name          arity kinds  accuracy           semantics
    ("add",         2, "ifc", CORRECTLY_ROUNDED, "a + b"),
    ("sub",         2, "ifc", CORRECTLY_ROUNDED, "a - b"),
    ("mul",         2, "ifc", CORRECTLY_ROUNDED, "a * b"),
    ("div",         2, "fc", CORRECTLY_ROUNDED, "a / b, IEEE (x / 0 is +-inf, 0 / 0 NaN)"),
    ("neg",         1, "ifc", EXACT, "-a"),
    ("reciprocal",  1, "fc", CORRECTLY_ROUNDED, "1 / a"),
    ("abs",         1, "ifc", EXACT, "|a|; complex: the magnitude, a real value"),
    ("min",         2, "bif", EXACT, "the smaller of a and b (b if equal: min(+0, -0) = -0); "
                                     "NaN when either is NaN"),
    ("max",         2, "bif", EXACT, "the larger of a and b (b if equal: max(-0, +0) = +0); "
                                     "NaN when either is NaN"),
    ("eq",          2, "bifc", EXACT, "a == b, a bool (NaN equals nothing)"),
    ("ne",          2, "bifc", EXACT, "a != b, a bool (NaN differs from everything)"),
    ("lt",          2, "bif", EXACT, "a < b, a bool (false when either is NaN)"),
    ("le",          2, "bif", EXACT, "a <= b, a bool (false when either is NaN)"),
    ("gt",          2, "bif", EXACT, "a > b, a bool (false when either is NaN)"),
    ("ge",          2, "bif", EXACT, "a >= b, a bool (false when either is NaN)"),
    ("where",       3, "bifc", EXACT, "a where the bool c holds, else b: where(c, a, b)"),
    ("bitwise_not", 1, "bi", EXACT, "~a, every bit flipped; bool: not a"),
    ("bitwise_and", 2, "bi", EXACT, "a & b, bit by bit (bool: a and b)"),
    ("bitwise_or",  2, "bi", EXACT, "a | b, bit by bit (bool: a or b)"),
    ("bitwise_xor", 2, "bi", EXACT, "a ^ b, bit by bit (bool: a != b)"),
    ("exp",         1, "fc", TRANSCENDENTAL, "e^a"),
    ("exp2",        1, "fc", TRANSCENDENTAL, "2^a"),
    ("expm1",       1, "fc", TRANSCENDENTAL, "e^a - 1, accurate near a = 0"),
    ("log",         1, "fc", TRANSCENDENTAL, "the natural logarithm"),
    ("log2",        1, "fc", TRANSCENDENTAL, "the base-2 logarithm"),
    ("log10",       1, "fc", TRANSCENDENTAL, "the base-10 logarithm"),
    ("log1p",       1, "fc", TRANSCENDENTAL, "log(1 + a), accurate near a = 0"),
    ("sqrt",        1, "fc", CORRECTLY_ROUNDED, "the square root (NaN below zero, -0 at -0)"),
    ("rsqrt",       1, "fc", 2.0, "1 / sqrt(a)"),
    ("pow",         2, "fc", TRANSCENDENTAL, "a^b, C's pow (pow(a, 0) = 1 even for NaN a)"),
    ("sin",         1, "fc", TRANSCENDENTAL, "the sine (radians)"),
    ("cos",         1, "fc", TRANSCENDENTAL, "the cosine (radians)"),
    ("tan",         1, "fc", TRANSCENDENTAL, "the tangent (radians)"),
    ("asin",        1, "fc", TRANSCENDENTAL, "the arc sine, in [-pi/2, pi/2]"),
    ("acos",        1, "fc", TRANSCENDENTAL, "the arc cosine, in [0, pi]"),
    ("atan",        1, "fc", TRANSCENDENTAL, "the arc tangent, in [-pi/2, pi/2]"),
    ("atan2",       2, "f", TRANSCENDENTAL, "the angle of the point (b, a), in [-pi, pi]"),
    ("hypot",       2, "f", TRANSCENDENTAL, "sqrt(a^2 + b^2), without overflow on the way"),
    ("sinh",        1, "fc", TRANSCENDENTAL, "the hyperbolic sine"),
    ("cosh",        1, "fc", TRANSCENDENTAL, "the hyperbolic cosine"),
    ("tanh",        1, "fc", TRANSCENDENTAL, "the hyperbolic tangent"),
    ("asinh",       1, "fc", TRANSCENDENTAL, "the inverse hyperbolic sine"),
    ("acosh",       1, "fc", TRANSCENDENTAL, "the inverse hyperbolic cosine (NaN below 1)"),
    ("atanh",       1, "fc", TRANSCENDENTAL, "the inverse hyperbolic tangent"),
    ("erf",         1, "f", TRANSCENDENTAL, "the error function"),
    ("erfc",        1, "f", TRANSCENDENTAL, "1 - erf(a), relatively accurate in the upper tail"),
    ("ncdf",        1, "f", 8.0,
     "the standard normal CDF, erfc(-a / sqrt 2) / 2, relatively accurate in the lower tail"),
    ("floor",       1, "f", EXACT, "the largest integer <= a (a float)"),
    ("ceil",        1, "f", EXACT, "the smallest integer >= a (a float)"),
    ("trunc",       1, "f", EXACT, "a rounded towards zero (a float)"),
    ("copysign",    2, "f", EXACT, "|a| with the sign bit of b (-0 and NaN's sign bit count)"),
    ("sign",        1, "bif", EXACT, "-1, 0 or 1 in a's dtype; 0 at +-0 and NaN; bool: a"),
    ("cast",        1, "bifc", CORRECTLY_ROUNDED, "a in dtype (see the module docstring)"),
    ("constant",    0, "bifc", CORRECTLY_ROUNDED, "the Python number value in dtype"),
)
_STATIC = {"cast": ("dtype",), "constant": ("value", "dtype")}

PRIMS: dict[str, Prim] = {r[0]: Prim(*r, static=_STATIC.get(r[0], ())) for r in _ROWS}

_ARGS = {0: (), 1: ("a",), 2: ("a", "b"), 3: ("c", "a", "b")}


def parameters(p: Prim) -> tuple[str, ...]:
    """The parameter names of primitive ``p``'s method (after ``self``)."""
    return _ARGS[p.arity] + p.static


class ScalarOps(abc.ABC):
    """The handler a pointwise definition computes with: one abstract method per primitive of
    ``PRIMS`` (the module docstring gives their typed semantics). What a value is belongs to
    the backend: an array (numpy eager), a C expression (code generation). A subclass
    implements every primitive; a backend that cannot must say so in a table its tests read
    (see codegen/c/scalar_ops.py)."""


def _abstract(p: Prim):
    names = parameters(p)

    def method(self, *args):
        raise NotImplementedError(f"{type(self).__name__} does not implement {p.name}")
    method.__name__ = method.__qualname__ = p.name
    method.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)] +
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    method.__doc__ = f"{p.semantics} ({', '.join(names) or 'no values'}; kinds {p.kinds}; " \
                     f"{p.accuracy})."
    return abc.abstractmethod(method)


for _p in PRIMS.values():
    setattr(ScalarOps, _p.name, _abstract(_p))
abc.update_abstractmethods(ScalarOps)
del _p
