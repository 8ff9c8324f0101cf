"""The generated Triton pointwise kernels (codegen/triton, backends/cuda/pointwise.py) through
Triton's interpreter on CPU: CI's proof of every kernel CUDA eager emits, with no GPU.

The fixture makes the CPU backend build its pointwise kernels the way CUDA does (one generated
Triton kernel per definition, dtypes and layout class) and runs them in the interpreter
(``TRITON_INTERPRET=1``, numpy buffers); each op is then compared with PyTorch on CPU, over
dtypes and layouts, and must have launched a Triton kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cpu
from ember.backends.cuda import pointwise, triton_adapter
from ember.backends.xp_ops import set_compiler
from triton_util import SM90_BUILD, compile_for_sm90

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module", autouse=True)
def triton_interpreted():
    if not triton_adapter.interpreting():  # conftest sets it where there is no GPU
        pytest.skip("runs where Triton interprets (TRITON_INTERPRET=1, set without a GPU)")
    set_compiler(cpu.BACKEND.xp, pointwise.compile)
    yield
    set_compiler(cpu.BACKEND.xp, None)


UNARY_F = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
           "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
           "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "frac", "relu"]
UNARY_ANY = ["neg", "sign"]          # integers too
UNARY_ROUND = ["floor", "ceil", "trunc"]
BINARY_F = ["atan2", "hypot", "copysign", "xlogy", "true_divide"]
BINARY_ANY = ["maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]

FLOATS = ["float32", "float64", "bfloat16", "float16"]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        lo = 0 if dtype.startswith("u") else -20
        return rng.integers(lo, 20, shape).astype(dtype)
    a = rng.uniform(-3, 3, shape)
    flat = a.reshape(-1)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.0, -1.0]
    flat[:len(special)] = special[:flat.size]
    return a


def pair(a, dtype):
    t = torch.tensor(a, dtype=getattr(torch, dtype))
    return ember.tensor(a, dtype=getattr(ember, dtype)), t


LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 1),
    "sliced": lambda x: x[:, 1::2],
    "expanded": lambda x: x[:1].expand(4, 6),
}


def check(got, want, dtype):
    assert got.dtype == getattr(ember, str(want.dtype).split(".")[-1]), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    g = got.float().numpy() if got.dtype in (ember.bfloat16, ember.float16) else got.numpy()
    w = want.float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else want.numpy()
    if w.dtype.kind == "f":
        tol = {"float64": 1e-12, "float32": 2e-6}.get(str(w.dtype), 1e-2)
        if dtype in ("bfloat16", "float16"):
            tol = 1e-2
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def launched(fn):
    before = pointwise.STATS["launches"]
    out = fn()
    assert pointwise.STATS["launches"] > before, "no Triton kernel ran"
    return out


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY_F + UNARY_ANY + UNARY_ROUND)
def test_unary_float(name, dtype, layout):
    e, t = pair(values((4, 6), "float64"), dtype)
    e, t = LAYOUTS[layout](e), LAYOUTS[layout](t)
    got = launched(lambda: getattr(ember, name)(e))
    with np.errstate(all="ignore"):
        check(got, getattr(torch, name)(t), dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "bool"])
@pytest.mark.parametrize("name", ["exp", "sqrt", "sigmoid", "neg", "sign", "bitwise_not"])
def test_unary_integer(name, dtype):
    e, t = pair(values((3, 5), dtype), dtype)
    try:
        want = getattr(torch, name)(t)
    except RuntimeError as err:
        with pytest.raises(RuntimeError, match=str(err).split(",")[0][:30]):
            getattr(ember, name)(e)
        return
    check(launched(lambda: getattr(ember, name)(e)), want, dtype)


@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((4, 1), (1, 6)), ((4, 6), ()),
                                    ((2, 3, 4), (3, 1)), ((0, 3), (1, 3))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", BINARY_F + BINARY_ANY)
def test_binary(name, dtype, shapes):
    (ea, ta), (eb, tb) = (pair(values(s, "float64", seed=i), dtype)
                          for i, s in enumerate(shapes))
    fn = lambda: getattr(ember, name)(ea, eb)  # noqa: E731
    want = getattr(torch, name)(ta, tb)
    got = fn() if want.numel() == 0 else launched(fn)
    check(got, want, dtype)


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("name", BINARY_ANY + BITWISE)
def test_binary_integer(name, dtype):
    ea, ta = pair(values((3, 4), dtype, 0), dtype)
    eb, tb = pair(values((3, 4), dtype, 1), dtype)
    check(launched(lambda: getattr(ember, name)(ea, eb)), getattr(torch, name)(ta, tb), dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_clamp_and_where(dtype):
    e, t = pair(values((5, 4), dtype), dtype)
    lo, hi = (-1, 2) if dtype == "int64" else (-1.5, 2.25)
    check(launched(lambda: ember.clamp(e, lo, hi)), torch.clamp(t, lo, hi), dtype)
    check(launched(lambda: ember.clamp(e, min=lo)), torch.clamp(t, min=lo), dtype)
    check(launched(lambda: ember.clamp_max(e, hi)), torch.clamp_max(t, hi), dtype)
    check(launched(lambda: ember.where(e > 0, e, e * 2)), torch.where(t > 0, t, t * 2), dtype)
    if dtype == "float32":  # a definition that reads its number operand's dtype
        check(launched(lambda: ember.lerp(e, e * 2, 0.4)), torch.lerp(t, t * 2, 0.4), dtype)


def test_autograd_through_generated_kernels():
    a = values((3, 4), "float64")
    e = ember.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    launched(lambda: ember.tanh(e).sigmoid().sum().backward())
    torch.tanh(t).sigmoid().sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True)


def test_kernels_are_cached_per_dtype_and_layout(monkeypatch):
    monkeypatch.setattr(pointwise, "_KERNELS", {})
    x = ember.ones(8, 8)
    ember.exp(x)
    emitted = pointwise.STATS["emitted"]
    ember.exp(ember.zeros(8, 8))     # same dtype and layout: the cached kernel
    ember.exp(ember.ones(3, 5))      # other sizes, same class
    assert pointwise.STATS["emitted"] == emitted
    ember.exp(x.t())                 # a strided layout: one more kernel
    ember.exp(x.double())            # another dtype: one more
    assert pointwise.STATS["emitted"] == emitted + 2


def test_the_adapter_refuses_an_untested_triton(monkeypatch):
    import triton
    triton_adapter.triton.cache_clear()
    monkeypatch.setattr(triton, "__version__", "9.9.0")
    monkeypatch.delenv("EMBER_TRITON_UNTESTED", raising=False)
    try:
        with pytest.raises(RuntimeError, match=r"tested with Triton 3\.6.*9\.9\.0"):
            triton_adapter.triton()
    finally:
        triton_adapter.triton.cache_clear()


NO_TORCH = r"""
import os, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this process")
sys.meta_path.insert(0, Block())
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np
import ember
from ember.backends import cpu
from ember.backends.cuda import pointwise
from ember.backends.xp_ops import set_compiler
set_compiler(cpu.BACKEND.xp, pointwise.compile)
x = ember.linspace(-2, 2, 50).reshape(5, 10)
got = ember.sigmoid(x.t()).erf().numpy()
a = np.linspace(-2, 2, 50, dtype=np.float32).reshape(5, 10).T
want = np.vectorize(__import__("math").erf)(1 / (1 + np.exp(-a)))
assert pointwise.STATS["launches"] == 2, pointwise.STATS
assert np.allclose(got, want, rtol=1e-6), abs(got - want).max()
assert "torch" not in sys.modules
print("ok")
"""


def test_generated_kernels_need_no_torch():
    """ember's Triton path (emitter, adapter, interpreter) runs with ``import torch`` blocked."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(ember.__file__)),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_complex_operands_use_the_handler():
    """Triton has no complex types: such calls compute through the array module's handler."""
    before = pointwise.STATS["launches"]
    z = ember.tensor([1 + 2j, -0.5j], dtype=ember.complex64)
    got = ember.exp(z)
    np.testing.assert_allclose(got.numpy(), np.exp(z.numpy()), rtol=1e-6)
    assert pointwise.STATS["launches"] == before


def test_numbers_are_passed_at_launch_not_compiled_in(monkeypatch):
    monkeypatch.setattr(pointwise, "_KERNELS", {})
    x = ember.linspace(-1, 1, 13).bfloat16()  # a shape no other test plans
    emitted = []
    for lo in (-0.5, -0.25, 0.1):
        got = ember.clamp(x, min=lo)
        want = torch.clamp(torch.linspace(-1, 1, 13).bfloat16(), min=lo)
        check(got, want, "bfloat16")
        emitted.append(pointwise.STATS["emitted"])
    assert emitted[0] == emitted[1] == emitted[2]  # the first bound's kernels serve every one


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "int64"])
def test_comparisons_and_where_take_numbers_at_launch(monkeypatch, dtype):
    """A comparison or ``where`` with a Python number: the number passed at launch (no device
    array made for it: ``asarray`` is never called), with PyTorch's results. Beside a half
    tensor a comparison rounds the number to the half type first (0.1 equals half(0.1));
    an integer tensor wraps an out-of-range integer to its width (int8: 1000 is -24)."""
    a = np.array([0.0999755859375, 0.1, -24.0, 1.0, 2.5, -0.0, np.nan, 3.0])
    if dtype.startswith("int"):
        a = np.array([1, 2, 3, -24, 0, -1, 100, 7])
    e, t = pair(a, dtype)
    made = []
    monkeypatch.setattr(cpu.BACKEND.xp, "asarray",
                        lambda *args, real=cpu.BACKEND.xp.asarray, **kw: (
                            made.append(args), real(*args, **kw))[1])
    for number in (0.1, 1000, 2.5, -24, 0):
        for name in ("eq", "ne", "lt", "le", "gt", "ge"):
            check(getattr(ember, name)(e, number), getattr(torch, name)(t, number), dtype)
        if dtype == "int8" and number == 1000:  # PyTorch refuses where's overflowing scalar
            with pytest.raises(RuntimeError, match="int8_t without overflow"):
                torch.where(t > 0, number, t)
            with pytest.raises(RuntimeError, match="int8_t without overflow"):
                ember.where(e > 0, number, e)
            continue
        check(launched(lambda: ember.where(e > 0, number, e)),
              torch.where(t > 0, number, t), dtype)
    half = dtype in ("float16", "bfloat16")
    assert bool(made) == half, made  # half comparisons round the number on the host first


ARITH = [
    ("add", lambda m, a, b: m.add(a, b)), ("add_alpha", lambda m, a, b: m.add(a, b, alpha=3)),
    ("sub", lambda m, a, b: a - b), ("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=2)),
    ("mul", lambda m, a, b: a * b), ("div", lambda m, a, b: a / b),
    ("number_right", lambda m, a, b: a * 3 + 1), ("number_left", lambda m, a, b: 2 - a),
    ("div_number", lambda m, a, b: a / 4), ("rdiv", lambda m, a, b: 1 / a),
    ("broadcast", lambda m, a, b: a[:, :1] + b[:1]),
]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int32", "int8", "uint8"])
@pytest.mark.parametrize("name,fn", ARITH, ids=[n for n, _ in ARITH])
def test_arithmetic_as_generated_kernels(name, fn, dtype):
    """add, sub, mul and div (and their number forms) run as one generated kernel each;
    float16/bfloat16 computed in float32 and rounded once, integers wrapping."""
    (ea, ta), (eb, tb) = pair(values((3, 4), dtype, 0), dtype), pair(values((3, 4), dtype, 1),
                                                                     dtype)
    if dtype in ("int8", "uint8", "int32"):
        eb, tb = eb.clamp(min=1), tb.clamp(min=1)  # no integer division by zero
    got = launched(lambda: fn(ember, ea, eb))
    check(got, fn(torch, ta, tb), dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_and_its_backward_as_generated_kernels(approximate, dtype):
    """GELU's definitions (ops/activations.py: what CUDA eager compiles; the CPU backend keeps
    its native kernels), forward and grad * gelu'(x), over the tails and special values."""
    from ember.ops import activations
    a = values((6, 7), "float64")
    a[2] = np.linspace(-12, 12, 7)
    a[3] = [-40, -9.5, -5.5, -1e-3, 1e-30, 5.5, 40]
    a[0, 1] = 6e4  # torch's vectorised CPU GELU makes NaN of +inf (its scalar path: inf)
    g = values((6, 7), "float64", seed=1)
    (_, tx), (_, tg) = pair(a, dtype), pair(g, dtype)
    xp = cpu.BACKEND.xp
    x_arr = tx.float().numpy() if dtype in ("bfloat16", "float16") else tx.numpy()
    g_arr = tg.float().numpy() if dtype in ("bfloat16", "float16") else tg.numpy()
    x_arr, g_arr = x_arr.astype(getattr(ember, dtype).np), g_arr.astype(getattr(ember, dtype).np)
    with np.errstate(all="ignore"):
        got = launched(lambda: activations._GELU[approximate](xp, x_arr))
        back = launched(lambda: activations._GELU_BACKWARD[approximate](xp, g_arr, x_arr))
    check(ember.tensor(got), torch.nn.functional.gelu(tx, approximate=approximate), dtype)
    check(ember.tensor(back), torch.ops.aten.gelu_backward(tg, tx, approximate=approximate), dtype)


@pytest.mark.parametrize("src,dst", [("float32", "bfloat16"), ("bfloat16", "float32"),
                                     ("float32", "float16"), ("float16", "float64"),
                                     ("float64", "float32"), ("float32", "int32"),
                                     ("int64", "float32"), ("int32", "int8"), ("float32", "bool"),
                                     ("bool", "bfloat16"), ("uint8", "int64")])
def test_conversions_as_generated_kernels(src, dst):
    """``compiled_cast`` (CUDA's ``_to_copy`` override and its widening of operands: one
    generated kernel per dtype pair) against torch's ``.to(dtype)``: round to nearest even,
    truncation towards zero, wrapping, ``!= 0``."""
    from ember.backends.xp_ops import compiled_cast
    a = values((5, 6), src if src in ("bool", "int32", "int64", "uint8") else "float64") * \
        (1 if src in ("bool", "uint8") else 7)
    if src.startswith("float") and dst.startswith(("int", "bool")):
        a = np.where(np.isfinite(a), a, 3.75)  # NaN / inf to integers: undefined, as in C
    e, t = pair(a, src)
    xp = cpu.BACKEND.xp
    with np.errstate(all="ignore"):
        got = launched(lambda: compiled_cast(xp, e._data, getattr(ember, dst)))
    check(ember.tensor(got), t.to(getattr(torch, dst)), dst)
    assert compiled_cast(xp, e._data[:, ::2], getattr(ember, dst)) is None  # keeps layouts
    assert compiled_cast(xp, e._data, getattr(ember, src)) is None
    if src == "float64":
        assert compiled_cast(xp, e._data, ember.bfloat16) is None  # rounds through float32


# ---------------------------------------------------------------------- the GPU launch path
class _Device(np.ndarray):
    """A numpy array with CuPy's ``data.ptr`` (each address asked for is remembered)."""

    SEEN: dict = {}

    @property
    def data(self):
        import types
        ptr = self.__array_interface__["data"][0]
        _Device.SEEN[ptr] = self
        return types.SimpleNamespace(ptr=ptr)


def test_gpu_path_prepares_a_launcher_per_plan_and_launches_by_address(monkeypatch):
    """The GPU path of a generated kernel (CuPy's arrays faked by ``_Device``; ``prepare`` and
    ``launch`` replaced by ones that map addresses back to arrays and interpret the kernel):
    a plan's first aligned launch goes through ``launch`` and prepares a launcher, later ones
    call it with plain addresses and the plan's sizes; an unaligned view takes ``launch``;
    Python numbers passed at launch go to the prepared launcher while their types match
    (float; an int of 32 bits, then one needing 64 takes ``launch``)."""
    import types

    from ember.ops.binary import _sum, _sum_scaled
    seen, calls = _Device.SEEN, {"prepare": 0, "go": 0, "launch": 0}

    def dev(a):
        a = a.view(_Device)
        seen[a.data.ptr] = a
        return a

    def run(kernel, grid, args, constexprs):
        args = [seen[a] if type(a) is int and a in seen else a for a in args]
        kernel[grid](*triton_adapter.host_args(args), **constexprs)

    def prepare(kernel, grid, args, **constexprs):
        calls["prepare"] += 1
        n_ptr = sum(type(a) is triton_adapter.Pointer for a in args)
        assert all(a.ptr % 16 == 0 for a in args[:n_ptr])
        fixed = args[-1]  # the element count (dense operands: after the numbers)

        def go(stream, *a):
            calls["go"] += 1
            assert stream == 77 and a[-1] == fixed
            run(kernel, grid, a, constexprs)
        return go

    def launch(kernel, grid, args, stream=None, **constexprs):
        calls["launch"] += 1
        run(kernel, grid, [a.ptr if type(a) is triton_adapter.Pointer else a for a in args],
            constexprs)
    monkeypatch.setattr(triton_adapter, "prepare", prepare)
    monkeypatch.setattr(triton_adapter, "launch", launch)
    monkeypatch.setattr(triton_adapter, "interpreting", lambda: False)
    monkeypatch.setattr(triton_adapter, "current_device", lambda: 0)
    monkeypatch.setattr(triton_adapter, "current_stream", lambda: 77)
    triton_adapter._patch_interpreter()
    xp = types.SimpleNamespace(empty=lambda *a: dev(np.empty(*a)))
    add = pointwise.compile(_sum.kernels.defn, xp)
    rng = np.random.default_rng(0)
    for k in range(3):
        a, b = (dev(rng.standard_normal((5, 7)).astype(np.float32)) for _ in range(2))
        out = add(a, b)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(a) + np.asarray(b))
    assert calls == {"prepare": 1, "go": 2, "launch": 1}
    base = dev(rng.standard_normal(40).astype(np.float32))
    a, b = base[1:36].reshape(5, 7), base[:35].reshape(5, 7)  # 4 bytes past aligned
    np.testing.assert_array_equal(np.asarray(add(a, b)), np.asarray(a) + np.asarray(b))
    assert calls["launch"] == 2 and calls["prepare"] == 1
    scaled = pointwise.compile(_sum_scaled.kernels.defn, xp)
    a, b = (dev(rng.standard_normal((5, 7)).astype(np.float32)) for _ in range(2))
    for alpha in (2.0, 3.0, -0.5):  # numbers at launch: prepared after the first call
        got = scaled(a, b, alpha)
        np.testing.assert_allclose(np.asarray(got), np.asarray(a) + alpha * np.asarray(b),
                                   rtol=1e-6)
    assert calls == {"prepare": 2, "go": 4, "launch": 3}
    ia, ib = (dev(rng.integers(-9, 9, (5, 7))) for _ in range(2))
    for alpha in (2, 3, 2**40, 5):  # int64 operands: a 64-bit number takes launch
        got = scaled(ia, ib, alpha)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ia) + alpha * np.asarray(ib))
    assert calls == {"prepare": 3, "go": 6, "launch": 5}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_inplace_arithmetic_is_one_kernel_into_self(name, dtype):
    """The CUDA backend's "inplace" override of add/sub/mul/div (pointwise.inplace): one
    launch writing the out-of-place kernel's values into x, for another array (broadcast),
    x itself, a Python number and alpha; nothing written (False) where the result has not
    x's dtype or shape, where x is not contiguous, or for an integer x with a float alpha."""
    import types

    from ember.backends.xp_ops import ARITHMETIC
    plain, scaled, integers = ARITHMETIC[name]
    into = pointwise.inplace(plain, scaled, integers, types.SimpleNamespace(xp=cpu.BACKEND.xp))
    t_op = getattr(torch, name)

    def run(b, alpha=None, shape=(4, 6)):
        x, tx = pair(values(shape, dtype), dtype)
        a = x._data
        kw = {} if alpha is None else {"alpha": alpha}
        tb = tx if b is None else b if not isinstance(b, np.ndarray) else torch.tensor(
            np.asarray(b, np.float64), dtype=getattr(torch, dtype))  # (None: x itself)
        want = t_op(tx, tb, **kw)
        before = a.copy()
        launches = pointwise.STATS["launches"]
        done = into(a, b if b is not None else a, alpha)
        if want.dtype != tx.dtype or tuple(want.shape) != tuple(tx.shape):
            assert not done and np.array_equal(a.view(np.uint8), before.view(np.uint8))
            return
        assert done and pointwise.STATS["launches"] == launches + 1
        check(x, want, dtype)

    other = pair(values((6,), dtype, 1), dtype)[0]._data
    run(other)                                   # broadcast over x's rows
    run(pair(values((4, 6), dtype, 2), dtype)[0]._data)
    run(2 if dtype == "int64" else 0.5)          # a Python number
    run(None)                                    # x itself: x.add_(x)
    if scaled is not None:
        run(other, alpha=3)
        if dtype == "int64":
            assert not into(pair(values((4, 6), dtype), dtype)[0]._data, other, 0.5)
    big = pair(values((3, 4, 6), dtype, 3), dtype)[0]._data
    assert not into(pair(values((4, 6), dtype), dtype)[0]._data, big, None)  # result is larger
    strided = pair(values((4, 12), dtype), dtype)[0]._data[:, ::2]
    assert not into(strided, other, None)


# the GELU definitions (the primitive ncdf's Triton spelling: an fma, erfc, exp) emitted as
# kernels and compiled for Hopper by Triton's real compiler, which the interpreter is not
_SM90_GELU = r"""
import importlib.util, os, tempfile
import triton.language as tl
from triton.language.extra import libdevice
from ember import _dtype as D
from ember.codegen.triton.pointwise import Operand, emit
from ember.ops import activations as A
""" + SM90_BUILD + r"""
PTR = {D.float32: "*fp32", D.float64: "*fp64", D.bfloat16: "*bf16", D.float16: "*fp16"}
folder = tempfile.mkdtemp()
for table, arity in ((A._GELU, 1), (A._GELU_BACKWARD, 2)):
    for approximate, fn in table.items():
        for dt in (D.float32, D.float64, D.bfloat16):
            k = emit(fn.kernels.defn, (Operand(dt, "dense"),) * arity, 1, "gelu_k")
            path = os.path.join(folder, f"k{len(os.listdir(folder))}.py")
            with open(path, "w") as f:
                f.write(k.source)
            spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
            mod = importlib.util.module_from_spec(spec)
            mod.libdevice = libdevice
            spec.loader.exec_module(mod)
            kernel = getattr(mod, k.name)
            types = {a: PTR[dt] for a in kernel.arg_names if a.endswith("_ptr")}
            types["n"] = "i64"
            build(kernel, types, BLOCK=256)
print("ok")
"""


def test_gelu_kernels_compile_for_sm90():
    compile_for_sm90(_SM90_GELU)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_definitions_computing_with_their_numbers_compile_them_in(dtype):
    """Definitions that use a number as a Python constant (elu's alpha * scale, the shrinks'
    -lambd, logit's 1 - eps, round's decimals, isclose's equal_nan) cannot take it at launch:
    their kernels get the numbers compiled in, by value (found on the H200, where each of
    these raised a TypeError from the kernel generator)."""
    F = torch.nn.functional
    e, t = pair(values((5, 6), dtype), dtype)
    ep = ember.tensor(np.abs(values((5, 6), dtype, 1)) % 1, dtype=getattr(ember, dtype))
    tp = torch.tensor(ep.float().numpy()).to(getattr(torch, dtype))
    for name, kw in (("elu", {"alpha": 0.7}), ("celu", {"alpha": 1.3}), ("selu", {}),
                     ("softshrink", {"lambd": 0.4}), ("hardshrink", {"lambd": 0.6})):
        for k in range(2):  # a second value: another kernel, not the first one's number
            kw2 = {a: v + 0.25 * k for a, v in kw.items()}
            check(launched(lambda: getattr(ember.nn.functional, name)(e, **kw2)),
                  getattr(F, name)(t, **kw2), dtype)
    check(launched(lambda: ember.logit(ep, 0.05)), torch.logit(tp, 0.05), dtype)
    for d in (0, 1, -1):
        check(launched(lambda: ember.round(e * 7, decimals=d)), torch.round(t * 7, decimals=d),
              dtype)
    for nan in (False, True):
        check(launched(lambda: ember.isclose(e, e + 0.01, 0.02, 1e-3, nan)),
              torch.isclose(t, t + 0.01, 0.02, 1e-3, nan), dtype)
