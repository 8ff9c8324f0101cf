"""ember's Triton row kernels (backends/cuda/row_kernels.py, wrappers rows.py) through Triton's
interpreter on CPU, against PyTorch on CPU: the softmax family and its backward over every dim
and layout, layer norm forward and backward, RMS norm; each in one block per row and (with
``rows.TILE`` made small) in the multi-block path. First the wrappers on numpy arrays, then
through ember's ops with the CPU backend's "kernel" overrides swapped for the row kernels
(restored after), values and gradients. Last, the kernels compile for sm_90 (no GPU needed),
which the interpreter alone would not show.
"""

from __future__ import annotations


import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, SM90_BUILD, compile_for_sm90, cpu_overrides
from ember.backends import cpu
from ember.backends.cuda import rows
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

FLOATS = ["float32", "float64", "float16", "bfloat16"]
SOFTMAX = {"softmax": (0, torch.softmax), "log_softmax": (1, torch.log_softmax),
           "_safe_softmax": (2, torch.ops.aten._safe_softmax)}
CASES = [((3, 5), 1), ((4, 1030), 1), ((4, 1030), -2), ((2, 3, 4), 0), ((2, 3, 4), 1),
         ((2, 3, 4), 2), ((2, 1, 37, 3), 2)]


@pytest.fixture(params=["one_block", "multi_block"])
def tile(request, monkeypatch):
    """Rows in one block (the default tile) or split into many (a 256-element tile)."""
    if request.param == "multi_block":
        monkeypatch.setattr(rows, "TILE", 256)
    return request.param


def data(shape, dtype, seed=0, scale=3.0):
    """float64 values exact in ``dtype``."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    return torch.tensor(a).to(getattr(torch, dtype)).double().numpy()


def as_np(a, dtype):
    return a.astype(getattr(ember, dtype).np)


def tol(dtype):
    return {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]


def close(got, want, dtype, scale=1.0, sums=False):
    """``got`` (numpy) against ``want`` (torch), within ``dtype``'s rounding; ``sums``:
    values that cancel, compared to the largest one."""
    assert got.dtype == getattr(ember, str(want.dtype).split(".")[-1]).np
    assert got.shape == tuple(want.shape)
    w = want.double().numpy()
    t = tol(dtype) * scale
    atol = t * max(1.0, float(np.nanmax(np.abs(w), initial=0))) if sums else t
    np.testing.assert_allclose(got.astype(np.float64), w, rtol=t, atol=atol, equal_nan=True)


# ---------------------------------------------------------------------- softmax wrappers
@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("name,dtype", [(n, d) for n in SOFTMAX for d in FLOATS
                                        if d == "float32" or n != "_safe_softmax"])
def test_softmax_wrappers_match_torch(name, dtype, shape, dim, tile):
    kind, ref = SOFTMAX[name]
    a = data(shape, dtype)
    got = rows.OVERRIDES[name](as_np(a, dtype), dim)
    close(got, ref(torch.tensor(a).to(getattr(torch, dtype)), dim), dtype)


@pytest.mark.parametrize("name", list(SOFTMAX))
def test_softmax_nan_and_inf_rows(name, tile):
    """A row of only -inf: NaN (zeros for _safe_softmax); -inf entries give 0 (log: -inf),
    also when the first blocks of a long row are all -inf; +inf or NaN in a row: NaN."""
    a = data((6, 1030), "float32")
    a[0] = -np.inf
    a[1, :700] = -np.inf
    a[2, 5] = np.inf
    a[3, 1000] = np.nan
    a[4, ::2] = -np.inf
    a[5] = np.nan
    a[5, ::3] = -np.inf  # NaN and -inf only: NaN, also for _safe_softmax
    for x in (a, a[:, :7]):
        x = np.ascontiguousarray(x, np.float32)
        got = rows.OVERRIDES[name](x, 1)
        want = SOFTMAX[name][1](torch.tensor(x), 1)
        close(got, want, "float32")
        got_t = rows.OVERRIDES[name](np.ascontiguousarray(x.T), 0)  # the same rows strided
        close(got_t.T, want, "float32")


@pytest.mark.parametrize("src,dst", [("float16", "float32"), ("float32", "float64"),
                                     ("float32", "float16"), ("bfloat16", "float16"),
                                     ("float64", "float32")])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_dtype_argument_converts_first(name, src, dst):
    a = data((4, 1030), src)
    got = rows.OVERRIDES[name](as_np(a, src), 1, dtype=getattr(ember, dst))
    want = SOFTMAX[name][1](torch.tensor(a).to(getattr(torch, src)), 1,
                            dtype=getattr(torch, dst))
    close(got, want, "float32" if dst == "float64" else dst)


@pytest.mark.parametrize("name", list(SOFTMAX))
def test_softmax_zero_dim_empty_and_declined(name):
    fn = rows.OVERRIDES[name]
    got = fn(np.array(2.5, np.float32), 0)
    assert got.shape == () and got == (0.0 if name == "log_softmax" else 1.0)
    assert fn(np.array(2.5, np.float32), -1).shape == ()
    # the impl's cases: errors, empty inputs, other dtypes
    assert fn(np.zeros((0, 3), np.float32), 1) is None
    assert fn(np.zeros((2, 3), np.float32), 2) is None
    assert fn(np.zeros((2, 3), np.float32), 1.0) is None
    assert fn(np.zeros((2, 3), np.int64), 1) is None
    assert fn(np.zeros((2, 3), np.complex64), 1) is None
    assert fn(np.zeros((2, 3), np.float32), 1, dtype=ember.int32) is None


LAYOUTS = {
    "transposed": lambda a: a.T,
    "sliced": lambda a: a[:, ::2],
    "expanded": lambda a: np.broadcast_to(a[:1], a.shape),
    "permuted3d": lambda a: a.reshape(2, 3, -1).transpose(2, 0, 1),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_softmax_strided_inputs(layout, tile):
    a = as_np(data((6, 10), "float32"), "float32")
    x = LAYOUTS[layout](a)
    for dim in range(x.ndim):
        for name in SOFTMAX:
            close(rows.OVERRIDES[name](x, dim), SOFTMAX[name][1](torch.tensor(x), dim),
                  "float32")


def test_no_copy_when_layout_merges():
    """A contiguous array is read in place along any dim, and so are transposes."""
    a = np.zeros((4, 5, 6), np.float32)
    for axis in range(3):
        (x,), st, sizes = rows._rows_of([a], axis)
        assert x is a and sizes[1] == a.shape[axis]
    (x,), st, sizes = rows._rows_of([a], 2)
    assert st == [6, 1, 0] and sizes == (20, 6, 1)
    (x,), st, sizes = rows._rows_of([a.transpose(2, 0, 1)], 0)
    assert x.base is a and st == [0, 1, 6] and sizes == (1, 6, 20)
    (x,), _, _ = rows._rows_of([a[:, ::2, :].transpose(1, 0, 2)], 2)  # does not merge: copied
    assert x.flags.c_contiguous


# ---------------------------------------------------------------------- softmax backward
@pytest.mark.parametrize("shape,dim", [c for c in CASES if c[1] != -2] + [((), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_wrappers_match_torch(log, dtype, shape, dim, tile):
    name = "_log_softmax_backward_data" if log else "_softmax_backward_data"
    t = torch.tensor(data(shape, dtype, seed=1)).to(getattr(torch, dtype))
    y = (torch.log_softmax if log else torch.softmax)(t, dim)
    g = torch.tensor(data(shape, dtype, seed=2)).to(getattr(torch, dtype))
    want = getattr(torch.ops.aten, name)(g, y, dim, y.dtype)
    close(rows.OVERRIDES[name](g.numpy(), y.numpy(), dim), want, dtype, scale=4)
    if shape == (3, 5):  # the transposes of both, along the other dim
        got = rows.OVERRIDES[name](g.numpy().T, y.numpy().T, 1 - dim % 2)
        close(got.T, want, dtype, scale=4)
    ones = np.broadcast_to(np.ones((), y.numpy().dtype), y.shape)  # an expanded gradient
    got = rows.OVERRIDES[name](ones, y.numpy(), dim)
    close(got, getattr(torch.ops.aten, name)(torch.ones_like(y), y, dim, y.dtype), dtype, 4)


def test_softmax_backward_declines_mismatches():
    fn = rows.OVERRIDES["_softmax_backward_data"]
    y = np.zeros((2, 3), np.float32)
    assert fn(np.zeros((2, 3), np.float64), y, 1) is None
    assert fn(np.zeros((1, 3), np.float32), y, 1) is None
    assert fn(y, y, 3) is None
    assert fn(y[:0], y[:0], 1) is None


# ---------------------------------------------------------------------- norms
NORM_CASES = [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4, 1030), (1030,)), ((7,), (7,)),
              ((2, 2, 300), (2, 300))]
NORM_BACKWARD = [((3, 5), (5,)), ((2, 2, 300), (2, 300)), ((4, 1030), (1030,))]


def norm_inputs(shape, ns, dtype, affine):
    x = data(shape, dtype, seed=3)
    x.reshape(-1, int(np.prod(ns)))[0] = 0.75  # a constant row: var 0, rstd = 1/sqrt(eps)
    w = data(ns, dtype, seed=4) if affine else None
    b = data(ns, dtype, seed=5) if affine else None
    to_t = [None if v is None else torch.tensor(v).to(getattr(torch, dtype)) for v in (x, w, b)]
    to_n = [None if v is None else as_np(v, dtype) for v in (x, w, b)]
    return to_n, to_t


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,ns", NORM_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_forward_matches_torch(dtype, shape, ns, affine, tile):
    (x, w, b), (tx, tw, tb) = norm_inputs(shape, ns, dtype, affine)
    y, mean, rstd = rows.OVERRIDES["native_layer_norm"](x, ns, w, b, 1e-5)
    stat = torch.float64 if dtype == "float64" else torch.float32  # half: float32, rounded once
    ty, tmean, trstd = torch.native_layer_norm(
        tx.to(stat), ns, *(None if v is None else v.to(stat) for v in (tw, tb)), 1e-5)
    close(y, ty.to(getattr(torch, dtype)), dtype, scale=2)
    stat = "float64" if dtype == "float64" else "float32"
    close(mean, tmean, stat, scale=2)
    close(rstd, trstd, stat, scale=2)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,ns", NORM_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rms_norm_forward_matches_torch(dtype, shape, ns, affine, tile):
    (x, w, _), (tx, tw, _) = norm_inputs(shape, ns, dtype, affine)
    y, rstd = rows.OVERRIDES["_fused_rms_norm"](x, ns, w, 1e-6)
    ty, trstd = torch.ops.aten._fused_rms_norm(tx, list(ns), tw, 1e-6)
    close(y, ty, dtype, scale=2)
    close(rstd, trstd, dtype, scale=2)


@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False),
                                   (False, True, False), (False, False, True)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,ns", NORM_BACKWARD)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_backward_matches_torch(dtype, shape, ns, affine, needs, tile):
    (x, w, b), (tx, tw, tb) = norm_inputs(shape, ns, dtype, affine)
    _, mean, rstd = torch.native_layer_norm(tx, ns, tw, tb, 1e-5)
    g = torch.tensor(data(shape, dtype, seed=6)).to(getattr(torch, dtype))
    k = len(ns)
    nd = len(shape)
    got = rows.OVERRIDES["_norm_backward"](g.numpy(), x, mean.numpy(), rstd.numpy(), w,
                                           tuple(range(nd - k, nd)), tuple(range(nd - k)),
                                           needs)
    want = torch.ops.aten.native_layer_norm_backward(g, tx, ns, mean, rstd, tw, tb,
                                                     [needs[0], needs[1] and affine,
                                                      needs[2] and affine])
    for i, (gv, wv) in enumerate(zip(got, want)):
        if not needs[i]:
            assert gv is None
        elif wv is not None:
            close(gv, wv, dtype, scale=8, sums=True)
        else:  # no weight in torch's call: the sums ember's op asks for anyway
            assert gv.shape == ns


def test_norm_wrappers_decline_what_the_impl_handles():
    ln = rows.OVERRIDES["native_layer_norm"]
    x = np.ones((2, 3), np.float32)
    w3 = np.ones(3, np.float32)
    assert ln(x, (4,), None, None, 1e-5) is None          # shape mismatch: the impl raises
    assert ln(x, (), None, None, 1e-5) is None
    assert ln(x, (3,), np.ones(4, np.float32), None, 1e-5) is None
    assert ln(x, (3,), w3.astype(np.float64), None, 1e-5) is None  # mixed dtypes
    assert ln(x[:0], (3,), None, None, 1e-5) is None       # empty
    assert ln(x.astype(np.int32), (3,), None, None, 1e-5) is None
    nb = rows.OVERRIDES["_norm_backward"]
    assert nb(x, x, None, x[:, :1], None, (1,), (0,), (True, True, True)) is None  # no mean
    assert nb(x, x, x[:1], x[:1], w3, (0,), (0,), (True, True, True)) is None  # batch norm's
    assert rows.OVERRIDES["_fused_rms_norm"](x, (3,), None, None) is None  # eps None


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_rows():
    """The CPU backend's "kernel" overrides of the row ops swapped for the Triton row kernels
    (under the interpreter, on numpy arrays); the previous ones put back after."""
    with cpu_overrides(rows.OVERRIDES, rows.STATS) as launched:
        yield launched


def pair(shape, dtype, seed=0):
    a = data(shape, dtype, seed)
    e = ember.tensor(a).to(getattr(ember, dtype)).requires_grad_()
    t = torch.tensor(a).to(getattr(torch, dtype)).requires_grad_()
    return e, t


def close_t(e, t, dtype, scale=1.0):
    """An ember tensor against a torch one: dtype, shape, values."""
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    t_ = tol(dtype) * scale
    np.testing.assert_allclose(e.detach().double().numpy(), t.detach().double().numpy(),
                               rtol=t_, atol=t_, equal_nan=True)


@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((2, 9000), 1), ((2, 3, 4), 0), ((), 0)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_ember_softmax_values_and_grads_through_the_kernels(cpu_rows, name, dtype, shape, dim):
    """(2, 9000): longer than one block of the default tile."""
    e, t = pair(shape, dtype)
    ye, yt = getattr(ember, name)(e, dim), getattr(torch, name)(t, dim)
    close_t(ye, yt, dtype)
    ge = ember.tensor(data(shape, "float64", seed=9)).to(getattr(ember, dtype))
    gt = torch.tensor(data(shape, "float64", seed=9)).to(getattr(torch, dtype))
    ye.backward(ge)
    yt.backward(gt)
    close_t(e.grad, t.grad, dtype, scale=4)
    assert cpu_rows() >= 2


def test_ember_softmax_edge_cases_through_the_kernels(cpu_rows):
    x = ember.tensor([[float("-inf")] * 3, [1.0, float("-inf"), 2.0]])
    tx = torch.tensor([[float("-inf")] * 3, [1.0, float("-inf"), 2.0]])
    close_t(ember.softmax(x, 1), torch.softmax(tx, 1), "float32")
    close_t(ember._safe_softmax(x, 1), torch.ops.aten._safe_softmax(tx, 1), "float32")
    close_t(ember.log_softmax(x, -1), torch.log_softmax(tx, -1), "float32")
    close_t(ember.softmax(x.T, 0), torch.softmax(tx.T, 0), "float32")
    close_t(ember.softmax(x, 1, dtype=ember.float64), torch.softmax(tx, 1, dtype=torch.float64),
            "float64")
    assert ember.softmax(ember.zeros(0, 4), 1).shape == (0, 4)
    assert float(ember.softmax(ember.tensor(3.0), 0)) == 1.0
    with pytest.raises(IndexError):
        ember.softmax(x, 2)
    with pytest.raises((RuntimeError, NotImplementedError)):
        ember.softmax(ember.tensor([1, 2]), 0)


@pytest.mark.parametrize("shape,ns", [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4, 1030), (1030,)),
                                      ((2, 9000), (9000,))])
@pytest.mark.parametrize("dtype", FLOATS)
def test_ember_layer_norm_values_and_grads_through_the_kernels(cpu_rows, dtype, shape, ns):
    e, t = pair(shape, dtype)
    we, wt = pair(ns, dtype, seed=1)
    be, bt = pair(ns, dtype, seed=2)
    ye = ember.nn.functional.layer_norm(e, ns, we, be)
    yt = torch.nn.functional.layer_norm(t, ns, wt, bt)
    close_t(ye, yt, dtype, scale=2)
    g = data(shape, "float64", seed=9)
    ye.backward(ember.tensor(g).to(getattr(ember, dtype)))
    yt.backward(torch.tensor(g).to(getattr(torch, dtype)))
    scale = 40 if dtype in ("float16", "bfloat16") else 50  # sums over rows of up to 1030
    for a, b in ((e, t), (we, wt), (be, bt)):
        close_t(a.grad, b.grad, dtype, scale=scale)
    assert cpu_rows() >= 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ember_rms_norm_through_the_kernels(cpu_rows, dtype):
    e, t = pair((4, 9000), dtype)  # longer than one block
    we, wt = pair((9000,), dtype, seed=1)
    ye = ember.nn.functional.rms_norm(e, (9000,), we, 1e-6)
    yt = torch.nn.functional.rms_norm(t, (9000,), wt, 1e-6)
    close_t(ye, yt, dtype, scale=2)
    ye.sum().backward()
    yt.sum().backward()
    close_t(e.grad, t.grad, dtype, scale=50)
    assert cpu_rows() >= 1


def test_cpu_backend_overrides_restored():
    """The fixture above leaves the CPU backend as it was."""
    from ember.backends import cpu_kernels  # noqa: F401  (its overrides are the CPU's)
    for name in rows.OVERRIDES:
        assert OPS[name]._kernel_overrides.get(cpu.BACKEND) is not rows.OVERRIDES[name]


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = SM90_BUILD + r"""
from ember.backends.cuda import row_kernels as K
WARPS = 8

for src, dst, f64, bi, bn, one in [("fp32", "fp32", False, 1, 4096, True),
                                   ("bf16", "bf16", False, 1, 1024, False),
                                   ("fp16", "fp64", True, 32, 64, False)]:
    for kind in range(3):
        build(K.softmax_fwd, {"x_ptr": "*" + src, "y_ptr": "*" + dst}, KIND=kind, ACC=f64,
              BLOCK_I=bi, BLOCK_N=bn, ONE=one)
for dt, f64 in (("fp32", False), ("fp64", True)):
    p = {n: "*" + dt for n in ("g_ptr", "y_ptr", "r_ptr", "x_ptr", "w_ptr", "b_ptr",
                                "mean_ptr", "rstd_ptr", "dx_ptr", "dw_ptr", "db_ptr")}
    p.update(eps_hi="fp32", eps_lo="fp32")
    for one in (True, False):
        build(K.softmax_bwd, p, LOG=one, ACC=f64, BLOCK_I=1 if one else 16, BLOCK_N=512,
              ONE=one)
        build(K.norm_fwd, p, CENTER=one, HAS_W=True, HAS_B=one, ACC=f64, BLOCK_N=1024,
              ONE=one)
        build(K.layer_norm_bwd, p, HAS_W=one, NEED_X=True, NEED_W=True, NEED_B=one,
              ACC=f64, BLOCK_N=1024, ONE=one)
    build(K.partial_sums, {"dw_ptr": "*" + dt, "db_ptr": "*" + dt, "ow_ptr": "*bf16",
                           "ob_ptr": "*bf16"}, NEED_W=True, NEED_B=f64, BLOCK_R=64, BLOCK_C=64)
print("ok")
"""


def test_kernels_compile_for_sm90():
    """Every kernel (a sample of its variants) through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
