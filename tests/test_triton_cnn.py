"""ember's Triton batch-norm and pooling kernels (backends/cuda/channels.py, pool.py) through
Triton's interpreter on CPU, against PyTorch on CPU. First the wrappers on numpy arrays
(batch norm: training statistics with the running update, evaluation, backward, half input
with float32 parameters, one chunk per channel and many; pooling: max with indices and NaN,
average with every divisor rule, the gradients, adaptive average), then through ember's ops
with the CPU backend's "kernel" overrides swapped for these kernels (restored after), values
and gradients, double backward included. Last, the kernels compile for sm_90.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from triton_util import INTERPRETED, SM90_BUILD, compile_for_sm90, cpu_overrides
from ember.backends.cuda import channels, pool

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = INTERPRETED

TOL = {"float64": 1e-12, "float32": 3e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def data(shape, dtype="float32", seed=0, scale=3.0, shift=0.0):
    """Values exact in ``dtype``, as a numpy array of that dtype and a torch tensor."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale + shift
    t = torch.tensor(a).to(getattr(torch, dtype))
    return t.double().numpy().astype(getattr(ember, dtype).np), t


def close(got, want, dtype, scale=1.0):
    w = want.detach().double().numpy()
    assert got.shape == w.shape
    t = TOL[dtype] * scale
    atol = t * max(1.0, float(np.nanmax(np.abs(w), initial=0)))
    np.testing.assert_allclose(got.astype(np.float64), w, rtol=t, atol=atol, equal_nan=True)


@pytest.fixture(params=["one_chunk", "many_chunks"])
def tile(request, monkeypatch):
    """Each channel in one tile (the default) or split into many (a 64-element tile,
    combined two chunks at a time)."""
    if request.param == "many_chunks":
        monkeypatch.setattr(channels, "TILE", 64)
        monkeypatch.setattr(channels, "BLOCK_P", 2)
    return request.param


# ---------------------------------------------------------------------- batch norm
BN_SHAPES = [(2, 3, 9, 7), (6, 4), (3, 2, 3, 2, 5)]


def bn_inputs(shape, dtype, param_dtype):
    c = shape[1]
    x, tx = data(shape, dtype, shift=4.0)  # an offset mean: the variance must not cancel
    params = [data((c,), param_dtype, seed=s) for s in (1, 2, 3)]
    rv = np.abs(data((c,), param_dtype, seed=4)[0].astype(np.float64)) + 0.5  # exact
    params.append((rv.astype(getattr(ember, param_dtype).np),
                   torch.tensor(rv).to(getattr(torch, param_dtype))))
    return (x, tx), params


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("dtype,param_dtype", [("float32", "float32"), ("float64", "float64"),
                                               ("float16", "float32"),
                                               ("bfloat16", "bfloat16")])
def test_batch_norm_training_forward(dtype, param_dtype, shape, affine, tile):
    (x, tx), ((w, tw), (b, tb), (rm, trm), (rv, trv)) = bn_inputs(shape, dtype, param_dtype)
    if not affine:
        w = b = tw = tb = None
    y, mean, invstd = channels.OVERRIDES["native_batch_norm"](x, w, b, rm, rv, True, 0.3,
                                                              1e-3)
    ty, tmean, tinv = torch.native_batch_norm(tx, tw, tb, trm, trv, True, 0.3, 1e-3)
    assert y.dtype == x.dtype and mean.dtype == x.dtype and invstd.dtype == x.dtype
    close(y, ty, dtype, 4)
    stat = "float64" if dtype == "float64" else "float32"
    close(mean.astype(np.float64), tmean, stat if dtype == stat else dtype)
    close(invstd.astype(np.float64), tinv, stat if dtype == stat else dtype)
    close(rm, trm, param_dtype, 2)  # updated in place, the variance unbiased
    close(rv, trv, param_dtype, 2)


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_batch_norm_eval_forward(dtype, shape):
    pdt = "float32" if dtype == "float16" else dtype
    (x, tx), ((w, tw), (b, tb), (rm, trm), (rv, trv)) = bn_inputs(shape, dtype, pdt)
    rm0, rv0 = rm.copy(), rv.copy()
    y, mean, invstd = channels.OVERRIDES["native_batch_norm"](x, w, b, rm, rv, False, 0.3,
                                                              1e-5)
    ty, _, _ = torch.native_batch_norm(tx, tw, tb, trm, trv, False, 0.3, 1e-5)
    close(y, ty, dtype, 4)
    close(mean.astype(np.float64), trm.to(getattr(torch, dtype)), dtype)
    close(invstd.astype(np.float64), (1 / torch.sqrt(trv.double() + 1e-5)), dtype, 2)
    assert (rm == rm0).all() and (rv == rv0).all()


@pytest.mark.parametrize("affine,needs", [(True, (True, True, True)),
                                          (False, (True, False, False)),
                                          (True, (False, True, True))])
@pytest.mark.parametrize("shape", [(2, 3, 9, 7), (6, 4), (3, 2, 3, 2, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_backward(dtype, shape, affine, needs, tile):
    (x, tx), ((w, tw), (b, tb), (rm, trm), (rv, trv)) = bn_inputs(shape, dtype, dtype)
    if not affine:
        w = tw = None
    _, tmean, tinv = torch.native_batch_norm(tx, tw, None, trm, trv, True, 0.1, 1e-5)
    g, tg = data(shape, dtype, seed=7)
    nd = len(shape)
    axes = (0,) + tuple(range(2, nd))
    cshape = (1, shape[1]) + (1,) * (nd - 2)
    got = channels.OVERRIDES["_norm_backward"](
        g, x, tmean.numpy().reshape(cshape), tinv.numpy().reshape(cshape),
        None if w is None else w.reshape(cshape), axes, axes, needs)
    want = torch.ops.aten.native_batch_norm_backward(tg, tx, tw, trm, trv, tmean, tinv, True,
                                                     1e-5, [True, True, True])
    for gv, wv, need in zip(got, want, needs):
        if need:
            close(gv, wv, dtype, 8)
        else:
            assert gv is None
    expanded = np.broadcast_to(np.ones((), x.dtype), x.shape)  # a non-contiguous gradient
    got = channels.OVERRIDES["_norm_backward"](
        expanded, x, tmean.numpy().reshape(cshape), tinv.numpy().reshape(cshape), None, axes,
        axes, (True, False, True))
    want = torch.ops.aten.native_batch_norm_backward(torch.ones_like(tx), tx, None, trm, trv,
                                                     tmean, tinv, True, 1e-5,
                                                     [True, True, True])
    close(got[0], want[0], dtype, 8)
    close(got[2], want[2], dtype, 8)


def test_batch_norm_declines_what_the_impl_handles():
    bn = channels.OVERRIDES["native_batch_norm"]
    x = np.ones((2, 3, 4), np.float32)
    c3 = np.ones(3, np.float32)
    assert bn(x, np.ones(4, np.float32), None, None, None, True, 0.1, 1e-5) is None
    assert bn(x, c3.astype(np.float64), None, None, None, True, 0.1, 1e-5) is None
    assert bn(x[:, :, :1][:1], None, None, None, None, True, 0.1, 1e-5) is None  # 1 value
    assert bn(x, None, None, None, None, False, 0.1, 1e-5) is None  # no running stats
    assert bn(x[:0], None, None, None, None, True, 0.1, 1e-5) is None
    assert bn(x.transpose(0, 2, 1).copy().transpose(0, 2, 1), None, None, None, None, True,
              0.1, 1e-5) is None  # channels-last keeps its layout through the impl
    assert bn(x.astype(np.int64), None, None, None, None, True, 0.1, 1e-5) is None
    assert bn(x, None, None, c3, c3, True, None, 1e-5) is None  # cumulative momentum: None
    assert bn(np.ones(3, np.float32), None, None, None, None, True, 0.1, 1e-5) is None
    nb = channels.OVERRIDES["_norm_backward"]
    m = np.ones((1, 3, 1), np.float32)
    assert nb(x, x, None, m, None, (0, 2), (0, 2), (True,) * 3) is None  # no mean
    assert nb(x, x, m, m, None, (2,), (0, 1), (True,) * 3) is None  # layer norm's layout
    assert nb(x.astype(np.float64), x, m, m, None, (0, 2), (0, 2), (True,) * 3) is None


# ---------------------------------------------------------------------- pooling
MAX_CASES = [
    dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
    dict(kernel_size=3, stride=1, padding=1, dilation=2), dict(kernel_size=[3], stride=[]),
]


def _two(v):
    return tuple(v) * (2 // len(v)) if isinstance(v, (list, tuple)) else (v, v)


@pytest.mark.parametrize("kw", MAX_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_max_pool2d_values_indices_and_gradient(dtype, kw):
    x, tx = data((2, 3, 5, 7), dtype)
    x[0, 0, 1, 1] = np.nan  # NaN wins its windows; the last NaN of a window is its index
    x[0, 0, 2, 2] = np.nan
    x[1, 2] = -np.inf  # windows of only -inf: the first position inside the input
    tx = torch.tensor(x.astype(np.float64)).to(getattr(torch, dtype))
    args = dict(kw)
    y, idx = pool.OVERRIDES["max_pool2d_with_indices"](x, **args)
    ty, tidx = F.max_pool2d(tx, return_indices=True, **args)
    close(y, ty, dtype)
    assert idx.dtype == np.int64 and (idx == tidx.numpy()).all()
    g, tg = data(ty.shape, dtype, seed=3)
    k = args["kernel_size"]
    s = args.get("stride") or k
    d = args.get("dilation", 1)
    unique = all(ss >= (kk - 1) * dd + 1 for ss, kk, dd in zip(_two(s), _two(k), _two(d)))
    gx = pool.OVERRIDES["_max_pool_scatter"](g, idx, (5, 7), unique)
    txr = tx.detach().requires_grad_()
    F.max_pool2d(txr, **args).backward(tg)
    close(gx, txr.grad, dtype, 4)


def test_max_pool2d_unbatched_strided_and_scatter_of_other_dims():
    x, tx = data((3, 9, 8), "float32")
    xs = x[:, ::2, :]  # not contiguous: copied
    y, idx = pool.OVERRIDES["max_pool2d_with_indices"](xs, 2, 1)
    ty, tidx = F.max_pool2d(tx[:, ::2, :], 2, 1, return_indices=True)
    close(y, ty, "float32")
    assert (idx == tidx.numpy()).all()
    # the scatter takes any number of spatial dims: 1-d and 3-d indices
    for nd, shape, k in ((1, (2, 3, 9), 3), (3, (1, 2, 4, 5, 6), 2)):
        x, tx = data(shape, "float64", seed=nd)
        fn = getattr(F, f"max_pool{nd}d")
        txr = tx.requires_grad_()
        ty, tidx = fn(txr, k, return_indices=True)
        g, tg = data(ty.shape, "float64", seed=5)
        ty.backward(tg)
        gx = pool.OVERRIDES["_max_pool_scatter"](g, tidx.numpy(), shape[-nd:], False)
        close(gx, txr.grad, "float64")


AVG_CASES = [
    dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=True),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True,
         divisor_override=5),
    dict(kernel_size=(3, 2), stride=(3, 1), padding=(1, 0), count_include_pad=False),
]


@pytest.mark.parametrize("kw", AVG_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_avg_pool2d_values_and_gradient(dtype, kw):
    x, tx = data((2, 3, 5, 7), dtype)
    y = pool.OVERRIDES["avg_pool2d"](x, **kw)
    ty = F.avg_pool2d(tx.float() if dtype == "float16" else tx, **kw).to(tx.dtype)
    close(y, ty, dtype, 2)
    g, tg = data(ty.shape, dtype, seed=3)
    args = [kw.get(n, v) for n, v in (("kernel_size", None), ("stride", None), ("padding", 0),
                                      ("ceil_mode", False), ("count_include_pad", True),
                                      ("divisor_override", None))]
    gx = pool.OVERRIDES["_avg_pool_adjoint"](g, (5, 7), *args)
    txr = (tx.float() if dtype == "float16" else tx).detach().requires_grad_()
    F.avg_pool2d(txr, **kw).backward(tg.to(txr.dtype))
    close(gx, txr.grad.to(tx.dtype), dtype, 4)


@pytest.mark.parametrize("out", [1, (2, 3), (5, 7), (3, None), (4, 4), (7, 9)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adaptive_avg_pool2d(dtype, out):
    x, tx = data((2, 3, 5, 7), dtype)
    close(pool.OVERRIDES["adaptive_avg_pool2d"](x, out), F.adaptive_avg_pool2d(tx, out), dtype,
          2)


def test_pooling_declines_what_the_impl_handles():
    mp, ap = pool.OVERRIDES["max_pool2d_with_indices"], pool.OVERRIDES["avg_pool2d"]
    x = np.ones((2, 3, 5, 7), np.float32)
    for bad in (dict(kernel_size=0), dict(kernel_size=2, stride=0),
                dict(kernel_size=2, padding=2), dict(kernel_size=(1, 2, 3)),
                dict(kernel_size=2.0), dict(kernel_size=9), dict(kernel_size=True)):
        assert mp(x, **bad) is None and ap(x, **bad) is None
    assert mp(x, 2, dilation=0) is None
    assert ap(x, 2, divisor_override=0) is None
    assert mp(x.astype(np.int64), 2) is None and ap(x.astype(np.int64), 2) is None
    assert mp(x[0, 0], 2) is None and mp(x[:0], 2) is None
    ad = pool.OVERRIDES["adaptive_avg_pool2d"]
    assert ad(x, (0, 2)) is None and ad(x, (1, 2, 3)) is None and ad(x[0, 0], 1) is None
    assert pool.OVERRIDES["_avg_pool_adjoint"](x, (5, 7, 2), 2, None, 0, False, True,
                                               None) is None


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_kernels():
    """The CPU backend's "kernel" overrides of these ops swapped for the Triton kernels
    (chained after an existing one, as the CUDA backend chains the row kernels'); the
    previous ones put back after. Returns how many of the kernels ran since."""
    with cpu_overrides(channels.OVERRIDES, channels.STATS, channels.chain) as bn, \
            cpu_overrides(pool.OVERRIDES, pool.STATS, channels.chain) as pooled:
        yield lambda: (bn(), pooled())


def pair(shape, dtype="float64", seed=0, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    e = ember.tensor(a).to(getattr(ember, dtype))
    t = torch.tensor(a).to(getattr(torch, dtype))
    return (e.requires_grad_(), t.requires_grad_()) if grad else (e, t)


def same(e, t, dtype="float64", scale=1.0):
    close(e.detach().numpy(), t, dtype, scale)


def test_ember_batch_norm_module_and_double_backward(cpu_kernels):
    e, t = pair((4, 3, 5, 6))
    em, tm = ember.nn.BatchNorm2d(3).double(), torch.nn.BatchNorm2d(3).double()
    for _ in range(2):
        ye, yt = em(e), tm(t)
        same(ye, yt)
        (ye * ye.detach()).sum().backward()
        (yt * yt.detach()).sum().backward()
    for a, b in ((e.grad, t.grad), (em.weight.grad, tm.weight.grad),
                 (em.bias.grad, tm.bias.grad), (em.running_mean, tm.running_mean),
                 (em.running_var, tm.running_var)):
        same(a, b, scale=8)
    em.eval()
    tm.eval()
    same(em(e), tm(t))
    ran = cpu_kernels()
    assert ran[0] >= 2 * 3 + 2 * 3 + 2
    grads = []
    for lib, x in ((ember, e), (torch, t)):  # the second derivative: through ember's ops
        w = lib.ones(3, dtype=lib.float64).mul(1.5).requires_grad_()
        y = (lib.nn.functional.batch_norm(x, None, None, w, None, True) ** 3).sum()
        gx, = lib.autograd.grad(y, x, create_graph=True)
        (gx * gx).sum().backward()
        grads.append(w.grad)
    same(*grads, scale=100)


CASES = [lambda m, x: m.nn.functional.max_pool2d(x, 3, 2, 1, ceil_mode=True),
         lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, True, False),
         lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
         lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, 1)]


def test_ember_pooling_values_and_gradients(cpu_kernels):
    e, t = pair((2, 3, 7, 9), "float32")
    for fn in CASES:
        e.grad = t.grad = None
        ye, yt = fn(ember, e), fn(torch, t)
        same(ye, yt, "float32")
        g = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float32)
        ye.backward(ember.tensor(g))
        yt.backward(torch.tensor(g))
        same(e.grad, t.grad, "float32", 4)
    ye, ie = EF.max_pool2d(e, 2, return_indices=True)
    yt, it = F.max_pool2d(t, 2, return_indices=True)
    assert (ie.numpy() == it.numpy()).all()
    ran = cpu_kernels()
    assert ran[1] >= 7
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        EF.max_pool2d(e, 2, padding=2)


def test_ember_small_cnn_gradients(cpu_kernels):
    """conv -> batch norm -> relu -> max pool -> avg pool -> linear, float64."""
    nets = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        nn = lib.nn
        nets.append(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1), nn.Conv2d(4, 4, 3, padding=1),
                                  nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(4, 2)).double())
    en, tn = nets
    with torch.no_grad():
        for pe, pt in zip(en.parameters(), tn.parameters()):
            pt.copy_(torch.tensor(pe.detach().numpy()))
    e, t = pair((2, 3, 9, 8), grad=False)
    en(e).square().sum().backward()
    tn(t).square().sum().backward()
    for pe, pt in zip(en.parameters(), tn.parameters()):
        same(pe.grad, pt.grad, scale=1e4)
    ran = cpu_kernels()
    assert ran[0] >= 12 and ran[1] >= 3


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = SM90_BUILD + r"""
from ember.backends.cuda import channel_kernels as C, pool_kernels as P

halves = ("eps_hi", "eps_lo", "mom_hi", "mom_lo", "unb_hi", "unb_lo")
for dt, pdt, f64 in (("bf16", "fp32", False), ("fp32", "fp32", False), ("fp64", "fp64", True)):
    acc = "fp64" if f64 else "fp32"
    p = {n: "*" + acc for n in ("cnt_ptr", "mean_ptr", "m2_ptr", "scale_ptr", "shift_ptr",
                                 "sg_ptr", "sgx_ptr", "k1_ptr", "k2_ptr", "k3_ptr")}
    p.update({n: "*" + dt for n in ("x_ptr", "y_ptr", "g_ptr", "dx_ptr", "smean_ptr",
                                     "sinv_ptr", "inv_ptr", "dw_ptr", "db_ptr")})
    p.update({n: "*" + pdt for n in ("w_ptr", "b_ptr", "rm_ptr", "rv_ptr")})
    p.update({n: "fp32" for n in halves})
    build(C.bn_partial, p, ACC=f64, BLOCK_N=4, BLOCK_HW=256)
    for training in (True, False):
        build(C.bn_stats, p, TRAINING=training, HAS_W=training, HAS_B=True, HAS_RM=True,
              HAS_RV=training, ACC=f64, BLOCK_P=64)
    build(C.bn_apply, p, ACC=f64, BLOCK_R=8, BLOCK_HW=128)
    p["mean_ptr"] = "*" + dt
    build(C.bn_grad_partial, p, ACC=f64, BLOCK_N=1, BLOCK_HW=1024)
    build(C.bn_grad_stats, p, HAS_W=True, NEED_X=True, NEED_W=True, NEED_B=False, ACC=f64,
          BLOCK_P=32)
    build(C.bn_dx, p, ACC=f64, BLOCK_R=16, BLOCK_HW=64)
    q = {"x_ptr": "*" + dt, "y_ptr": "*" + dt, "idx_ptr": "*i64", "g_ptr": "*" + dt,
         "dx_ptr": "*" + dt, "out_ptr": "*" + acc}
    build(P.max_pool2d_fwd, q, KH=3, KW=3, ACC=f64, BLOCK=256)
    for unique in (True, False):
        build(P.max_pool_scatter, q, UNIQUE=unique, BLOCK=256)
    for has_div in (True, False):
        build(P.avg_pool2d_fwd, q, KH=3, KW=2, COUNT_PAD=not has_div, HAS_DIV=has_div,
              ACC=f64, BLOCK=256)
        build(P.avg_pool2d_bwd, q, KH=3, KW=2, MH=2, MW=1, COUNT_PAD=has_div,
              HAS_DIV=has_div, ACC=f64, BLOCK=256)
    build(P.adaptive_avg2d, q, ACC=f64, BLOCK_O=4, BLOCK_K=64)
print("ok")
"""


def test_kernels_compile_for_sm90():
    """Every kernel (a sample of its variants) through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
