"""ember's Triton row kernels on the GPU (backends/cuda/rows.py) against PyTorch's CUDA results
(the GPU tier: ``-m cuda``): softmax, log_softmax and _safe_softmax over every dim and layout,
rows in one block and in many (up to 64K elements), NaN / inf rows, the ``dtype=`` argument;
layer norm and RMS norm; values and gradients through autograd, in float32, float16,
bfloat16 and float64. Each test also checks that the row kernels ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

FLOATS = ["float32", "float16", "bfloat16", "float64"]
TOL = {"float32": 2e-5, "float64": 1e-10, "float16": 4e-3, "bfloat16": 3e-2}


@pytest.fixture
def launched():
    """How many row kernels ran since the test began."""
    from ember.backends.cuda import rows
    before = rows.STATS["launches"]
    return lambda: rows.STATS["launches"] - before


def pair(shape, dtype, seed=0, grad=False, scale=3.0):
    """The same values (exact in ``dtype``) as an ember and a torch tensor on the GPU."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.double().numpy()).to(getattr(ember, dtype))
    e, t = e.cuda(), t.cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype, scale=1.0, sums=False):
    """dtype, device, shape and values; ``sums``: values that cancel (sums over rows), within
    a tolerance relative to the largest one."""
    assert e.is_cuda, f"result is on {e.device}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    w = t.detach().double().cpu().numpy()
    tol = TOL[dtype] * scale
    atol = tol * max(1.0, float(np.nanmax(np.abs(w), initial=0))) if sums else tol
    np.testing.assert_allclose(e.detach().double().cpu().numpy(), w, rtol=tol, atol=atol,
                               equal_nan=True)


SOFTMAX_CASES = [((3, 5), 1), ((64, 1000), -1), ((8, 20000), 1), ((2, 65536), 1),
                 ((2, 300, 50), 1), ((2, 300, 50), 0), ((2, 300, 50), 2), ((5, 7, 9000), 1),
                 ((4096, 4096), -1)]


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_values_and_grads(launched, name, dtype, shape, dim):
    e, t = pair(shape, dtype, grad=True)
    ye, yt = getattr(ember, name)(e, dim), getattr(torch, name)(t, dim)
    same(ye, yt, dtype)
    ge, gt = pair(shape, dtype, seed=1)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=4, sums=True)
    assert launched() >= 2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_safe_softmax_and_nan_inf_rows(launched, dtype):
    """Rows of only -inf (NaN; zeros for _safe_softmax), -inf over the first blocks of a long
    row, +inf, NaN, only NaN, NaN and -inf only; short rows and 20000-element ones."""
    for n in (7, 20000):
        a = np.random.default_rng(0).standard_normal((8, n))
        a[0] = -np.inf
        a[1, :n * 2 // 3] = -np.inf
        a[2, 5] = np.inf
        a[3, n - 2] = np.nan
        a[4] = np.nan
        a[5, ::3] = -np.inf
        a[6] = np.nan
        a[6, ::2] = -np.inf
        t = torch.tensor(a).to(getattr(torch, dtype)).cuda()
        e = ember.tensor(a).to(getattr(ember, dtype)).cuda()
        for fe, ft in ((ember.softmax, torch.softmax), (ember.log_softmax, torch.log_softmax),
                       (ember._safe_softmax, torch.ops.aten._safe_softmax)):
            same(fe(e, 1), ft(t, 1), dtype)
            same(fe(e.t(), 0), ft(t.t(), 0), dtype)
    assert launched() >= 12


@pytest.mark.parametrize("src,dst", [("float16", "float32"), ("bfloat16", "float32"),
                                     ("float32", "float64"), ("float32", "float16")])
def test_softmax_dtype_argument(launched, src, dst):
    e, t = pair((16, 3000), src)
    for name in ("softmax", "log_softmax"):
        same(getattr(ember, name)(e, -1, dtype=getattr(ember, dst)),
             getattr(torch, name)(t, -1, dtype=getattr(torch, dst)),
             "float32" if dst == "float64" else dst)
    assert launched() >= 2


def test_softmax_layouts_and_edge_cases(launched):
    e, t = pair((6, 500, 3), "float32", grad=True)
    views = (lambda x: x.transpose(0, 1), lambda x: x[:, ::2], lambda x: x.permute(2, 0, 1),
             lambda x: x[:1].expand(4, 500, 3))
    for view in views:
        for dim in range(3):
            same(view(e).softmax(dim), view(t).softmax(dim), "float32")
            same(view(e).log_softmax(dim), view(t).log_softmax(dim), "float32")
    e.softmax(1).sum().backward()  # an expanded gradient
    t.softmax(1).sum().backward()
    same(e.grad, t.grad, "float32", sums=True)
    s = ember.tensor(2.5).cuda()
    assert float(ember.softmax(s, 0).cpu()) == 1.0 and float(ember.log_softmax(s, -1).cpu()) == 0
    assert ember.softmax(ember.zeros(0, 5).cuda(), 1).shape == (0, 5)
    with pytest.raises(IndexError):
        ember.softmax(e, 3)
    assert launched() >= 24


LN_CASES = [((3, 5), (5,)), ((64, 1000), (1000,)), ((8, 16, 512), (512,)),
            ((2, 3, 40, 50), (40, 50)), ((4, 20000), (20000,)), ((4096, 4096), (4096,))]


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,ns", LN_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_values_and_grads(launched, dtype, shape, ns, affine):
    e, t = pair(shape, dtype, grad=True)
    pe = pt = (None, None)
    if affine:
        (we, wt), (be, bt) = pair(ns, dtype, seed=2, grad=True), pair(ns, dtype, seed=3,
                                                                          grad=True)
        pe, pt = (we, be), (wt, bt)
    ye = ember.nn.functional.layer_norm(e, ns, *pe, eps=1e-5)
    yt = torch.nn.functional.layer_norm(t, ns, *pt, eps=1e-5)
    same(ye, yt, dtype, scale=4)
    ge, gt = pair(shape, dtype, seed=4)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=8, sums=True)
    for a, b in zip(pe, pt):
        if a is not None:
            same(a.grad, b.grad, dtype, scale=20, sums=True)
    assert launched() >= 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_layer_norm_statistics(launched, dtype):
    e, t = pair((32, 3000), dtype)
    we, wt = pair((3000,), dtype, seed=1)
    got = ember.native_layer_norm(e, (3000,), we, None, 1e-5)
    want = torch.native_layer_norm(t, (3000,), wt, None, 1e-5)
    for a, b in zip(got, want):
        same(a, b, dtype, scale=4)
    assert launched() >= 1


@pytest.mark.parametrize("shape,ns", [((64, 1000), (1000,)), ((4, 20000), (20000,)),
                                      ((8, 16, 512), (16, 512))])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_values_and_grads(launched, dtype, shape, ns):
    e, t = pair(shape, dtype, grad=True)
    we, wt = pair(ns, dtype, seed=1, grad=True)
    ye = ember.nn.functional.rms_norm(e, ns, we, 1e-6)
    yt = torch.nn.functional.rms_norm(t, ns, wt, 1e-6)
    same(ye, yt, dtype, scale=4)
    ge, gt = pair(shape, dtype, seed=2)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=8, sums=True)
    same(we.grad, wt.grad, dtype, scale=20, sums=True)
    assert launched() >= 1


def test_transformer_block_trains_like_torch(launched):
    """LayerNorm, attention softmax and their gradients in one small step."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16, 64)).astype(np.float32)
    ws = [rng.standard_normal((64, 64)).astype(np.float32) * 0.1 for _ in range(3)]

    def run(lib):
        xt = lib.tensor(x).cuda()
        params = [lib.tensor(w).cuda().requires_grad_() for w in ws]
        ln = lib.nn.LayerNorm(64).cuda()
        h = ln(xt)
        q, k, v = (h @ w for w in params)
        att = (q @ k.transpose(-1, -2) / 8).softmax(-1)
        out = (att @ v).log_softmax(-1).sum()
        out.backward()
        return [out] + [p.grad for p in params] + [ln.weight.grad, ln.bias.grad]

    for a, b in zip(run(ember), run(torch)):
        same(a, b, "float32", scale=50, sums=True)
    assert launched() >= 5
