"""dtype objects, the numpy mapping and PyTorch's type promotion, in one place."""

from __future__ import annotations

import builtins
import math

import ml_dtypes
import numpy as np


class dtype:
    """A tensor element type (``ember.float32`` ...). Compares by identity."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed", "kind",
                 "is_float8")

    def __init__(self, name: str, np_dtype, kind: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.kind = kind  # "b" bool, "u" unsigned, "i" signed int, "f" float, "c" complex
        self.is_floating_point = kind == "f"
        self.is_complex = kind == "c"
        self.is_signed = kind in "ifc"
        # float8: storage types that PyTorch's CPU kernels mostly refuse (see ops/float8.py)
        self.is_float8 = kind == "f" and self.itemsize == 1

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self) -> "dtype":
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> "dtype":
        if self.is_float8:
            raise RuntimeError(f"Unknown Complex ScalarType for {TYPE_NAME[self]}")
        return {float64: complex128, complex128: complex128}.get(self, complex64)


bool_ = dtype("bool", np.bool_, "b")
uint8 = dtype("uint8", np.uint8, "u")
int8 = dtype("int8", np.int8, "i")
int16 = dtype("int16", np.int16, "i")
int32 = dtype("int32", np.int32, "i")
int64 = dtype("int64", np.int64, "i")
float16 = dtype("float16", np.float16, "f")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, "f")
float32 = dtype("float32", np.float32, "f")
float64 = dtype("float64", np.float64, "f")
complex64 = dtype("complex64", np.complex64, "c")
complex128 = dtype("complex128", np.complex128, "c")
float8_e4m3fn = dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "f")  # no inf; casts saturate
float8_e5m2 = dtype("float8_e5m2", ml_dtypes.float8_e5m2, "f")

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
       complex64, complex128, float8_e4m3fn, float8_e5m2)
FLOAT8 = (float8_e4m3fn, float8_e5m2)
# PyTorch's aliases (torch.half, torch.long, ...).
ALIASES = {"half": float16, "float": float32, "double": float64, "short": int16, "int": int32,
           "long": int64, "cfloat": complex64, "cdouble": complex128}

_NAMES = {d.name: d for d in ALL} | ALIASES
# PyTorch's scalar-type names, used in its error messages ("result type Float can't be cast...")
TYPE_NAME = {bool_: "Bool", uint8: "Byte", int8: "Char", int16: "Short", int32: "Int",
             int64: "Long", float16: "Half", bfloat16: "BFloat16", float32: "Float",
             float64: "Double", complex64: "ComplexFloat", complex128: "ComplexDouble",
             float8_e4m3fn: "Float8_e4m3fn", float8_e5m2: "Float8_e5m2"}
_FROM_NP = {d.np: d for d in ALL}


def _by_name(name: str) -> dtype:
    return _NAMES[name]


def from_np(np_dtype) -> dtype:
    """The ember dtype of a numpy dtype; numpy types ember lacks map to their nearest kin."""
    d = _FROM_NP.get(np_dtype)
    if d is not None:
        return d
    np_dtype = np.dtype(np_dtype)
    d = _FROM_NP.get(np_dtype)
    if d is not None:
        return d
    if np_dtype.kind == "u":
        return int64
    if np_dtype.kind == "f":
        return float64
    raise TypeError(f"can't convert np.ndarray of type {np_dtype}. The only supported types are: "
                    "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, "
                    "uint8, and bool.")


# ---------------------------------------------------------------- default dtype
_default = [float32]


def get_default_dtype() -> dtype:
    return _default[0]


def set_default_dtype(d: dtype) -> None:
    if not isinstance(d, dtype) or not d.is_floating_point or d in (float16, bfloat16) and False:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


# ---------------------------------------------------------------- promotion
_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _promote(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.is_float8 or b.is_float8:
        raise RuntimeError("Promotion for Float8 Types is not supported, attempted to promote "
                           f"{TYPE_NAME[a]} and {TYPE_NAME[b]}")
    ka, kb = a.kind, b.kind
    if ka == "b":
        return b
    if kb == "b":
        return a
    if ka == "c" or kb == "c":
        real = _promote(a.to_real() if ka == "c" else a, b.to_real() if kb == "c" else b)
        return complex128 if real is float64 else complex64
    if ka == "f" and kb == "f":
        if a.itemsize == b.itemsize:  # float16 with bfloat16
            return float32
        return a if a.itemsize > b.itemsize else b
    if ka == "f":
        return a
    if kb == "f":
        return b
    # integers
    if ka == kb:
        return a if a.itemsize > b.itemsize else b
    u, s = (a, b) if ka == "u" else (b, a)
    return s if s.itemsize > u.itemsize else int16


class _PromotionTable(dict):
    """``_promote`` for every pair of dtypes, precomputed; a pair it refuses (float8 with
    another dtype) is absent, so looking it up runs ``_promote`` and raises its error."""

    def __missing__(self, key):
        if len(key) == 2 and all(isinstance(d, dtype) for d in key):
            return _promote(*key)
        raise KeyError(key)


_PROMOTE = _PromotionTable({(a, b): _promote(a, b) for a in ALL for b in ALL
                            if a is b or not (a.is_float8 or b.is_float8)})


def promote_types(type1: dtype, type2: dtype) -> dtype:
    return _PROMOTE[type1, type2]


def scalar_dtype(x) -> dtype:
    """The dtype a Python scalar takes part in promotion with (a 'wrapped number')."""
    t = type(x)
    if t is builtins.bool or t is np.bool_:
        return bool_
    if t is builtins.int or isinstance(x, (np.integer,)):
        return int64
    if t is builtins.float or isinstance(x, np.floating):
        return _default[0]
    if t is builtins.complex or isinstance(x, np.complexfloating):
        return complex128 if _default[0] is float64 else complex64
    raise TypeError(f"expected a number, got {t.__name__}")


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    # PyTorch's category rule: a lower-priority operand only matters if it is of a higher
    # category (bool < integral < floating < complex).
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _CAT[higher.kind], _CAT[lower.kind]
    if ch == 3:
        return higher
    if cl == 3:
        return higher.to_complex() if ch == 2 else lower
    if ch == 2:
        return higher
    if ch == 0 or cl == 2:
        return _PROMOTE[higher, lower]
    return higher


def result_type(*operands) -> dtype:
    """PyTorch's result dtype: the one promotion rule, used by every op, the compiler's
    lowering, the joining ops and ``ember.result_type``. Operands rank in three groups: tensors with
    dimensions, then zero-dim tensors, then Python numbers; within a group dtypes promote
    (``promote_types``), and a lower group counts only where it is of a higher category
    (bool < integer < floating < complex): ``int32 tensor + 2.5`` is float32, ``float16
    tensor + float64 zero-dim tensor`` stays float16.

    An operand is a tensor, or anything that describes one (an ember ``dtype`` attribute and
    ``ndim`` or ``shape``: graph metadata, a symbolic tensor), a numpy array (an eager
    kernel's operand), a Python or numpy number, None (no operand), or a list or tuple of
    tensors (a ``Tensor[]`` argument: each counts as a tensor with dimensions, as ``cat``
    promotes)."""
    dims = zeros = scalars = None
    for x in operands:
        if x is None:
            continue
        if isinstance(x, (list, tuple)):
            for t in x:
                d = _operand(t)[0]
                dims = d if dims is None else _PROMOTE[dims, d]
            continue
        d, nd = _operand(x)
        if nd is None:
            scalars = d if scalars is None else _PROMOTE[scalars, d]
        elif nd:
            dims = d if dims is None else _PROMOTE[dims, d]
        else:
            zeros = d if zeros is None else _PROMOTE[zeros, d]
    return _combine(dims, _combine(zeros, scalars))


_RESULT_TYPE_FORMS = ("\n * (Tensor tensor, Tensor other)\n * (Number scalar, Tensor tensor)\n"
                      " * (Tensor tensor, Number other)\n * (Number scalar1, Number scalar2)\n")


def result_type_of_pair(tensor, other) -> dtype:
    """``ember.result_type(tensor, other)``: PyTorch's two-operand form, each a tensor or a
    Python number; anything else is PyTorch's TypeError."""
    names = []
    for x in (tensor, other):
        if isinstance(getattr(x, "dtype", None), dtype):
            names.append("Tensor")
        elif isinstance(x, (builtins.bool, builtins.int, builtins.float, builtins.complex)):
            names.append(type(x).__name__)
        else:
            names.append("NoneType" if x is None else type(x).__name__)
    if any(n not in ("Tensor", "bool", "int", "float", "complex") for n in names):
        raise TypeError("result_type() received an invalid combination of arguments - got "
                        f"({', '.join(names)}), but expected one of:{_RESULT_TYPE_FORMS}")
    return result_type(tensor, other)


def _operand(x) -> tuple[dtype, int | None]:
    """An operand's dtype and its number of dims (None for a number)."""
    if isinstance(x, np.ndarray):
        return from_np(x.dtype), x.ndim
    dt = getattr(x, "dtype", None)
    if isinstance(dt, dtype):
        nd = getattr(x, "ndim", None)
        return dt, len(x.shape) if nd is None else nd
    if isinstance(dt, np.dtype) and hasattr(x, "ndim"):  # another backend's array (CuPy's)
        return from_np(dt), x.ndim
    return scalar_dtype(x), None


def can_cast(from_: dtype, to: dtype) -> bool:
    """Whether PyTorch's same-kind casting allows ``from_`` -> ``to`` (used by in-place ops)."""
    return _CAT[from_.kind] <= _CAT[to.kind]


# ---------------------------------------------------------------- finfo / iinfo
class finfo:
    def __init__(self, type: dtype | None = None):
        type = type or _default[0]
        if not (type.is_floating_point or type.is_complex):
            raise TypeError(f"finfo(): expected a floating point dtype, got {type}")
        info = ml_dtypes.finfo(type.to_real().np)
        self.dtype = type.to_real().name
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        # PyTorch: 10^-digits10, the decimal digits the mantissa always holds (1 for float8)
        self.resolution = 10.0 ** -math.floor(int(info.nmant) * math.log10(2))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    def __init__(self, type: dtype):
        if type.kind not in "uib":
            raise TypeError(f"iinfo(): expected an integer dtype, got {type}")
        info = np.iinfo(np.uint8 if type is bool_ else type.np)
        self.dtype = type.name
        self.bits = int(info.bits)
        self.max = int(info.max) if type is not bool_ else 1
        self.min = int(info.min)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
