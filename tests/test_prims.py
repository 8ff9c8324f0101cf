"""The scalar primitives (ember/codegen/prims.py): the protocol is exactly the table, numpy
eager's handler and the C spellings implement every primitive (C says which it lacks in
C_MISSING), each keeps its accuracy promise on float32 and float64, and the op definitions
built on them use nothing else."""

from __future__ import annotations

import ctypes
import inspect
import operator

import numpy as np
import pytest

import ember
from ember import _dtype as D
from ember.backends import xp_ops
from ember.codegen.c import runtime
from ember.codegen.c.scalar_ops import C_MISSING, CTYPE, CScalarOps, c_literal, cast_expr
from ember.codegen.prims import CORRECTLY_ROUNDED, EXACT, PRIMS, ScalarOps, parameters
from ember.ops.pointwise import UNARY, Library

OPS = xp_ops.handler(np)
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
SPECIAL = {"where", "cast", "constant"}  # not elementwise on one dtype: tested on their own
# one compute dtype per kind (float16/bfloat16 never reach a primitive: they widen first)
SAMPLE_DTYPES = {"b": [D.bool_], "i": [D.int8, D.uint8, D.int32, D.int64],
                 "f": [D.float32, D.float64], "c": [D.complex64, D.complex128]}


# ---------------------------------------------------------------------- the protocol
def test_protocol_is_the_table():
    assert ScalarOps.__abstractmethods__ == frozenset(PRIMS)
    for name, p in PRIMS.items():
        sig = inspect.signature(getattr(ScalarOps, name))
        assert tuple(sig.parameters)[1:] == parameters(p), name
        assert p.kinds and set(p.kinds) <= set("bifc"), name
        assert p.ulp in (EXACT, CORRECTLY_ROUNDED) or p.ulp >= 1, name
        assert p.semantics and p.accuracy, name


def test_every_backend_implements_every_primitive():
    assert not type(OPS).__abstractmethods__  # numpy: instantiable, so nothing left out
    c = CScalarOps("float", D.float32)
    assert not CScalarOps.__abstractmethods__
    assert set(C_MISSING) <= set(PRIMS)
    for name, p in PRIMS.items():
        assert callable(getattr(OPS, name)), name
        args = ["c", "a", "b"][-p.arity:] if p.arity == 3 else ["a", "b"][:p.arity]
        args += [{"dtype": D.float64, "value": 1.5}[s] for s in p.static]
        if name in C_MISSING:  # said, never silent: the spelling refuses
            with pytest.raises(NotImplementedError):
                getattr(c, name)(*args)
        else:
            assert isinstance(getattr(c, name)(*args), str), name


def _values(dt: D.dtype, n: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt.np)
        v = rng.integers(info.min, info.max, n, endpoint=True)
        v[:3] = [info.min, info.max, 0]
        return v.astype(dt.np)
    v = rng.standard_normal(n) * 4
    v[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
    if dt.kind == "c":
        z = np.empty(n, np.complex128)
        z.real, z.imag = v, np.roll(v, 5)
        v = z
    return v.astype(dt.np)


@pytest.mark.parametrize("name", sorted(set(PRIMS) - SPECIAL))
def test_numpy_handler_takes_its_kinds(name):
    """Every kind a primitive accepts computes in numpy, in the dtype the semantics give."""
    p = PRIMS[name]
    fn = getattr(OPS, name)
    for k in p.kinds:
        for dt in SAMPLE_DTYPES[k]:
            args = [_values(dt, seed=s) for s in range(p.arity)]
            with np.errstate(all="ignore"):
                r = fn(*args)
            want = D.bool_ if name in COMPARISONS else \
                dt.to_real() if name == "abs" else dt
            assert r.dtype == want.np and r.shape == args[0].shape, (name, dt)


def test_numpy_handler_special_primitives():
    for dt in (D.float32, D.int32, D.bool_, D.complex64):
        a, b = _values(dt, seed=1), _values(dt, seed=2)
        c = _values(D.bool_, seed=3)
        np.testing.assert_array_equal(OPS.where(c, a, b), np.where(c, a, b))
    assert OPS.constant(300, D.int8) == 44  # integers wrap
    assert OPS.constant(0.1, D.float32) == np.float32(0.1)
    assert OPS.constant(2, D.bool_).dtype == np.bool_
    x = np.array([1.7, -2.5, np.nan], np.float32)
    assert OPS.cast(x, D.float64).dtype == np.float64
    np.testing.assert_array_equal(OPS.cast(x[:2], D.int32), [1, -2])  # truncation
    np.testing.assert_array_equal(OPS.cast(x, D.bool_), [True, True, True])


def test_numpy_sign_has_pytorchs_nan_rule():
    x = np.array([np.nan, -0.0, 0.0, -3.0, np.inf], np.float32)
    r = OPS.sign(x)
    np.testing.assert_array_equal(r, [0, 0, 0, -1, 1])
    assert not np.signbit(r[:3]).any()  # +0 at NaN and at both zeros
    np.testing.assert_array_equal(OPS.sign(np.array([True, False])), [True, False])


# ---------------------------------------------------------------------- definitions
def test_unary_definitions_use_primitives_only():
    """Each row's math is a Library kernel or calls nothing but primitives (the recorder
    refuses any other name)."""
    library = []
    for name, row in UNARY.items():
        if isinstance(row.math, Library):
            library.append(name)
            continue
        rec = xp_ops._Recorder()
        row.math(rec, object())
        assert rec.calls and all(c[0] in PRIMS for c in rec.calls), name
    assert sorted(library) == ["digamma", "erfinv", "lgamma"]


def test_one_primitive_definitions_bind_to_the_array_function():
    """Interpreting costs nothing: ``exp`` runs numpy's exp itself, a composition runs its
    primitives through a partial of the definition."""
    exp = xp_ops.interpret(UNARY["exp"].math)
    assert exp.kernels[np] is np.exp
    assert xp_ops.interpret(UNARY["asin"].math).kernels[np] is np.arcsin
    assert xp_ops.one_primitive(UNARY["sigmoid"].math) is None
    assert xp_ops.one_primitive(lambda ops, x: ops.exp(ops.neg(x))) is None
    assert xp_ops.one_primitive(lambda ops, x, y: ops.sub(y, x)) is None  # operands swapped
    assert xp_ops.one_primitive(lambda ops, x, y: ops.sub(x, y)) == "sub"
    # arithmetic binds to Python's operators: numpy reuses temporaries' memory through them
    assert xp_ops.interpret(lambda ops, x, y: ops.add(x, y)).kernels[np] is operator.add
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_array_equal(xp_ops.interpret(UNARY["frac"].math)(np, x), x - np.trunc(x))
    assert list(inspect.signature(exp).parameters) == ["ops", "x"]  # registers as an impl


# ---------------------------------------------------------------------- accuracy
# inputs per primitive: (low, high, how): "u" uniform, "l" log-uniform magnitude (random
# signs if low < 0 is asked by "±"), chosen so results stay normal and finite in float32
DOMAIN = {
    "add": (1e-15, 1e15, "±l"), "sub": (1e-15, 1e15, "±l"), "mul": (1e-15, 1e15, "±l"),
    "div": (1e-15, 1e15, "±l"), "reciprocal": (1e-30, 1e30, "±l"),
    "exp": (-80, 80, "u"), "exp2": (-120, 120, "u"), "expm1": (-80, 80, "u"),
    "log": (1e-30, 1e30, "l"), "log2": (1e-30, 1e30, "l"), "log10": (1e-30, 1e30, "l"),
    "log1p": (-0.99, 1e30, "u+l"), "sqrt": (1e-30, 1e30, "l"), "rsqrt": (1e-30, 1e30, "l"),
    "pow": (1e-2, 100, "l"), "sin": (-100, 100, "u"), "cos": (-100, 100, "u"),
    "tan": (-100, 100, "u"), "asin": (-1, 1, "u"), "acos": (-1, 1, "u"),
    "atan": (1e-20, 1e20, "±l"), "atan2": (1e-20, 1e20, "±l"), "hypot": (1e-15, 1e15, "±l"),
    "copysign": (1e-3, 1e3, "±l"), "sinh": (-80, 80, "u"), "cosh": (-80, 80, "u"),
    "tanh": (-20, 20, "u"), "asinh": (1e-20, 1e20, "±l"), "acosh": (1, 1e20, "l"),
    "atanh": (-0.999, 0.999, "u"), "erf": (-6, 6, "u"), "erfc": (-3, 9, "u"),
    "ncdf": (-12, 8, "u"),  # (the lower tail, where erfc(-a / sqrt 2) / 2 loses digits)
    "floor": (-1e3, 1e3, "u"), "ceil": (-1e3, 1e3, "u"), "trunc": (-1e3, 1e3, "u"),
    "neg": (-1e3, 1e3, "u"), "abs": (-1e3, 1e3, "u"), "min": (-10, 10, "u"),
    "max": (-10, 10, "u"), "sign": (-10, 10, "u"),
}
FLOAT_PRIMS = sorted(n for n, p in PRIMS.items() if "f" in p.kinds and n not in SPECIAL and
                     n not in COMPARISONS)


def _domain(name: str, n: int, dt, seed: int) -> np.ndarray:
    lo, hi, how = DOMAIN[name]
    rng = np.random.default_rng(seed)
    if how == "u":
        v = rng.uniform(lo, hi, n)
    elif how == "u+l":
        v = np.concatenate([rng.uniform(lo, 1, n // 2), np.exp(rng.uniform(0, np.log(hi),
                                                                            n - n // 2))])
    else:
        v = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
        if how.startswith("±"):
            v *= rng.choice([-1, 1], n)
    return v.astype(dt)


def _pow_exponents(a: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, a.size) * 60 / np.maximum(np.abs(np.log(a.astype(np.float64))),
                                                          1)).astype(a.dtype)


def _exact(mp, name: str, a, b=None):
    """primitive ``name`` at the (exactly represented) float inputs, to 50 digits."""
    f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
         "div": lambda: a / b, "reciprocal": lambda: 1 / a, "exp": lambda: mp.exp(a),
         "exp2": lambda: mp.power(2, a), "expm1": lambda: mp.expm1(a), "log": lambda: mp.log(a),
         "log2": lambda: mp.log(a, 2), "log10": lambda: mp.log10(a),
         "log1p": lambda: mp.log1p(a), "sqrt": lambda: mp.sqrt(a),
         "rsqrt": lambda: 1 / mp.sqrt(a), "pow": lambda: mp.power(a, b),
         "sin": lambda: mp.sin(a), "cos": lambda: mp.cos(a), "tan": lambda: mp.tan(a),
         "asin": lambda: mp.asin(a), "acos": lambda: mp.acos(a), "atan": lambda: mp.atan(a),
         "atan2": lambda: mp.atan2(a, b), "hypot": lambda: mp.hypot(a, b),
         "copysign": lambda: abs(a) if b > 0 else -abs(a),
         "sinh": lambda: mp.sinh(a), "cosh": lambda: mp.cosh(a), "tanh": lambda: mp.tanh(a),
         "asinh": lambda: mp.asinh(a), "acosh": lambda: mp.acosh(a),
         "atanh": lambda: mp.atanh(a), "erf": lambda: mp.erf(a), "erfc": lambda: mp.erfc(a),
         "ncdf": lambda: mp.ncdf(a),
         "floor": lambda: mp.floor(a), "ceil": lambda: mp.ceil(a),
         "trunc": lambda: mp.floor(a) if a >= 0 else mp.ceil(a), "neg": lambda: -a,
         "abs": lambda: abs(a), "min": lambda: min(a, b), "max": lambda: max(a, b),
         "sign": lambda: mp.sign(a)}[name]
    return f()


def _ulps(got: np.ndarray, exact: list, dt) -> np.ndarray:
    """|got - exact| in ulps of the exact result in dtype ``dt``."""
    import mpmath as mp
    out = np.empty(got.size)
    tiny = np.finfo(dt).smallest_subnormal
    for i, (g, e) in enumerate(zip(got.tolist(), exact)):
        ulp = max(float(np.spacing(np.abs(dt(float(e))))), float(tiny))
        out[i] = float(abs(mp.mpf(g) - e) / ulp)
    return out


_C_LIB: dict = {}


def _c_kernels():
    """One C function per (primitive, dtype) over arrays a, b, c -> out, built once."""
    if "lib" in _C_LIB:
        return _C_LIB["lib"]
    if runtime.find_c_compiler() is None:
        _C_LIB["lib"] = None
        return None
    from ember.compiler.codegen_c import PRELUDE
    fns = []
    for name in sorted(set(PRIMS) - SPECIAL - set(C_MISSING)):
        p = PRIMS[name]
        for k in p.kinds.replace("c", ""):
            for dt in SAMPLE_DTYPES[k]:
                ct = CTYPE[dt]
                ops = CScalarOps(ct, dt)
                args = ["a", "b"][:p.arity]
                expr = getattr(ops, name)(*args)
                rt = "uint8_t" if name in COMPARISONS else ct
                fns.append(f"void t_{name}_{dt.name}(const {ct} *A, const {ct} *B, "
                           f"const uint8_t *C, {rt} *out, int64_t n) {{\n"
                           f"    for (int64_t i = 0; i < n; ++i) {{\n"
                           f"        const {ct} a = A[i], b = B[i]; (void)b; (void)C;\n"
                           f"        out[i] = ({rt})({expr});\n    }}\n}}")
    for dt in (D.float32, D.float64, D.int32, D.int8, D.bool_):
        ct = CTYPE[dt]
        expr = CScalarOps(ct, dt).where("c", "a", "b")
        fns.append(f"void t_where_{dt.name}(const {ct} *A, const {ct} *B, const uint8_t *C, "
                   f"{ct} *out, int64_t n) {{\n    for (int64_t i = 0; i < n; ++i) {{\n"
                   f"        const {ct} a = A[i], b = B[i]; const uint8_t c = C[i];\n"
                   f"        out[i] = {expr};\n    }}\n}}")
    for src in CAST_DTYPES:
        for dst in CAST_DTYPES:
            expr = CScalarOps(CTYPE[src], src).cast("a", dst)
            fns.append(f"void t_cast_{src.name}_{dst.name}(const {CTYPE[src]} *A, "
                       f"{CTYPE[dst]} *out, int64_t n) {{\n"
                       f"    for (int64_t i = 0; i < n; ++i) {{ const {CTYPE[src]} a = A[i]; "
                       f"out[i] = {expr}; }}\n}}")
    for dt in CAST_DTYPES:
        body = " ".join(f"out[{i}] = {CScalarOps(CTYPE[dt], dt).constant(v, dt)};"
                        for i, v in enumerate(_constants(dt)))
        fns.append(f"void t_constant_{dt.name}({CTYPE[dt]} *out) {{ {body} }}")
    lib = runtime.build(PRELUDE + "\n" + "\n\n".join(fns) + "\n", openmp=False)
    _C_LIB["lib"] = lib
    return lib


CAST_DTYPES = (D.float32, D.float64, D.int8, D.int32, D.int64, D.uint8, D.bool_)
CONSTANTS = (0, 1, -1, 0.1, -2.5, 300, -129, 1e30, 3.0e-39, float("inf"), float("-inf"), True)


def _constants(dt: D.dtype) -> list:
    """CONSTANTS that ``dt`` can be given: integers take finite values in int64's range."""
    return [v for v in CONSTANTS if dt.kind == "f" or abs(v) < 2 ** 62]


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


def _run_c(lib, fn: str, a, b=None, c=None, out_dtype=None):
    a = np.ascontiguousarray(a)
    b = a if b is None else np.ascontiguousarray(b)
    c = np.zeros(a.size, np.uint8) if c is None else np.ascontiguousarray(c, np.uint8)
    out = np.empty(a.size, out_dtype or a.dtype)
    getattr(lib, fn)(_ptr(a), _ptr(b), _ptr(c), _ptr(out), ctypes.c_int64(a.size))
    return out


def _need_c():
    lib = _c_kernels()
    if lib is None:
        pytest.skip("no C compiler")
    return lib


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", FLOAT_PRIMS)
def test_accuracy_promise(name, dt):
    """numpy's handler and the C spelling are within the promised ulps of the exact result
    (mpmath, 50 digits) on float32 and float64."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    p = PRIMS[name]
    n = 300
    a = _domain(name, n, dt, 1)
    b = _pow_exponents(a, 2) if name == "pow" else \
        _domain(name, n, dt, 2) if p.arity == 2 else None
    exact = [_exact(mp, name, mp.mpf(float(x)), None if b is None else mp.mpf(float(y)))
             for x, y in zip(a, a if b is None else b)]
    bound = p.ulp + 1e-9
    with np.errstate(all="ignore"):
        got = getattr(OPS, name)(*([a] if b is None else [a, b]))
    err = _ulps(got, exact, dt)
    assert err.max() <= bound, (name, dt, "numpy", err.max(), a[err.argmax()])
    lib = _need_c()
    ct = "float" if dt == np.float32 else "double"
    got_c = _run_c(lib, f"t_{name}_{'float32' if ct == 'float' else 'float64'}", a, b)
    err = _ulps(got_c, exact, dt)
    assert err.max() <= bound, (name, dt, "C", err.max(), a[err.argmax()])


SPECIAL_VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-40,
                           -1e-40, 3e38, -3e38, 1e-45])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", FLOAT_PRIMS + sorted(COMPARISONS))
def test_c_special_values_match_numpy(name, dt):
    """NaN, infinities, zeros, denormals: C and numpy agree (NaN-ness and value)."""
    lib = _need_c()
    a = SPECIAL_VALUES.astype(dt)
    p = PRIMS[name]
    if p.arity == 2:
        a, b = np.repeat(a, a.size), np.tile(a, a.size)
    else:
        b = None
    with np.errstate(all="ignore"):
        want = getattr(OPS, name)(*([a] if b is None else [a, b]))
    got = _run_c(lib, f"t_{name}_{'float32' if dt == np.float32 else 'float64'}", a, b,
                 out_dtype=want.dtype)
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    if p.ulp > CORRECTLY_ROUNDED:  # finite results: within the promise of each other
        with np.errstate(all="ignore"):
            same |= np.isfinite(want) & (np.abs(got - want) <= 2 * p.ulp * np.spacing(
                np.abs(want)))
    assert same.all(), (name, dt, a[~same], b[~same] if b is not None else None, got[~same],
                        want[~same])


@pytest.mark.parametrize("name", sorted(n for n, p in PRIMS.items() if n not in SPECIAL and
                                        set(p.kinds) & set("bi")))
def test_c_integer_and_bool_primitives_match_numpy(name):
    """Exact on integers and bools, wrapping like numpy."""
    lib = _need_c()
    p = PRIMS[name]
    for k in p.kinds:
        if k not in "bi":
            continue
        for dt in SAMPLE_DTYPES[k]:
            a, b = _values(dt, 200, 1), _values(dt, 200, 2)
            b[:20] = a[:20]  # some equal pairs for the comparisons
            if dt.kind == "i" and dt.itemsize >= 4 and name in ("add", "sub", "mul", "neg",
                                                                 "abs"):
                # C's int and int64_t arithmetic is undefined on overflow (the build has no
                # -fwrapv): wrapping is tested where C computes wider (int8, uint8)
                a, b = a // (1 << (dt.itemsize * 4)), b // (1 << (dt.itemsize * 4))
            with np.errstate(all="ignore"):
                want = getattr(OPS, name)(*([a, b][:p.arity]))
            got = _run_c(lib, f"t_{name}_{dt.name}", a, b, out_dtype=want.dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {dt}")


def test_c_where_cast_constant_match_numpy():
    lib = _need_c()
    for dt in (D.float32, D.float64, D.int32, D.int8, D.bool_):
        a, b, c = _values(dt, 100, 1), _values(dt, 100, 2), _values(D.bool_, 100, 3)
        got = _run_c(lib, f"t_where_{dt.name}", a, b, c)
        np.testing.assert_array_equal(got, OPS.where(c, a, b))
    for src in CAST_DTYPES:
        a = _values(src, 200, 4)
        if src.kind == "f":  # float to integer: in range and not NaN (C leaves it undefined)
            a = np.where(np.isfinite(a), a * 20, 0.5).astype(src.np)
        for dst in CAST_DTYPES:
            if src.kind == "f" and dst.kind in "iu":
                info = np.iinfo(dst.np)
                a_in = np.clip(a, info.min, info.max).astype(src.np)
            else:
                a_in = a
            out = np.empty(a_in.size, dst.np)
            getattr(lib, f"t_cast_{src.name}_{dst.name}")(_ptr(a_in), _ptr(out),
                                                          ctypes.c_int64(a_in.size))
            want = OPS.cast(a_in, dst)
            np.testing.assert_array_equal(out, want, err_msg=f"cast {src} -> {dst}")
    for dt in CAST_DTYPES:
        values = _constants(dt)
        out = np.empty(len(values), dt.np)
        getattr(lib, f"t_constant_{dt.name}")(_ptr(out))
        want = [OPS.constant(v, dt) for v in values]
        assert [w.dtype for w in want] == [dt.np] * len(values)
        np.testing.assert_array_equal(out, want, err_msg=f"constant {dt}")


def test_c_spellings_are_the_compilers():
    """The compiler emits through these spellings: codegen_c re-exports them unchanged."""
    from ember.compiler import codegen_c
    assert codegen_c.CScalarOps is CScalarOps and codegen_c.CTYPE is CTYPE
    assert codegen_c.cast_expr is cast_expr
    assert codegen_c.c_literal(0.5, D.float32) == c_literal(0.5, D.float32)


def test_ember_ops_through_the_handler_match_numpy():
    """The unary table's definitions, interpreted, give numpy's own results bit for bit on
    float32 (what the table computed before it was written over primitives)."""
    x = ember.tensor(np.linspace(-3, 3, 41, dtype=np.float32))
    for name, fn in (("exp", np.exp), ("tan", np.tan), ("asinh", np.arcsinh),
                     ("floor", np.floor), ("neg", np.negative)):
        np.testing.assert_array_equal(getattr(ember, name)(x).numpy(), fn(x.numpy()), name)
