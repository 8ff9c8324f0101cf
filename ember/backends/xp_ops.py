"""Eager pointwise math: the scalar primitives (codegen/prims.py) computed on whole arrays
through an array module ``xp``, and ``interpret``, which turns a definition ``defn(ops, x, ...)``
into a kernel ``impl(xp, x, ...)`` of the op table.

Only ``xp.`` functions, array methods and Python's operators compute here, so a CuPy array
module gets the same handler; the special functions numpy lacks (erf, erfc, ncdf) come from
a per-module library table. A primitive that is one function of ``xp`` is that function
itself, bound on the handler: ``ops.exp(x)`` is ``xp.exp(x)`` with no Python frame in between,
so an op defined as one primitive costs one array call, and a composition costs its array
calls and nothing else. Arithmetic, comparisons and bit operations are Python's operators
(``operator.add``), which array modules implement as exactly those functions and through which
numpy reuses the memory of a temporary operand (``add(x, mul(y, z))`` allocates one array, not
two: a third faster on large arrays than calling ``np.add`` and ``np.multiply``).

The values a definition sees are the arrays the dispatcher hands the kernel, already in the
op's compute type (float16 and bfloat16 widened to float32; the dispatcher rounds the result
once when it stores it), so the primitives' typed semantics are the array module's: integers
wrap, a Python number operand is weakly typed (NEP 50). Where the array module differs from a
primitive's semantics, the handler's method adapts it (sign at NaN and on bool).
"""

from __future__ import annotations

import abc
import functools
import inspect
import operator
from collections.abc import Callable

from .. import _dtype as D
from ..codegen.prims import PRIMS, ScalarOps
from . import special

# primitive -> the Python operator computing it (an array module's own function behind it)
OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "neg": operator.neg, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge, "bitwise_not": operator.invert,
    "bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
}
# primitive -> the array module's function computing exactly it
DIRECT = {
    "reciprocal": "reciprocal", "abs": "abs", "where": "where",
    "min": "minimum", "max": "maximum",  # both propagate NaN
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
    "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "pow": "power",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos",
    "atan": "arctan", "atan2": "arctan2", "hypot": "hypot", "copysign": "copysign",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
}

# primitives an array module lacks, by the module's name (numpy, or a backend's restricted
# namespace of it): ``fn(x)`` on that module's arrays; a callable entry builds the table on
# first use (CuPy's comes from cupyx, imported only then)
def _cupy_library() -> dict[str, Callable]:
    from cupyx.scipy import special as cupy_special
    # (CuPy's ncdf is the plain erfc form: the GPU computes definitions as Triton kernels,
    # whose spelling corrects the tail; this handler serves complex and fallback paths)
    return {"erf": cupy_special.erf, "erfc": cupy_special.erfc, "ncdf": cupy_special.ndtr}


_NUMPY_LIBRARY = {"erf": special.erf, "erfc": special.erfc, "ncdf": special.ncdf}
LIBRARIES: dict[str, dict[str, Callable] | Callable] = {
    "numpy": _NUMPY_LIBRARY, "ember.backends.cpu.xp": _NUMPY_LIBRARY,
    "cupy": _cupy_library, "ember.backends.cuda.xp": _cupy_library,
}
LIBRARY_PRIMS = ("erf", "erfc", "ncdf")


class XpOps(ScalarOps):
    """The primitives on arrays of the array module ``xp``."""

    def __init__(self, xp, library: dict[str, Callable] | None = None):
        self.xp = xp
        if library is None:
            library = LIBRARIES.get(xp.__name__, {})
            library = library() if callable(library) else library
        self.library = dict(library)
        # the fast binding: ops.<prim> is the operator, the module's function or the
        # library's itself
        for prim, fn in OPERATORS.items():
            setattr(self, prim, fn)
        for prim, fn in DIRECT.items():
            setattr(self, prim, getattr(xp, fn))
        for prim, fn in self.library.items():
            setattr(self, prim, fn)

    def rsqrt(self, a):
        return 1 / self.xp.sqrt(a)

    def sign(self, a):
        if a.dtype.kind == "b":
            return a.copy()
        xp = self.xp
        s = xp.sign(a)
        if a.dtype.kind == "f":  # numpy: sign(nan) = nan; the primitive (PyTorch): 0
            s = xp.where(xp.isnan(a), xp.zeros((), a.dtype), s)
        return s

    def cast(self, a, dtype: D.dtype):
        return a.astype(dtype.np)

    def constant(self, value, dtype: D.dtype):
        return self.xp.asarray(value).astype(dtype.np)  # integers wrap, floats round


def _forward(prim: str, fn: str):
    """The class-level method of a directly bound primitive (instances shadow it)."""
    def method(self, *args):
        return getattr(self.xp, fn)(*args)
    method.__name__ = method.__qualname__ = prim
    method.__doc__ = PRIMS[prim].semantics
    return method


def _from_library(prim: str):
    def method(self, a):
        fn = self.library.get(prim)
        if fn is None:
            raise NotImplementedError(f"{prim}: no library kernel for {self.xp.__name__} arrays")
        return fn(a)
    method.__name__ = method.__qualname__ = prim
    method.__doc__ = PRIMS[prim].semantics
    return method


for _prim, _fn in DIRECT.items():
    setattr(XpOps, _prim, _forward(_prim, _fn))
for _prim, _fn in OPERATORS.items():
    setattr(XpOps, _prim, staticmethod(_fn))
for _prim in LIBRARY_PRIMS:
    setattr(XpOps, _prim, _from_library(_prim))
abc.update_abstractmethods(XpOps)

_HANDLERS: dict = {}


def handler(xp) -> XpOps:
    """The primitives' handler of array module ``xp`` (one per module)."""
    ops = _HANDLERS.get(xp)
    if ops is None:
        ops = _HANDLERS[xp] = XpOps(xp)
    return ops


class _Recorder:
    """A stand-in handler that records the primitives a definition calls."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name not in PRIMS:
            raise AttributeError(name)

        def record(*args):
            value = object()
            self.calls.append((name, args, value))
            return value
        return record


def one_primitive(defn: Callable) -> str | None:
    """The primitive ``defn`` is, when it is one primitive applied to its operands in order
    (``lambda ops, x: ops.exp(x)``); else None. Definitions are pure: what they compute
    depends on their arguments alone, so one trial run on stand-ins tells."""
    params = list(inspect.signature(defn).parameters.values())[1:]
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or
           p.default is not p.empty for p in params):
        return None
    rec = _Recorder()
    operands = tuple(object() for _ in params)
    try:
        out = defn(rec, *operands)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        # a definition that looks at its values (dtype, shape): not a bare primitive
        return None
    if len(rec.calls) == 1:
        name, args, value = rec.calls[0]
        if out is value and len(args) == len(operands) and \
                all(a is b for a, b in zip(args, operands)):
            return name
    return None


# array module -> ``compile(defn, xp)``, for backends whose pointwise kernels are generated
# code (CUDA: one Triton kernel per definition) rather than the handler's array calls
COMPILERS: dict = {}
_BOUND: list = []  # every Bound, so that set_compiler can rebind them


def set_compiler(xp, compile: Callable | None) -> None:
    """Make ``compile(defn, xp)`` (None: the handler) build ``xp``'s pointwise kernels."""
    if compile is None:
        COMPILERS.pop(xp, None)
    else:
        COMPILERS[xp] = compile
    for bound in _BOUND:
        bound.pop(xp, None)


class Bound(dict):
    """Array module -> ``defn`` bound to that module's handler: ``kernel(*args, **kwargs)``.
    Built on first use; a one-primitive definition binds to the handler's function itself
    (``xp.exp`` for exp), so calling it costs what calling numpy costs. A module with a
    compiler in ``COMPILERS`` gets the compiler's kernel instead."""

    def __init__(self, defn: Callable):
        super().__init__()
        self.defn = defn
        self.prim = one_primitive(defn)
        _BOUND.append(self)

    def __missing__(self, xp):
        compile = COMPILERS.get(xp)
        if compile is not None:
            kernel = self[xp] = compile(self.defn, xp)
            return kernel
        ops = handler(xp)
        kernel = getattr(ops, self.prim) if self.prim else functools.partial(self.defn, ops)
        self[xp] = kernel
        return kernel


def interpret(defn: Callable) -> Callable:
    """``impl(xp, *args, **kwargs)``: ``defn(ops, *args, **kwargs)`` run on ``xp``'s handler.

    The kernel keeps ``defn``'s signature after its first parameter (``ops`` stands where the
    op table's kernels have ``xp``), so it registers as an op's impl; ``impl.kernels`` is its
    ``Bound`` map, for callers that look the kernel up themselves. A definition of one to
    four required positional parameters gets a kernel of that many (called positionally, as
    the dispatcher calls tensor parameters), which saves packing ``*args, **kwargs`` on every
    call. ``defn`` returns a value some primitive computed (never an operand as it came: the
    op table wraps the result as a new tensor)."""
    kernels = Bound(defn)
    params = list(inspect.signature(defn).parameters.values())[1:]
    plain = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and
                p.default is p.empty for p in params)
    if plain and len(params) == 1:
        def impl(xp, a):
            return kernels[xp](a)
    elif plain and len(params) == 2:
        def impl(xp, a, b):
            return kernels[xp](a, b)
    elif plain and len(params) == 3:
        def impl(xp, a, b, c):
            return kernels[xp](a, b, c)
    elif plain and len(params) == 4:
        def impl(xp, a, b, c, d):
            return kernels[xp](a, b, c, d)
    else:
        def impl(xp, *args, **kwargs):
            return kernels[xp](*args, **kwargs)
    impl = functools.wraps(defn)(impl)
    impl.kernels = kernels
    return impl


# ---------------------------------------------------------------------- arithmetic
# add, sub, mul and div as definitions, for backends that compile them (CUDA: one Triton
# kernel): ops/binary.py's impls run them out of place, a backend's "inplace" overrides into
# the left operand's memory; numpy keeps its ufuncs (and the CPU backend its threaded and
# fused overrides)
SUM = interpret(lambda ops, a, b: ops.add(a, b))
SUM_SCALED = interpret(lambda ops, a, b, alpha: ops.add(a, ops.mul(b, alpha)))
DIFFERENCE = interpret(lambda ops, a, b: ops.sub(a, b))
DIFFERENCE_SCALED = interpret(lambda ops, a, b, alpha: ops.sub(a, ops.mul(b, alpha)))
PRODUCT = interpret(lambda ops, a, b: ops.mul(a, b))
QUOTIENT = interpret(lambda ops, a, b: ops.div(a, b))
for _fn, _name in ((SUM, "add"), (SUM_SCALED, "add_scaled"), (DIFFERENCE, "sub"),
                   (DIFFERENCE_SCALED, "sub_scaled"), (PRODUCT, "mul"), (QUOTIENT, "div")):
    _fn.kernels.defn.__name__ = _name
# op -> (its definition, the one with alpha or None, whether it takes integer operands: div
# is true division, its impl promotes integers to float first)
ARITHMETIC = {"add": (SUM, SUM_SCALED, True), "sub": (DIFFERENCE, DIFFERENCE_SCALED, True),
              "mul": (PRODUCT, None, True), "div": (QUOTIENT, None, False)}


# ---------------------------------------------------------------------- conversions
def _cast(ops, x, dtype):
    return ops.cast(x, dtype)


_CAST = interpret(_cast)
_HALVES = frozenset((D.float16.np, D.bfloat16.np))


def compiled_cast(xp, a, dtype: D.dtype):
    """``a`` converted to ember dtype ``dtype`` by ``xp``'s compiled kernel of the ``cast``
    primitive (one launch; round to nearest even, float to integer towards zero, to bool
    ``!= 0``), or None where ``xp`` compiles no definitions, where PyTorch's conversion is no
    single rounding (float64 to a half type rounds through float32), where the dtypes are
    complex or float8 (casting.py's rules), or where ``a`` is not C-contiguous (``astype``
    keeps a layout, as PyTorch's conversions do)."""
    src = a.dtype
    if xp not in COMPILERS or src == dtype.np or not a.flags.c_contiguous or \
            src.kind == "c" or dtype.is_complex or dtype.is_float8 or src in _FLOAT8 or \
            (src == D.float64.np and dtype.np in _HALVES):
        return None
    return _CAST(xp, a, dtype)


_FLOAT8 = frozenset(d.np for d in D.FLOAT8)


def convert(xp, a, dtype: D.dtype):
    """``a`` as ember dtype ``dtype``: ``compiled_cast`` where it applies, else the array
    library's conversion."""
    if xp in COMPILERS and (r := compiled_cast(xp, a, dtype)) is not None:
        return r
    return a.astype(dtype.np)
