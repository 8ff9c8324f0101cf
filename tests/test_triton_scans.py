"""ember's Triton scan kernel (backends/cuda/scan_kernels.py, wrappers scans.py) through
Triton's interpreter on CPU, against PyTorch on CPU: cumsum, cumprod, cummax, cummin and
logcumsumexp over every dim, every dtype the ops take, strided views, NaN / inf / ties, empty
and 0-d inputs, the ``dtype=`` argument, and rows longer than one block (``scans.BLOCK`` made
small). First the wrappers on numpy arrays, then through ember's ops with the CPU backend's
"kernel" overrides swapped for the scan kernels (restored after), values and gradients.
Last, the kernel compiles for sm_90 in every operation and accumulator type (no GPU needed).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, SM90_BUILD, compile_for_sm90, cpu_overrides
from ember.backends import cpu
from ember.backends.cuda import scans
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
ALL = ["bool"] + INTS + FLOATS
TOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}
REF = {"cumsum": torch.cumsum, "cumprod": torch.cumprod, "cummax": torch.cummax,
       "cummin": torch.cummin, "logcumsumexp": torch.logcumsumexp}


@pytest.fixture
def block(monkeypatch):
    """Blocks of 4 elements: rows of 5 or more take several steps with a carry (rows of
    up to 4, one block, as the default BLOCK gives most rows)."""
    monkeypatch.setattr(scans, "BLOCK", 4)


def values(shape, dtype, seed=0):
    """Values exact in ``dtype`` as a torch tensor: small integers (ties included) for
    integer and bool dtypes, normal values near 1 in magnitude for floats."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return torch.tensor(rng.integers(0, 2, shape).astype(bool))
    if dtype in INTS:
        lo = 0 if dtype == "uint8" else -3
        return torch.tensor(rng.integers(lo, 4, shape)).to(getattr(torch, dtype))
    return torch.tensor(rng.standard_normal(shape) * 1.5).to(getattr(torch, dtype))


def as_np(t):
    """A torch CPU tensor's values as a numpy array of ember's dtype for them."""
    dt = getattr(ember, str(t.dtype).split(".")[-1])
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(dt.np)
    return t.numpy()


def check(got, want, tol=None):
    """A wrapper's array against torch's tensor: dtype, shape, values (exact for integers
    and bool, NaN where torch has NaN)."""
    assert got.dtype == getattr(ember, str(want.dtype).split(".")[-1]).np
    assert got.shape == tuple(want.shape)
    if want.dtype.is_floating_point:
        t = tol if tol is not None else TOL[str(want.dtype).split(".")[-1]]
        np.testing.assert_allclose(got.astype(np.float64), want.double().numpy(), rtol=t,
                                   atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want.numpy())


def run(name, x, dim, **kw):
    """The wrapper of ``name`` on torch tensor ``x`` against torch's op."""
    got = scans.OVERRIDES[name](as_np(x), dim, **kw)
    tkw = {k: getattr(torch, str(v).split(".")[-1]) for k, v in kw.items()}
    want = REF[name](x, dim, **tkw)
    if name in ("cummax", "cummin"):
        check(got[0], want.values)
        check(got[1], want.indices)
    else:
        # products of many factors and sums that cancel: their rounding grows with the row
        tol = None if x.dtype != torch.float32 or name == "logcumsumexp" else 1e-5
        check(got, want, tol)


# ---------------------------------------------------------------------- wrappers
@pytest.mark.parametrize("name", list(REF))
def test_every_dim_of_a_3d_array(name, block):
    x = values((2, 3, 5), "float32")
    for dim in (0, 1, -1):
        run(name, x, dim)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
def test_every_dtype(name, dtype):
    """Integers and bool exact (cumsum / cumprod in int64), floats within their rounding."""
    run(name, values((3, 6), dtype), 1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp_dtypes(dtype):
    run("logcumsumexp", values((3, 6), dtype), 1)


def test_integer_products_wrap_in_int64():
    x = torch.tensor([[2 ** 40, 2 ** 30, 3, -5, 7], [-128, 127, 100, -3, 2]])
    run("cumprod", x, 1)
    run("cumsum", torch.tensor([[2 ** 62, 2 ** 62, 2 ** 62, 1]]), 1)
    run("cumsum", torch.tensor([[100, 100, 100]], dtype=torch.int8), 1)  # int64, no wrap
    run("cumsum", torch.tensor([[100, 100, 100]], dtype=torch.int8), 1, dtype=ember.int8)


@pytest.mark.parametrize("src,dst", [("float32", "float64"), ("float32", "float16"),
                                     ("float64", "float32"), ("int32", "float32"),
                                     ("bool", "int32"), ("int64", "int16"),
                                     ("float32", "int32"), ("bfloat16", "float32"),
                                     ("uint8", "uint8")])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_dtype_argument_converts_first(name, src, dst):
    x = values((2, 7), src)
    if src.startswith("float"):
        x = x * 3
    run(name, x, 1, dtype=getattr(ember, dst))


def test_long_rows_cross_many_blocks(monkeypatch):
    """A carry through 4 blocks of 4 (the last one partial), in every op."""
    monkeypatch.setattr(scans, "BLOCK", 4)
    x = values((2, 13), "float64")
    x[0, 6] = x[0, 2]  # a tie across blocks
    for name in REF:
        run(name, x, 1)
        run(name, x.T.contiguous(), 0)
    run("cummax", values((2, 13), "int16"), 1)
    run("cumsum", values((2, 13), "bool"), 1)


def test_running_extrema_ties_and_nan(block):
    """Equal values move the index to the later one; NaN propagates with the index of the
    latest NaN; +-inf and -0.0 / 0.0 ties."""
    inf, nan = float("inf"), float("nan")
    rows = [[1.0, 3.0, 3.0, 2.0, 3.0, 0.0, 3.0], [nan, 1.0, nan, 5.0, -inf, inf, 2.0],
            [-inf, -inf, -inf, inf, inf, 1.0, inf], [0.0, -0.0, 0.0, -0.0, 1.0, nan, 1.0],
            [2.0, 1.0, 1.0, 0.0, 0.0, -1.0, -1.0]]
    for dt in (torch.float32, torch.bfloat16):
        x = torch.tensor(rows, dtype=dt)
        for name in ("cummax", "cummin"):
            run(name, x, 1)
            run(name, x.T, 0)
    run("cummax", torch.tensor([[3, 3, 1, 3, 5, 5]], dtype=torch.uint8), 1)
    run("cummin", torch.tensor([[-2 ** 63, 0, -2 ** 63, 2 ** 63 - 1]]), 1)
    run("cummin", torch.tensor([[True, False, True, False]]), 1)


def test_logcumsumexp_infinities_and_nan(block):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, -inf, 0.0, -inf, 1.0, 30.0, -30.0],
                      [inf, 1.0, inf, -inf, 2.0, 3.0, 4.0],
                      [0.0, nan, 1.0, 2.0, -inf, inf, 0.0],
                      [-inf] * 7,
                      [88.0, 88.5, 89.0, -100.0, 1e-30, 0.0, 0.0]])
    for dt in (torch.float32, torch.float64, torch.float16):
        run("logcumsumexp", x.to(dt), 1)
    run("cumsum", x, 1)
    run("cumprod", x, 1)


LAYOUTS = {
    "transposed": lambda a: a.transpose(0, 1),
    "sliced": lambda a: a[:, ::2],
    "expanded": lambda a: a[:1].expand(3, 4, 3),
    "permuted": lambda a: a.permute(2, 0, 1),
    "flipped": lambda a: a.flip(1),
    "unmergeable": lambda a: a[:, ::2, :].transpose(1, 0),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_strided_inputs(layout, block):
    """(cummax: its values and indices show every element's address)"""
    x = LAYOUTS[layout](values((3, 4, 3), "float32"))
    for dim in range(x.ndim):
        run("cummax", x, dim)


def test_reads_in_place_where_the_layout_merges():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    before = scans.STATS["launches"]
    for v, axis in ((x.transpose(2, 0, 1), 0), (x[:, :, ::2], 1), (x[:, ::-1], 1)):
        assert scans._three(v, axis) is not None  # no copy first
        np.testing.assert_array_equal(scans.OVERRIDES["cumsum"](v, axis),
                                      np.cumsum(v, axis))
    assert scans.STATS["launches"] == before + 3


def test_empty_and_zero_dim():
    """cummax / cummin of empty arrays: empty results here; the rest go to the impl."""
    e = np.zeros((0, 3), np.float32)
    for name in ("cummax", "cummin"):
        v, i = scans.OVERRIDES[name](e, 1)
        assert v.shape == i.shape == (0, 3) and v.dtype == np.float32 and i.dtype == np.int64
        v, i = scans.OVERRIDES[name](np.zeros((2, 0), np.int16), 0)
        assert v.shape == (2, 0) and v.dtype == np.int16
        assert scans.OVERRIDES[name](np.array(2.0, np.float32), 0) is None
    for name in ("cumsum", "cumprod", "logcumsumexp"):
        assert scans.OVERRIDES[name](e, 1) is None
        assert scans.OVERRIDES[name](np.array(2.0, np.float32), -1) is None
    # a one-element row
    check(scans.OVERRIDES["cumprod"](np.array([[3]], np.int8), 0), torch.tensor([[3]]))


def test_wrappers_decline_what_the_impl_handles():
    x = np.ones((2, 3), np.float32)
    c = np.ones((2, 3), np.complex64)
    for name, fn in scans.OVERRIDES.items():
        assert fn(x, 2) is None and fn(x, -3) is None  # the impl's IndexError
        assert fn(x, 1.0) is None and fn(x, True) is None and fn(x, None) is None
        assert fn(x, 1, out_of_place=1) is None  # an unknown keyword: the impl's TypeError
        assert fn(x, np.int64(1)) is not None  # an integer of another type
        assert fn(c, 1) is None  # complex: CuPy's cumsum / cumprod, the others' errors
    for name in ("cumsum", "cumprod"):
        fn = scans.OVERRIDES[name]
        assert fn(x, 1, dtype=ember.bool) is None  # the impl's NotImplementedError
        assert fn(x, 1, dtype=ember.complex64) is None
        assert fn(x.astype(bool), 1, dtype=ember.bool) is None
    assert scans.OVERRIDES["logcumsumexp"](np.ones((2, 3), np.int64), 1) is None
    assert scans.OVERRIDES["logcumsumexp"](np.ones((2, 3), bool), 1) is None
    assert scans.OVERRIDES["cummax"].widens_half and scans.OVERRIDES["logcumsumexp"].widens_half


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_scans():
    """The CPU backend's "kernel" overrides of the scans swapped for the Triton kernel (under
    the interpreter, on numpy arrays); the previous ones put back after."""
    with cpu_overrides(scans.OVERRIDES, scans.STATS) as launched:
        yield launched


def pair(shape, dtype, seed=0):
    t = values(shape, dtype, seed)
    e = ember.tensor(t.double().numpy()).to(getattr(ember, dtype))
    return e.requires_grad_(), t.requires_grad_()


def close_t(e, t, dtype, scale=1.0):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(e.detach().double().numpy(), t.detach().double().numpy(),
                               rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"])
def test_ember_values_and_grads_through_the_kernel(cpu_scans, name, dtype):
    e, t = pair((3, 5), dtype)
    ye, yt = getattr(ember, name)(e, 1), getattr(torch, name)(t, 1)
    if name in ("cummax", "cummin"):
        np.testing.assert_array_equal(ye.indices.numpy(), yt.indices.numpy())
        ye, yt = ye.values, yt.values
    close_t(ye, yt, dtype, scale=4)
    g = values((3, 5), "float64", seed=1)
    ye.backward(ember.tensor(g.numpy()).to(getattr(ember, dtype)))
    yt.backward(g.to(getattr(torch, dtype)))
    close_t(e.grad, t.grad, dtype, scale=8)
    assert cpu_scans() >= 1 + (name in ("cumsum", "cumprod", "logcumsumexp"))


def test_ember_ops_dtypes_and_errors_through_the_kernel(cpu_scans):
    x = ember.tensor([[1, 2, 3], [4, 5, 6]], dtype=ember.int32)
    assert ember.cumsum(x, 1).dtype == ember.int64
    assert ember.cumsum(x, 0, dtype=ember.float16).dtype == ember.float16
    assert ember.cumprod(x.bool(), 1).tolist() == [[1, 1, 1], [1, 1, 1]]
    h = ember.tensor([[1.0, 3.0, 2.0]], dtype=ember.float16)
    v, i = ember.cummax(h, 1)
    assert v.dtype == ember.float16 and v.tolist() == [[1.0, 3.0, 3.0]]
    assert i.tolist() == [[0, 1, 1]]
    assert ember.logcumsumexp(h, 1).dtype == ember.float16
    y = ember.zeros(2, 3)
    z = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    z.cumsum_(0)
    assert z.tolist() == [[1.0, 2.0], [4.0, 6.0]]
    ember.cumsum(ember.tensor([[1.0, 2.0]]), 1, out=y[:1, :2])
    assert y.tolist() == [[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]]
    launched = cpu_scans()
    assert launched >= 7
    with pytest.raises(NotImplementedError, match="cumsum_out_cpu"):
        ember.cumsum(ember.ones(2, 3), 1, dtype=ember.bool)
    with pytest.raises(NotImplementedError, match="logcumsumexp_out_cpu"):
        ember.logcumsumexp(ember.ones(2, 3, dtype=ember.int64), 1)
    with pytest.raises(NotImplementedError, match="cummax_cpu"):
        ember.cummax(ember.ones(2, dtype=ember.complex64), 0)
    with pytest.raises(IndexError):
        ember.cummin(ember.ones(2, 3), 2)
    with pytest.raises(TypeError):
        ember.cumsum(ember.ones(2, 3), 1.0)
    with pytest.raises(TypeError, match="cummax"):
        ember.cummax(ember.ones(2, 3), 1, foo=1)
    assert cpu_scans() == launched
    v, i = ember.cummax(ember.tensor([[1.0, 3.0, 2.0]]), ember.tensor(1))  # a tensor as dim
    assert v.tolist() == [[1.0, 3.0, 3.0]] and i.tolist() == [[0, 1, 1]]
    launched += 1
    assert cpu_scans() == launched
    v, i = ember.cummax(ember.zeros(0, 2), 0)
    assert v.shape == i.shape == (0, 2) and i.dtype == ember.int64


def test_cpu_backend_overrides_restored():
    from ember.backends import cpu_kernels  # noqa: F401  (its overrides are the CPU's)
    for name in scans.OVERRIDES:
        assert OPS[name]._kernel_overrides.get(cpu.BACKEND) is not scans.OVERRIDES[name]


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = SM90_BUILD + r"""
from ember.backends.cuda import scan_kernels as K

I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1
cases = []  # (OP, input, output, ACC (None: int64), IDENT)
for op in (0, 1):
    one = float(op)
    cases += [(op, "fp32", "fp32", False, one), (op, "bf16", "bf16", False, one),
              (op, "fp64", "fp64", True, one), (op, "fp32", "fp16", False, one),
              (op, "i32", "fp64", True, one), (op, "u8", "i64", None, op),
              (op, "i64", "i64", None, op), (op, "fp32", "i32", None, op)]
for op, lo, hi in ((2, float("-inf"), I64_MIN), (3, float("inf"), I64_MAX)):
    cases += [(op, t, t, t == "fp64", lo) for t in ("fp32", "bf16", "fp64")]
    cases += [(op, t, t, None, hi) for t in ("u8", "i64")]
cases += [(4, t, t, t == "fp64", float("-inf")) for t in ("fp32", "fp16", "fp64")]
for k, (op, src, dst, f64, ident) in enumerate(cases):
    acc = tl.int64 if f64 is None else tl.float64 if f64 else tl.float32
    block = (1024, 1, 16)[k % 3]
    sig = {a: "i32" for a in K.scan.arg_names}
    sig.update(x_ptr="*" + src, y_ptr="*" + dst, yi_ptr="*i64", xso="i64", xsn="i64")
    consts = dict(OP=op, ACC=acc, IDENT=ident, BLOCK=block)
    sig.update({c: "constexpr" for c in consts})
    triton.compile(ASTSource(K.scan, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": WARPS})
print("ok")
"""


def test_kernel_compiles_for_sm90():
    """The scan kernel in every operation, accumulator and element type, through Triton's
    compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
