"""Pointwise ops: the unary ones, defined by one table (name, math, derivative, dtypes), and
``promoted_op``, the registration helper of the binary and ternary ones (binary.py), which
promotes their operands itself.

An op's math is a definition over the scalar primitives (codegen/prims.py),
``lambda ops, x: ops.exp(x)``, which numpy eager interprets (backends/xp_ops.py); the few
special functions that are no primitive and no composition of them (erfinv, lgamma, digamma)
are library kernels (``Library``).

Gradients follow PyTorch's complex convention: for a holomorphic f the input gradient is
``grad * conj(f'(x))`` (see ``Unary``).
"""

from __future__ import annotations

import collections
import functools
import inspect
import math
from typing import Callable, NamedTuple

import numpy as np

from .. import _dtype as D
from ..backends import special
from ..backends.casting import cast
from ..backends.xp_ops import COMPILERS, convert, interpret
from .bind import tensor_method
from ..backends.base import ARRAY_TYPES
from .arguments import arg_type_error
from .pointwise_defn import PointwiseDefn, fixed as fixed_defn
from .registry import ALWAYS_BOOL, DEFAULT, INT_TO_FLOAT, OPS, alias_all, op


POINTWISE = ("pointwise",)
LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def kind(a: np.ndarray) -> str:
    """The dtype category of an array: "b" bool, "i" integer (signed or not), "f" floating
    (bfloat16 included: numpy files it under "V"), "c" complex."""
    k = a.dtype.kind
    return "i" if k == "u" else "f" if k == "V" else k


def type_name(a: np.ndarray) -> str:
    """PyTorch's scalar-type name of an array's dtype ('Float', 'Long', ...)."""
    return D.TYPE_NAME[D.from_np(a.dtype)]


def not_implemented(name: str, a: np.ndarray) -> NotImplementedError:
    return NotImplementedError(f'"{name}_cpu" not implemented for \'{type_name(a)}\'')


# ---------------------------------------------------------------------- multi-operand ops
# Binary and ternary ops promote their operands in the impl rather than in the dispatcher:
# PyTorch's rules for them depend on what the dispatcher's promotion erases (whether an
# operand was a Python scalar, its dtype before promotion, keyword arguments such as div's
# rounding_mode).
_HALF = (D.float16, D.bfloat16, *D.FLOAT8)  # computed in float32, rounded once at the end
_SCALARS = (bool, int, float, complex)
_CATEGORY = {"b": "b", "u": "i", "i": "i", "f": "f", "c": "c"}  # dtype.kind -> kind()


def _check_operand(v, name, opname, tensor_only, pos) -> None:
    """PyTorch's TypeError for an operand that is neither a tensor (an array here, or a
    metadata stand-in in run_meta) nor, where the parameter takes one, a Python number."""
    if type(v) in ARRAY_TYPES or isinstance(getattr(v, "dtype", None), D.dtype):
        return
    if name in tensor_only or not isinstance(v, _SCALARS):
        d = OPS.get(opname)
        if d is not None and d.params[pos] == name:  # tagged: `x + "a"` lets Python answer
            raise arg_type_error(d, pos, False, f"Tensor, not {type(v).__name__}")
        raise TypeError(f"{opname}(): argument '{name}' (position {pos + 1}) must be Tensor, "
                        f"not {type(v).__name__}")


def result_dtype(opname: str, names, values, promote, tensor_only=()):
    """PyTorch's result dtype of ``values`` (arrays of tensors, Python scalars) and the dtype
    to compute in (float32 for float16/bfloat16)."""
    for pos, (n, v) in enumerate(zip(names, values)):
        if v is not None:
            _check_operand(v, n, opname, tensor_only, pos)
    rt = D.result_type(*values)
    if promote == INT_TO_FLOAT and rt.kind in "uib":
        rt = D.get_default_dtype()
    return rt, (D.float32 if rt in _HALF else rt)


def to_compute(xp, v, npdt):
    if v is None:
        return None
    if type(v) in ARRAY_TYPES:
        return v if v.dtype == npdt else convert(xp, v, D._FROM_NP[npdt])
    # Python scalars take the compute type (integers wrap, as PyTorch's wrapped numbers do)
    return xp.asarray(v).astype(npdt)


_LAUNCH_NUMBERS = (int, float, bool)


def promoted_op(promote=DEFAULT, *, tensor_only=(), kinds="bifc", refuse=None, check=None,
                promote_args=None, name=None, **options):
    """Register a pointwise op whose impl receives its operands promoted to one compute type,
    with a meta function (broadcast shape, result dtype) that needs no data.

    promote:      DEFAULT, INT_TO_FLOAT, ALWAYS_BOOL, or ``promote(kwargs) -> kind``; None
                  leaves the operands alone (the impl decides its dtype).
    tensor_only:  parameters that refuse Python scalars (TypeError, like PyTorch).
    kinds:        dtype categories (see pointwise.kind) the compute type may have; others
                  raise ``refuse[category]`` or PyTorch's NotImplementedError.
    check:        ``check(raw, rt, kwargs)`` sees the unpromoted operands by name first.
    The result is cast to the result dtype (bool for ALWAYS_BOOL).
    """
    def register(fn):
        params = list(inspect.signature(fn).parameters.values())[1:]
        names = [p.name for p in params]
        tensors = [p.name for p in params if "Tensor" in str(p.annotation)]
        pnames = list(promote_args or tensors)
        ppos = [names.index(n) for n in pnames]
        opname = name or fn.__name__.rstrip("_")

        last = max(ppos) if ppos else -1
        rest = ppos[1:]
        fixed = None if callable(promote) else promote
        # a definition over the primitives (interpret), or an impl that calls compiled ones
        # where the backend compiles them. ``compiled=True`` (add, sub, mul, div, where):
        # where the backend compiles, Python numbers are passed to the kernel at launch as
        # they are (no device array made for them), and meet a tensor operand in its compute
        # type (a half tensor's float32, as PyTorch's kernels take them); ``"rounded"`` (the
        # comparisons): the same except beside half tensors, whose comparisons see the
        # number rounded to the half type first (PyTorch's do)
        passes_numbers = options.pop("compiled", False)
        defined = hasattr(fn, "kernels") or passes_numbers
        # promoted operands without a default may not be None (``x.mul(None)``)
        required = [(j, n) for j, (n, p) in enumerate(zip(pnames, (params[i] for i in ppos)))
                    if p.default is p.empty]

        @functools.wraps(fn)
        def impl(xp, *args, **kwargs):
            if fixed is not None and check is None and len(args) > last:
                # hot path: every promoted operand an array of one float dtype, nothing to cast
                first = args[ppos[0]]
                if type(first) in ARRAY_TYPES:
                    dt0 = first.dtype
                    for i in rest:
                        v = args[i]
                        if type(v) not in ARRAY_TYPES or v.dtype != dt0:
                            break
                    else:
                        rt = D._FROM_NP.get(dt0)
                        if rt is not None and rt.kind in "fc" and rt not in _HALF and \
                                _CATEGORY[rt.kind] in kinds:
                            res = fn(xp, *args, **kwargs)
                            if type(res) not in ARRAY_TYPES:
                                res = xp.asarray(res)
                            if fixed == ALWAYS_BOOL:
                                return res if res.dtype == np.bool_ else res.astype(np.bool_)
                            return res if res.dtype == dt0 else res.astype(dt0)
            args = list(args)
            raw = [args[i] if i < len(args) else None for i in ppos]
            for j, n in required:
                if raw[j] is None and not (n in kwargs and kwargs[n] is not None):
                    _check_operand(None, n, opname, (n,), ppos[j])  # raises the TypeError
            k = promote(kwargs) if callable(promote) else promote
            if k is None or all(v is None for v in raw):
                return fn(xp, *args, **kwargs)
            first = raw[0]
            if type(first) in ARRAY_TYPES and all(
                    type(v) in ARRAY_TYPES and v.dtype == first.dtype for v in raw):
                # the common case, operands of one dtype: no categories to weigh
                rt = D._FROM_NP[first.dtype]
                if k == INT_TO_FLOAT and rt.kind in "uib":
                    rt = D.get_default_dtype()
                ct = D.float32 if rt in _HALF else rt
            else:
                rt, ct = result_dtype(opname, pnames, raw, k, tensor_only)
            if ct is not rt and defined and rt in (D.float16, D.bfloat16) and xp in COMPILERS:
                ct = rt  # the compiled kernel widens half operands and rounds once itself
            if check is not None:
                check(dict(zip(pnames, raw)), rt, kwargs)
            cnp = ct.np
            c = _CATEGORY[ct.kind]
            if c not in kinds:
                if refuse and c in refuse:
                    raise refuse[c][0](refuse[c][1].format(T=D.TYPE_NAME[rt]))
                raise not_implemented(opname, xp.empty(0, rt.np))
            # (a number is weakly typed in a kernel: it takes the dtype of an array beside it)
            compiled = passes_numbers and xp in COMPILERS and ct.kind in "fiu" and \
                any(type(v) in ARRAY_TYPES for v in raw) and \
                (passes_numbers is True or ct not in _HALF)
            for i in ppos:
                if i < len(args):
                    v = args[i]
                    if compiled and type(v) in _LAUNCH_NUMBERS and -2**63 <= v < 2**63:
                        continue  # a compiled kernel takes the number at launch, weakly typed
                    args[i] = to_compute(xp, v, cnp)
            res = fn(xp, *args, **kwargs)
            if isinstance(res, np.generic):  # numpy hands back scalars for 0-d operands
                res = xp.asarray(res)
            if type(res) not in ARRAY_TYPES:
                return res
            out = D.bool_ if k == ALWAYS_BOOL else rt
            return res if res.dtype == out.np else cast(res, out)

        d = op(opname, tags=POINTWISE, **options)(impl)
        d.operand_pos = tuple(ppos)
        if hasattr(fn, "kernels"):  # a definition: the compiler lowers it too
            d.pointwise_defn = fixed_defn(fn.kernels.defn, names, pnames,
                                          compute="operands" if promote == ALWAYS_BOOL
                                          else "out",
                                          kinds=_defn_kinds(kinds))
        if promote is not None:
            d.def_meta(_pointwise_meta(opname, params, tensors, pnames, promote, tensor_only))
        return d
    return register


def _defn_kinds(kinds: str) -> str:
    """The compute-dtype categories a definition lowers, from an op's eager ``kinds``
    (complex values have no loop-IR type)."""
    return kinds.replace("c", "")


def _pointwise_meta(opname, params, tensors, pnames, promote, tensor_only):
    sig = inspect.Signature(params)

    def meta(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        v = bound.arguments
        shapes = [tuple(v[n].shape) for n in tensors if hasattr(v[n], "shape")]
        if all(v[n] is None for n in pnames):
            raise RuntimeError(f"{opname}: output shape depends on the input's values")
        k = promote(bound.kwargs) if callable(promote) else promote
        rt, _ = result_dtype(opname, pnames, [v[n] for n in pnames], k, tensor_only)
        return tuple(np.broadcast_shapes(*shapes)), (D.bool_ if k == ALWAYS_BOOL else rt)
    return meta


# ---------------------------------------------------------------------- unary table
class Library(NamedTuple):
    """The math of an op that is a special function of the backend's library, not a
    composition of primitives: ``fn(x)`` on the compute-type array."""

    fn: Callable


class Unary(NamedTuple):
    """One row of the table.

    math:   the op's math, ``defn(ops, x)`` over the scalar primitives (codegen/prims.py), or
            a ``Library`` kernel.
    deriv:  ``deriv(g, x, y)``, the input gradient ``g * f'(x)`` in ember ops (x the input,
            y the output), or "zero" (piecewise constant), or None (not differentiable).
            For complex tensors it receives conj(x) and conj(y): every function here has
            f(conj z) = conj f(z), so that yields PyTorch's ``g * conj(f'(x))``.
    needs:  what ``deriv`` reads: "x", "y" or None.
    kinds:  the dtype categories the kernel accepts once promotion has run ("bifc").
    refuse: {category: (exception type, message)} where PyTorch's error differs from
            '"<op>_cpu" not implemented for ...'.
    raw:    pass x and y unconjugated: on a branch cut sqrt(conj w) is not conj(sqrt(w)),
            so those rows conjugate f'(x) themselves (``_cj``), as PyTorch does.
    """

    math: Callable | Library
    deriv: Callable | str | None = None
    needs: str | None = None
    promote: str = INT_TO_FLOAT
    kinds: str = "fc"
    refuse: dict | None = None
    raw: bool = False


def _no_complex(name):
    return {"c": (NotImplementedError, f"{name} is not supported for complex inputs")}


_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
_SIGN_COMPLEX = ("Unlike NumPy, torch.sign is not intended to support complex numbers. Please "
                 "use torch.sgn instead.")


def _trigamma(x):
    return polygamma(1, x)


def _cj(t):
    return t.conj() if t.is_complex() else t


def _acosh_deriv(x):
    # complex: the principal branch's derivative is 1 / (sqrt(z - 1) sqrt(z + 1)), not
    # rsqrt(z^2 - 1); real: PyTorch's rsqrt(x^2 - 1) (finite even where acosh is NaN)
    if x.is_complex():
        return ((x - 1).sqrt() * (x + 1).sqrt()).reciprocal()
    return (x * x - 1).rsqrt()


def _sigmoid(ops, x):
    # 1 / (1 + exp(-x)) is exact enough and saturates correctly at both ends
    return ops.div(1, ops.add(1, ops.exp(ops.neg(x))))


def _frac(ops, x):
    return ops.sub(x, ops.trunc(x))


UNARY = {
    "exp": Unary(lambda ops, x: ops.exp(x), lambda g, x, y: g * y, "y"),
    "exp2": Unary(lambda ops, x: ops.exp2(x), lambda g, x, y: g * y * LN2, "y"),
    "expm1": Unary(lambda ops, x: ops.expm1(x), lambda g, x, y: g * (y + 1), "y"),
    "log": Unary(lambda ops, x: ops.log(x), lambda g, x, y: g / x, "x"),
    "log2": Unary(lambda ops, x: ops.log2(x), lambda g, x, y: g / (x * LN2), "x"),
    "log10": Unary(lambda ops, x: ops.log10(x), lambda g, x, y: g / (x * LN10), "x"),
    "log1p": Unary(lambda ops, x: ops.log1p(x), lambda g, x, y: g / (x + 1), "x"),
    "sqrt": Unary(lambda ops, x: ops.sqrt(x), lambda g, x, y: g / (2 * y), "y"),
    "rsqrt": Unary(lambda ops, x: ops.rsqrt(x), lambda g, x, y: -0.5 * g * y * y * y, "y"),
    "reciprocal": Unary(lambda ops, x: ops.reciprocal(x), lambda g, x, y: -g * y * y, "y"),
    "sin": Unary(lambda ops, x: ops.sin(x), lambda g, x, y: g * x.cos(), "x"),
    "cos": Unary(lambda ops, x: ops.cos(x), lambda g, x, y: -g * x.sin(), "x"),
    "tan": Unary(lambda ops, x: ops.tan(x), lambda g, x, y: g * (1 + y * y), "y"),
    "asin": Unary(lambda ops, x: ops.asin(x), lambda g, x, y: g * _cj((1 - x * x).rsqrt()),
                  "x", raw=True),
    "acos": Unary(lambda ops, x: ops.acos(x), lambda g, x, y: -g * _cj((1 - x * x).rsqrt()),
                  "x", raw=True),
    "atan": Unary(lambda ops, x: ops.atan(x), lambda g, x, y: g / (1 + x * x), "x"),
    "sinh": Unary(lambda ops, x: ops.sinh(x), lambda g, x, y: g * x.cosh(), "x"),
    "cosh": Unary(lambda ops, x: ops.cosh(x), lambda g, x, y: g * x.sinh(), "x"),
    "tanh": Unary(lambda ops, x: ops.tanh(x), lambda g, x, y: g * (1 - y * y), "y"),
    "asinh": Unary(lambda ops, x: ops.asinh(x), lambda g, x, y: g * _cj((x * x + 1).rsqrt()),
                   "x", raw=True),
    "acosh": Unary(lambda ops, x: ops.acosh(x), lambda g, x, y: g * _cj(_acosh_deriv(x)),
                   "x", raw=True),
    "atanh": Unary(lambda ops, x: ops.atanh(x), lambda g, x, y: g / (1 - x * x), "x"),
    "sigmoid": Unary(_sigmoid, lambda g, x, y: g * (y * (1 - y)), "y"),
    "erf": Unary(lambda ops, x: ops.erf(x),
                 lambda g, x, y: g * (-x * x).exp() * TWO_OVER_SQRT_PI, "x", kinds="f"),
    "erfc": Unary(lambda ops, x: ops.erfc(x),
                  lambda g, x, y: g * (-x * x).exp() * -TWO_OVER_SQRT_PI, "x", kinds="f"),
    "erfinv": Unary(Library(special.erfinv),
                    lambda g, x, y: g * (y * y).exp() * (math.sqrt(math.pi) / 2), "y",
                    kinds="f"),
    "lgamma": Unary(Library(special.lgamma), lambda g, x, y: g * x.digamma(), "x", kinds="f"),
    "digamma": Unary(Library(special.digamma), lambda g, x, y: g * _trigamma(x), "x",
                     kinds="f"),
    "neg": Unary(lambda ops, x: ops.neg(x), lambda g, x, y: -g, None, DEFAULT, "ifc",
                 {"b": (RuntimeError, _NEG_BOOL)}),
    # the primitive has PyTorch's sign(nan) = 0 and sign(bool) = itself
    "sign": Unary(lambda ops, x: ops.sign(x), "zero", None, DEFAULT, "bif",
                  {"c": (NotImplementedError, _SIGN_COMPLEX)}),
    # on integers the identity (see _INTEGER_IDENTITY)
    "floor": Unary(lambda ops, x: ops.floor(x), "zero", None, DEFAULT, "if",
                   _no_complex("floor")),
    "ceil": Unary(lambda ops, x: ops.ceil(x), "zero", None, DEFAULT, "if", _no_complex("ceil")),
    "trunc": Unary(lambda ops, x: ops.trunc(x), "zero", None, DEFAULT, "if",
                   _no_complex("trunc")),
    "frac": Unary(_frac, lambda g, x, y: g, None, DEFAULT, "f"),
    "bitwise_not": Unary(lambda ops, x: ops.bitwise_not(x), None, None, DEFAULT, "bi"),
}
_sign = interpret(UNARY["sign"].math)
# integer floor/ceil/trunc are the identity (numpy would turn them into floats)
_INTEGER_IDENTITY = {"floor", "ceil", "trunc"}
alias_all({"negative": "neg", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
           "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "fix": "trunc",
           "absolute": "abs"})


def check_kinds(name: str, x: np.ndarray, kinds: str, refuse: dict | None = None) -> None:
    """Raise PyTorch's error when ``x``'s dtype category is not among ``kinds``."""
    k = kind(x)
    if k not in kinds:
        if refuse and k in refuse:
            raise refuse[k][0](refuse[k][1])
        raise not_implemented(name, x)


def _identity(ops, x):
    return x


def _unary_defn(math: Callable, identity_ints: bool, kinds: str) -> PointwiseDefn:
    """A unary row's definition for the compiler (integer floor/ceil/trunc: the identity)."""
    def select(args, ct, out):
        return (_identity if identity_ints and ct.kind != "f" else math), [args["input"]]
    return PointwiseDefn(select, ("input",), kinds=_defn_kinds(kinds))


def _register_unary(name: str, row: Unary):
    identity_ints = name in _INTEGER_IDENTITY
    if isinstance(row.math, Library):
        fn = row.math.fn
        kernels = collections.defaultdict(lambda: fn)
    else:
        row.math.__name__ = name  # generated kernels are named after it
        kernels = interpret(row.math).kernels  # array module -> the math on its arrays

    def impl(xp, input: "Tensor"):
        check_kinds(name, input, row.kinds, row.refuse)
        if identity_ints and kind(input) != "f":
            return input.copy()
        return kernels[xp](input)

    impl.__name__ = name
    impl.__doc__ = f"``{name}(input)``, elementwise."
    d = op(name, tags=POINTWISE, promote=row.promote, inplace=True,
           saves=("input",) if row.needs == "x" else (), save_output=row.needs == "y",
           differentiable=row.deriv is not None)(impl)
    d.half_in_kernel = not isinstance(row.math, Library)
    if not isinstance(row.math, Library):
        d.pointwise_defn = _unary_defn(row.math, identity_ints, row.kinds)
    deriv, needs, raw = row.deriv, row.needs, row.raw
    if deriv == "zero":
        d.def_backward(lambda ctx, g: g.new_zeros(g.shape))
    elif deriv is not None:
        def backward(ctx, g):
            v = ctx.input if needs == "x" else ctx.out if needs == "y" else None
            if v is not None and not raw and v.is_complex():
                v = v.conj()
            return deriv(g, v if needs == "x" else None, v if needs == "y" else None)
        d.def_backward(backward)
    return d


for _name, _row in UNARY.items():
    globals()[_name] = _register_unary(_name, _row)


# ---------------------------------------------------------------------- the rest, one by one
@op(tags=POINTWISE, inplace=True, saves=("input",))
def abs(xp, input: "Tensor"):
    """``abs(input)``; complex input gives its real magnitude (no promotion)."""
    check_kinds("abs", input, "ifc")
    return xp.abs(input)


abs.pointwise_defn = fixed_defn(lambda ops, x: ops.abs(x), ("input",), kinds="fi")


@abs.def_backward
def _(ctx, g):
    return g * ctx.input.sgn()


@op(tags=POINTWISE, view=True)
def positive(xp, input: "Tensor"):
    """``positive(input)``: the input itself (a view); refused for bool like unary ``+``."""
    if input.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input.view()


@positive.def_backward
def _(ctx, g):
    return g


@op(tags=POINTWISE, promote=DEFAULT, inplace=True, save_output=True, saves=("input",))
def sgn(xp, input: "Tensor"):
    """``sgn(input)``: sign for real input, ``z / |z|`` (0 at 0) for complex."""
    if kind(input) != "c":
        return _sign(xp, input)  # PyTorch's sign, the primitive's
    a = xp.abs(input)
    return xp.where(a == 0, 0, input / xp.where(a == 0, 1, a)).astype(input.dtype)


sgn.pointwise_defn = fixed_defn(UNARY["sign"].math, ("input",), kinds="fi")


@sgn.def_backward
def _(ctx, g):
    x = ctx.input
    if not x.is_complex():
        return g.new_zeros(g.shape)
    s, a = ctx.out, x.abs()
    res = (g - (g * s.conj()).real * s) / a
    return res.masked_fill(a == 0, 0)


@op(tags=POINTWISE, upcast_half=True, inplace=True, saves=("input",))
def square(xp, input: "Tensor"):
    """``square(input)`` is ``input ** 2`` (so bool squares to int64, like pow)."""
    if input.dtype == np.bool_:
        return input.astype(np.int64)
    return _square(xp, input)


_square = interpret(lambda ops, x: ops.mul(x, x))
# (bool squares in int64, the result's dtype)
square.pointwise_defn = fixed_defn(_square.kernels.defn, ("input",), kinds="fib")


@square.def_backward
def _(ctx, g):
    x = ctx.input
    return g * (2 * (x.conj() if x.is_complex() else x))


@op(tags=POINTWISE, promote=INT_TO_FLOAT, inplace=True, saves=("input",))
def logit(xp, input: "Tensor", eps=None):
    """``logit(input, eps=None)``: log(x / (1 - x)), x clamped to [eps, 1 - eps] if given."""
    check_kinds("logit", input, "f")
    return _logit(xp, input, eps)


@interpret
def _logit(ops, x, eps):
    if eps is not None:  # clamped to [eps, 1 - eps] (NaN stays)
        x = ops.min(ops.max(x, eps), 1 - eps)
    return ops.log(ops.div(x, ops.sub(1, x)))


logit.pointwise_defn = PointwiseDefn(
    lambda a, ct, out: (_logit.kernels.defn, [a["input"], a.get("eps")]), ("input",), kinds="f")


@logit.def_backward
def _(ctx, g):
    x, eps = ctx.input, ctx.eps
    res = g / (x * (1 - x))
    if eps is None:  # PyTorch: NaN outside [0, 1]
        return res.masked_fill((x < 0) | (x > 1), math.nan)
    # zero outside [eps, 1 - eps] (the boundary itself kept) and at NaN, as PyTorch's
    # vectorised kernel does (its scalar tail, used for short tensors, gives NaN there)
    return res.masked_fill(~((x >= eps) & (x <= 1 - eps)), 0)


@op(tags=POINTWISE, promote=DEFAULT, inplace=True)
def round(xp, input: "Tensor", *, decimals=0):
    """``round(input, *, decimals=0)``: half to even, as ``round(x * 10^d) / 10^d``."""
    check_kinds("round", input, "if")
    if kind(input) == "i":
        if decimals != 0:
            raise not_implemented("round", input)
        return input.copy()
    return _round(xp, input, decimals)


def _half_even(ops, x):
    """x rounded to the nearest integer, ties to even: floor, then up where the fraction is
    above a half or exactly a half on an odd floor (the fraction x - floor(x) is exact);
    the sign of x kept (-0.3 rounds to -0); infinities and NaN stay."""
    f = ops.floor(x)
    d = ops.sub(x, f)
    odd = ops.sub(f, ops.mul(ops.floor(ops.mul(f, 0.5)), 2))  # 1 on an odd floor, else 0
    up = ops.where(ops.gt(d, 0.5), 1.0, ops.where(ops.eq(d, 0.5), odd, 0.0))
    r = ops.copysign(ops.add(f, up), x)
    return ops.where(ops.eq(ops.abs(x), math.inf), x, r)


@interpret
def _round(ops, x, decimals):
    if decimals == 0:
        return _half_even(ops, x)
    if decimals > 0:  # the scale as the eager kernel rounds it, in x's dtype
        s = 10.0 ** decimals
        return ops.div(_half_even(ops, ops.mul(x, s)), s)
    s = 10.0 ** -decimals
    return ops.mul(_half_even(ops, ops.div(x, s)), s)


def _round_select(a, ct, out):
    if ct.kind != "f":  # integers: the identity (with decimals 0; else the op raises)
        return None if a.get("decimals", 0) else (_identity, [a["input"]])
    return _round.kernels.defn, [a["input"], a.get("decimals", 0)]


round.pointwise_defn = PointwiseDefn(_round_select, ("input",), kinds="fi")


@round.def_backward
def _(ctx, g):
    return g.new_zeros(g.shape)


@op(tags=POINTWISE, inplace=True, saves=("input",))
def nan_to_num(xp, input: "Tensor", nan=0.0, posinf=None, neginf=None):
    """``nan_to_num(input, nan=0.0, posinf=None, neginf=None)``; infinities become the
    dtype's extremes unless given."""
    if kind(input) == "i" or kind(input) == "b":
        return input.copy()
    if kind(input) == "c":
        return xp.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)
    dt = D.from_np(input.dtype)
    if dt in _HALF:  # bfloat16: numpy has no such float type (float16 alike, in float32)
        return _nan_to_num(xp, input.astype(np.float32), *_nan_bounds(dt, nan, posinf, neginf)
                           ).astype(input.dtype)
    return _nan_to_num(xp, input, *_nan_bounds(dt, nan, posinf, neginf))


def _nan_bounds(dt: D.dtype, nan, posinf, neginf) -> tuple:
    """nan_to_num's replacements: infinities become ``dt``'s extremes unless given."""
    big = float(D.finfo(dt).max)
    return nan, big if posinf is None else posinf, -big if neginf is None else neginf


@interpret
def _nan_to_num(ops, x, nan, posinf, neginf):
    return ops.where(ops.ne(x, x), nan, ops.where(ops.eq(x, math.inf), posinf,
                                                  ops.where(ops.eq(x, -math.inf), neginf, x)))


def _nan_to_num_select(a, ct, out):
    if ct.kind != "f":
        return _identity, [a["input"]]
    bounds = _nan_bounds(out, a.get("nan", 0.0), a.get("posinf"), a.get("neginf"))
    return _nan_to_num.kernels.defn, [a["input"], *bounds]


nan_to_num.pointwise_defn = PointwiseDefn(_nan_to_num_select, ("input",))


@nan_to_num.def_backward
def _(ctx, g):
    x = ctx.input
    if x.is_complex():
        raise RuntimeError("nan_to_num does not support automatic differentiation for outputs "
                           "with complex dtype.")
    return g * x.isfinite()


def _predicate(name, on_floats, otherwise, kinds="bifc", refuse=None, complex_fn=None):
    """A bool-valued op: the definition ``on_floats`` for floating inputs, ``otherwise`` for
    integers and bools; complex inputs take numpy's ``complex_fn``."""
    floats, others = interpret(on_floats), interpret(otherwise)

    def impl(xp, input: "Tensor"):
        check_kinds(name, input, kinds, refuse)
        if input.dtype.kind == "V":
            input = input.astype(np.float32)  # bfloat16: numpy files it as no float type
        k = kind(input)
        if k == "c":
            return complex_fn(xp, input)
        return (floats if k == "f" else others)(xp, input)
    impl.__name__ = name
    impl.__doc__ = f"``{name}(input)``, elementwise; returns a bool tensor."
    d = op(name, tags=POINTWISE, differentiable=False)(impl)

    def select(args, ct, out):
        return (on_floats if ct.kind == "f" else otherwise), [args["input"]]
    d.pointwise_defn = PointwiseDefn(select, ("input",), compute="operands")
    return d


# predicates that are constant on integers: "never" is x != x, "always" x == x there
def _never(ops, x):
    return ops.ne(x, x)


def _always(ops, x):
    return ops.eq(x, x)


def _xp(fn):
    return lambda xp, x: getattr(xp, fn)(x)


isnan = _predicate("isnan", _never, _never, complex_fn=_xp("isnan"))
isinf = _predicate("isinf", lambda ops, x: ops.eq(ops.abs(x), math.inf), _never,
                   complex_fn=_xp("isinf"))
isfinite = _predicate("isfinite", lambda ops, x: ops.lt(ops.abs(x), math.inf), _always,
                      complex_fn=_xp("isfinite"))
isposinf = _predicate("isposinf", lambda ops, x: ops.eq(x, math.inf), _never, "bif",
                      {"c": (RuntimeError, "isposinf does not support complex inputs.")})
isneginf = _predicate("isneginf", lambda ops, x: ops.eq(x, -math.inf), _never, "bif",
                      {"c": (RuntimeError, "isneginf does not support complex inputs.")})
# real inputs are real (NaN too): true either way
isreal = _predicate("isreal", lambda ops, x: ops.bitwise_or(ops.eq(x, x), ops.ne(x, x)),
                    _always, complex_fn=_xp("isreal"))
signbit = _predicate("signbit", lambda ops, x: ops.lt(ops.copysign(1.0, x), 0),
                     lambda ops, x: ops.lt(x, 0), "bif",
                     {"c": (NotImplementedError,
                            "signbit is not implemented for complex tensors.")})
logical_not = _predicate("logical_not", lambda ops, x: ops.eq(x, 0), lambda ops, x: ops.eq(x, 0),
                         complex_fn=_xp("logical_not"))
logical_not.has_inplace = True


@op(tags=POINTWISE, promote=INT_TO_FLOAT, saves=("input",))
def polygamma(xp, n: int, input: "Tensor"):
    """``polygamma(n, input)``: the n-th derivative of digamma."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    check_kinds("polygamma", input, "f")
    return special.polygamma(n, input)


@polygamma.def_backward
def _(ctx, g):
    return g * polygamma(ctx.n + 1, ctx.input)


@tensor_method("polygamma")
def _polygamma_method(self, n: int):
    """``x.polygamma(n)`` is ``polygamma(n, x)``."""
    return polygamma(n, self)


@op(tags=POINTWISE, upcast_half=True, inplace=True, saves=("input",))
def mvlgamma(xp, input: "Tensor", p: int):
    """``mvlgamma(input, p)``: the log of the multivariate gamma function of dimension p."""
    if input.dtype == np.bool_:  # checked before promotion, so promotion happens here
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    check_kinds("mvlgamma", input, "if")
    if kind(input) == "i":
        input = input.astype(D.get_default_dtype().np)
    j = xp.arange(p, dtype=np.float64) / 2
    terms = special.lgamma(input.astype(np.float64)[..., None] - j).sum(-1)
    return (p * (p - 1) / 4 * math.log(math.pi) + terms).astype(input.dtype)


@mvlgamma.def_backward
def _(ctx, g):
    from .creation import arange
    x, p = ctx.input, ctx.p
    j = arange(p, dtype=x.dtype, device=x.device) / 2
    return g * (x.unsqueeze(-1) - j).digamma().sum(-1)
