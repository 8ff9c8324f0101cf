"""Type promotion against torch: promote_types, can_cast, result_type, and the dtypes that ops
actually return, over random mixes of dtypes and dimension categories (n-d tensor, 0-dim
tensor, Python bool / int / float / complex)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ember
from oracle import to_torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def name(dt) -> str:
    return str(dt).split(".")[-1]


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_and_can_cast_exhaustive(a, b):
    ea, eb, ta, tb = getattr(ember, a), getattr(ember, b), getattr(torch, a), getattr(torch, b)
    assert name(ember.promote_types(ea, eb)) == name(torch.promote_types(ta, tb))
    assert ember.can_cast(ea, eb) == torch.can_cast(ta, tb)


# ---------------------------------------------------------------------- operands
# An operand is ("nd", dtype) / ("0d", dtype) for tensors, or ("py", value) for a Python scalar.
tensor_operand = st.tuples(st.sampled_from(["nd", "0d"]), st.sampled_from(DTYPES))
python_operand = st.tuples(st.just("py"), st.sampled_from([True, False, 3, -2, 0, 2.5, -0.5,
                                                           1 + 2j, 0.5j]))
operand = st.one_of(tensor_operand, tensor_operand, python_operand)


def make(op, lib):
    kind, v = op
    if kind == "py":
        return v
    values = np.array([1, 2, 3]) if kind == "nd" else np.array(2)
    t = ember.tensor(values).to(getattr(ember, v))
    return t if lib is ember else to_torch(t)


@contextlib.contextmanager
def default_dtype(dt):
    old_e, old_t = ember.get_default_dtype(), torch.get_default_dtype()
    ember.set_default_dtype(getattr(ember, dt))
    torch.set_default_dtype(getattr(torch, dt))
    try:
        yield
    finally:
        ember.set_default_dtype(old_e)
        torch.set_default_dtype(old_t)


def no_complex32(*ops):
    """ember has no complex32 (float16 meeting a complex operand of a lower dimension
    category): skip examples where torch would promote to it."""
    for x in ops:
        for y in ops:
            if x[0] != "py" or y[0] != "py":
                r = torch.result_type(make(x, torch), make(y, torch))
                assume(r != torch.complex32)


@SETTINGS
@given(a=operand, b=operand, dflt=st.sampled_from(["float32", "float64"]))
def test_result_type(a, b, dflt):
    assume(a[0] != "py" or b[0] != "py")
    with default_dtype(dflt):
        no_complex32(a, b)
        expected = name(torch.result_type(make(a, torch), make(b, torch)))
        assert name(ember.result_type(make(a, ember), make(b, ember))) == expected


def both(fn, *ops):
    """Run ``fn(lib, *operands)`` in both libraries: the same exception type, or results of
    the same dtype."""
    if len(ops) > 1:
        no_complex32(*ops)
    try:
        t = fn(torch, *[make(o, torch) for o in ops])
    except Exception as e:
        with pytest.raises(type(e)):
            fn(ember, *[make(o, ember) for o in ops])
        return
    e = fn(ember, *[make(o, ember) for o in ops])
    assert name(e.dtype) == name(t.dtype), f"{ops}: {e.dtype} vs {t.dtype}"
    np.testing.assert_allclose(e.float().numpy() if not e.is_complex() else e.numpy(),
                               t.float().numpy() if not t.is_complex() else t.numpy(),
                               rtol=1e-2, equal_nan=True)


BINARY = {
    "add": lambda m, a, b: m.add(a, b), "sub": lambda m, a, b: m.sub(a, b),
    "mul": lambda m, a, b: m.mul(a, b), "div": lambda m, a, b: m.div(a, b),
    "floor div": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "pow": lambda m, a, b: m.pow(a, b), "eq": lambda m, a, b: m.eq(a, b),
    "lt": lambda m, a, b: m.lt(a, b), "maximum": lambda m, a, b: m.maximum(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b), "+ operator": lambda m, a, b: a + b,
    "* operator": lambda m, a, b: a * b, "/ operator": lambda m, a, b: a / b,
    "** operator": lambda m, a, b: a ** b, "== operator": lambda m, a, b: a == b,
}


@pytest.mark.parametrize("op", BINARY)
@SETTINGS
@given(a=operand, b=operand, dflt=st.sampled_from(["float32", "float64"]))
def test_binary_result_dtypes(op, a, b, dflt):
    fn = BINARY[op]
    if op.endswith("operator"):  # Python needs a tensor on one side
        assume(a[0] != "py" or b[0] != "py")
    else:
        assume(a[0] != "py")  # a Python number as the first argument of ember.<op>(...)
    with default_dtype(dflt):
        both(fn, a, b)


@SETTINGS
@given(a=operand, b=operand, dflt=st.sampled_from(["float32", "float64"]))
def test_where_result_dtype(a, b, dflt):
    cond = ember.tensor([True, False, True])
    with default_dtype(dflt):
        both(lambda m, x, y: m.where(cond if m is ember else to_torch(cond), x, y), a, b)


@SETTINGS
@given(a=tensor_operand, lo=operand, hi=operand)
def test_clamp_and_lerp_result_dtypes(a, lo, hi):
    assume(lo[0] == hi[0] == "py" or lo[0] != "py" and hi[0] != "py")
    both(lambda m, x, y, z: m.clamp(x, y, z), a, lo, hi)
    both(lambda m, x, y: m.lerp(x, x, y), a, lo)
    both(lambda m, x, y, z: m.addcmul(x, y, z), a, ("nd", lo[1]) if lo[0] == "0d" else a,
         ("0d", hi[1]) if hi[0] == "nd" else a)


@SETTINGS
@given(a=tensor_operand, s=python_operand)
def test_inplace_result_must_cast_to_self(a, s):
    # x.add_(y) keeps x's dtype; a result type that cannot be cast to it raises RuntimeError
    both(lambda m, x, y: x.clone().add_(y), a, s)
    both(lambda m, x, y: x.clone().mul_(y), a, s)


@pytest.mark.parametrize("dt", DTYPES)
def test_unary_result_dtypes(dt):
    x = ("nd", dt)
    for fn in [lambda m, x: m.exp(x), lambda m, x: m.abs(x), lambda m, x: m.neg(x),
               lambda m, x: m.sqrt(x), lambda m, x: m.square(x), lambda m, x: m.sign(x),
               lambda m, x: m.floor(x), lambda m, x: m.isnan(x), lambda m, x: m.angle(x),
               lambda m, x: m.sigmoid(x), lambda m, x: m.erf(x), lambda m, x: m.real(x)]:
        both(fn, x)
