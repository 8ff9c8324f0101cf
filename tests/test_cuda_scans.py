"""ember's Triton scan kernel on the GPU (backends/cuda/scans.py) against PyTorch's CUDA results
(the GPU tier: ``-m cuda``): cumsum, cumprod, cummax, cummin and logcumsumexp over every dim
and layout, every dtype they take, rows in one block and in many (up to 70K elements), NaN /
inf / ties, the ``dtype=`` argument, empty and 0-d inputs; values and gradients through
autograd. Each test also checks that the scan kernel ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

FLOATS = ["float32", "float16", "bfloat16", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
TOL = {"float32": 2e-5, "float64": 1e-10, "float16": 4e-3, "bfloat16": 3e-2}
SHAPES = [((3, 5), 1), ((64, 1000), -1), ((4, 5000), 1), ((2, 70000), 1), ((2, 300, 50), 1),
          ((2, 300, 50), 0), ((2, 300, 50), 2), ((5000, 3), 0)]


@pytest.fixture
def launched():
    """How many scan kernels ran since the test began."""
    from ember.backends.cuda import scans
    before = scans.STATS["launches"]
    return lambda: scans.STATS["launches"] - before


def pair(shape, dtype, seed=0, kind="normal", grad=False):
    """The same values (exact in ``dtype``) as an ember and a torch tensor on the GPU:
    ``kind`` "normal" (N(0, 1)), "near_one" (1 + N(0, 0.01): long products stay finite),
    "small" (integers in [-3, 3], many ties)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        a = rng.integers(0, 2, shape).astype(bool)
    elif dtype in INTS or kind == "small":
        a = rng.integers(0 if dtype == "uint8" else -3, 4, shape)
    elif kind == "near_one":
        a = 1 + 0.01 * rng.standard_normal(shape)
    else:
        a = rng.standard_normal(shape)
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.double().numpy() if dtype != "bool" else a).to(getattr(ember, dtype))
    e, t = e.cuda(), t.cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype=None, scale=1.0):
    """dtype, device, shape and values: exact for integers and bool; floats within ``dtype``'s
    tolerance relative to the largest value (running sums grow along the row)."""
    assert e.is_cuda, f"result is on {e.device}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    got, want = e.detach().cpu(), t.detach().cpu()
    if not want.dtype.is_floating_point:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        return
    w = want.double().numpy()
    tol = TOL[dtype or str(t.dtype).split(".")[-1]] * scale
    atol = tol * max(1.0, float(np.nanmax(np.abs(np.where(np.isinf(w), 0, w)), initial=0)))
    np.testing.assert_allclose(got.double().numpy(), w, rtol=tol, atol=atol, equal_nan=True)


def same_running(e, t):
    """cummax / cummin results: values and indices exactly."""
    same(e.values, t.values, scale=0)
    np.testing.assert_array_equal(e.indices.cpu().numpy(), t.indices.cpu().numpy())
    assert e.indices.is_cuda and e.indices.dtype == ember.int64


@pytest.mark.parametrize("shape,dim", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_scans(launched, dtype, shape, dim):
    e, t = pair(shape, dtype)
    same(ember.cumsum(e, dim), torch.cumsum(t, dim), scale=4)
    same(ember.logcumsumexp(e, dim), _in_float32(torch.logcumsumexp, t, dim), scale=4)
    same_running(ember.cummax(e, dim), torch.cummax(t, dim))
    same_running(ember.cummin(e, dim), torch.cummin(t, dim))
    e1, t1 = pair(shape, dtype, kind="near_one")
    # float32 products of up to 70000 factors: each multiply rounds, in another order
    same(ember.cumprod(e1, dim), _cumprod(t1, dim), scale=50 if dtype == "float32" else 4)
    assert launched() == 5


def _cumprod(t, dim, dtype=None):
    """torch's cumprod, with a half result as ``_in_float32``'s."""
    out = dtype or t.dtype
    if out in (torch.float16, torch.bfloat16):
        return _in_float32(torch.cumprod, t.to(out), dim)
    return torch.cumprod(t, dim, dtype=dtype)


def _in_float32(scan, t, dim):
    """torch's ``scan``, except that a half result is the float32 running value rounded once:
    torch's CUDA cumprod and logcumsumexp keep their running value in the half type
    (rounded at every step: 20% off after a thousand bfloat16 factors near 1, 3% off after
    a thousand float16 terms of logcumsumexp, measured on the H200); ember's runs in
    float32, as torch's CPU kernels and ember's CPU impls do."""
    if t.dtype in (torch.float16, torch.bfloat16):
        return scan(t.float(), dim).to(t.dtype)
    return scan(t, dim)


@pytest.mark.parametrize("shape,dim", SHAPES[:4] + SHAPES[5:6])
@pytest.mark.parametrize("dtype", ["bool"] + INTS)
def test_integer_scans_are_exact(launched, dtype, shape, dim):
    """Sums and products in int64 (wrapping like torch's), extrema with many ties."""
    e, t = pair(shape, dtype, seed=1)
    for name in ("cumsum", "cumprod"):
        same(getattr(ember, name)(e, dim), getattr(torch, name)(t, dim))
    same_running(ember.cummax(e, dim), torch.cummax(t, dim))
    same_running(ember.cummin(e, dim), torch.cummin(t, dim))
    assert launched() == 4


def test_ties_nan_and_infinities(launched):
    inf, nan = float("inf"), float("nan")
    rows = [[1.0, 3.0, 3.0, 2.0, 3.0, 0.0, 3.0], [nan, 1.0, nan, 5.0, -inf, inf, 2.0],
            [-inf, -inf, -inf, inf, inf, 1.0, inf], [0.0, -0.0, 0.0, -0.0, 1.0, nan, 1.0],
            [-inf] * 7, [88.0, 88.5, 89.0, -100.0, 1e-30, 0.0, 0.0]]
    for dt in ("float32", "float16", "bfloat16", "float64"):
        e = ember.tensor(rows).to(getattr(ember, dt)).cuda()
        t = torch.tensor(rows).to(getattr(torch, dt)).cuda()
        for x, y, d in ((e, t, 1), (e.t(), t.t(), 0)):
            same_running(ember.cummax(x, d), torch.cummax(y, d))
            same_running(ember.cummin(x, d), torch.cummin(y, d))
            same(ember.logcumsumexp(x, d), torch.logcumsumexp(y, d))
            same(ember.cumsum(x, d), torch.cumsum(y, d))
    # a long row of equal values with NaN late in it: the index crosses many blocks
    a = np.zeros((2, 9000), np.float32)
    a[1, 7000] = np.nan
    same_running(ember.cummax(ember.tensor(a).cuda(), 1), torch.cummax(torch.tensor(a).cuda(), 1))
    assert launched() == 4 * 2 * 4 + 1


@pytest.mark.parametrize("src,dst", [("float16", "float32"), ("bfloat16", "float32"),
                                     ("float32", "float64"), ("float32", "float16"),
                                     ("int32", "float32"), ("bool", "int32"),
                                     ("int64", "int16"), ("float32", "int32")])
def test_dtype_argument(launched, src, dst):
    e, t = pair((16, 3000), src, kind="small" if dst in INTS else "normal")
    for name in ("cumsum", "cumprod"):
        if name == "cumprod" and src.startswith("float"):
            e, t = pair((16, 3000), src, kind="near_one")
        want = _cumprod(t, -1, getattr(torch, dst)) if name == "cumprod" else \
            torch.cumsum(t, -1, dtype=getattr(torch, dst))
        same(getattr(ember, name)(e, -1, dtype=getattr(ember, dst)), want,
             "float32" if dst == "float64" else None, scale=4)
    assert launched() == 2


def test_layouts(launched):
    e, t = pair((6, 500, 3), "float32")
    views = (lambda x: x.transpose(0, 1), lambda x: x[:, ::2], lambda x: x.permute(2, 0, 1),
             lambda x: x[:1].expand(4, 500, 3), lambda x: x.flip(1),
             lambda x: x[:, ::3].transpose(0, 1))
    for view in views:
        for dim in range(3):
            same(view(e).cumsum(dim), view(t).cumsum(dim), scale=4)
            same_running(view(e).cummax(dim), view(t).cummax(dim))
            same(view(e).logcumsumexp(dim), view(t).logcumsumexp(dim), scale=4)
    assert launched() == 3 * 3 * len(views)


def test_empty_zero_dim_out_and_in_place(launched):
    for name in ("cumsum", "cumprod", "logcumsumexp"):
        r = getattr(ember, name)(ember.zeros(0, 3).cuda(), 1)
        assert r.is_cuda and r.shape == (0, 3)
    v, i = ember.cummax(ember.zeros(0, 3).cuda(), 0)
    assert v.is_cuda and i.is_cuda and v.shape == i.shape == (0, 3)
    v, i = ember.cummin(ember.tensor(2.5).cuda(), 0)
    assert float(v) == 2.5 and int(i) == 0 and v.is_cuda
    assert float(ember.cumsum(ember.tensor(2.5).cuda(), 0)) == 2.5
    e, t = pair((4, 700), "float32")
    out = ember.empty(4, 700).cuda()
    ember.cumsum(e, 1, out=out)
    same(out, torch.cumsum(t, 1), scale=4)
    e.cumsum_(0)
    t.cumsum_(0)
    same(e, t, scale=4)
    with pytest.raises(NotImplementedError, match="cumsum_out"):
        ember.cumsum(ember.ones(2, 3).cuda(), 1, dtype=ember.bool)
    with pytest.raises(NotImplementedError):
        ember.logcumsumexp(ember.ones(2, 3, dtype=ember.int64).cuda(), 1)
    with pytest.raises(NotImplementedError):
        ember.cummax(ember.ones(2, dtype=ember.complex64).cuda(), 0)
    with pytest.raises(IndexError):
        ember.cummin(ember.ones(2, 3).cuda(), 2)
    assert launched() == 2


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"])
def test_gradients(launched, name, dtype):
    """Values and gradients through autograd (cummax / cummin: the gradient is scattered to
    the indices with scatter_add)."""
    kind = "near_one" if name == "cumprod" else "small" if name in ("cummax", "cummin") \
        else "normal"
    for shape, dim in (((8, 300), 1), ((50, 4, 3), 0)):
        e, t = pair(shape, dtype, kind=kind, grad=True)
        ye, yt = getattr(ember, name)(e, dim), getattr(torch, name)(t, dim)
        if name in ("cummax", "cummin"):
            same_running(ye, yt)
            ye, yt = ye.values, yt.values
        else:
            same(ye, yt, dtype, scale=4)
        ge, gt = pair(shape, dtype, seed=3)
        ye.backward(ge)
        yt.backward(gt)
        same(e.grad, t.grad, dtype, scale=8)
    assert launched() >= 2
