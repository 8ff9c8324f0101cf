"""ember's Triton reductions on the GPU (backends/cuda/reductions.py) against PyTorch's CUDA
results (the GPU tier: ``-m cuda``): sum, mean, prod, amax, amin, max / min with indices,
argmax, argmin, var, std, var_mean, std_mean through ember's public API over rows, columns,
several dims and everything, large enough to split n between programs (the bias-gradient sum
over 16384 rows, a full sum of 16M elements); float32, float16, bfloat16, float64, integer and
bool sums; NaN, ties, non-contiguous inputs; gradients through autograd. Each test also checks
that the reduction kernels ran.
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
    """How many reduction kernels ran since the test began."""
    from ember.backends.cuda import reductions
    before = reductions.STATS["launches"]
    return lambda: reductions.STATS["launches"] - before


def pair(shape, dtype, seed=0, grad=False, scale=3.0):
    """The same values (exact in ``dtype``) as an ember and a torch tensor on the GPU."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    if dtype in ("int32", "int64", "int8", "uint8", "bool"):
        a = np.abs(np.round(a)) if dtype == "uint8" else a > 0 if dtype == "bool" else \
            np.round(a)
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.cpu().numpy() if dtype != "bfloat16" else t.double().numpy())
    e = e.to(getattr(ember, dtype))
    e, t = e.cuda(), t.cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype=None, scale=1.0):
    """dtype, device, shape and values (floats within ``dtype``'s tolerance relative to the
    largest value; integers exactly)."""
    assert e.is_cuda, f"result is on {e.device}"
    name = str(t.dtype).split(".")[-1]
    assert str(e.dtype).split(".")[-1] == name
    assert tuple(e.shape) == tuple(t.shape)
    w = t.detach().double().cpu().numpy()
    got = e.detach().double().cpu().numpy()
    if t.dtype.is_floating_point:
        tol = TOL[dtype or name] * scale
        atol = tol * max(1.0, float(np.nanmax(np.abs(w), initial=0)))
        np.testing.assert_allclose(got, w, rtol=tol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, w)


CASES = [((3, 5), 1), ((3, 5), 0), ((64, 1000), -1), ((16384, 768), 0), ((16384, 768), 1),
         ((2, 300, 50), 1), ((2, 300, 50), (0, 2)), ((8, 20000), 1), ((1 << 20,), None),
         ((5, 7, 9), (1, 2)), ((), None)]


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_mean_amax_amin_var(launched, dtype, shape, dim):
    e, t = pair(shape, dtype)
    tdim = list(dim) if isinstance(dim, tuple) else dim
    dims = range(len(shape)) if dim is None else (dim,) if isinstance(dim, int) else dim
    n = int(np.prod([shape[d] for d in dims]))
    scale = 1 + np.sqrt(n) / 30  # sums of many terms
    for keepdim in (False, True):
        kw = {"keepdim": keepdim}
        if dim is None:
            same(e.sum(), t.sum(), dtype, scale)
            same(e.mean(), t.mean(), dtype, scale)
            same(e.amax(), t.amax())
            same(e.amin(), t.amin())
        else:
            same(e.sum(dim, **kw), t.sum(tdim, **kw), dtype, scale)
            same(e.mean(dim, **kw), t.mean(tdim, **kw), dtype, scale)
            same(e.amax(dim, **kw), t.amax(tdim, **kw))
            same(e.amin(dim, **kw), t.amin(tdim, **kw))
        if shape:
            same(e.var(dim, **kw), t.var(tdim, **kw), dtype, scale)
            same(e.std(dim, correction=0, **kw), t.std(tdim, correction=0, **kw), dtype, scale)
            v, m = ember.var_mean(e, dim, **kw)
            wv, wm = torch.var_mean(t, tdim, **kw)
            same(v, wv, dtype, scale)
            same(m, wm, dtype, scale)
    same(e.sum(dtype=ember.float64), t.sum(dtype=torch.float64), "float64", 1e3)
    same(e.mean(dtype=ember.float32), t.mean(dtype=torch.float32), "float32", scale)
    assert launched() >= (16 if shape else 8)


MAX_CASES = [((3, 5), 1), ((3, 5), 0), ((64, 1000), -1), ((16384, 768), 0), ((8, 20000), 1),
             ((2, 300, 50), 1), ((1 << 20,), 0), ((), 0)]


@pytest.mark.parametrize("shape,dim", MAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS + ["int32", "int64", "uint8"])
def test_max_min_with_indices_and_arg(launched, dtype, shape, dim):
    e, t = pair(shape, dtype, scale=1.0 if "int" in dtype else 3.0)  # integers: many ties
    for name in ("max", "min"):
        for keepdim in (False, True):
            ve, ie = getattr(e, name)(dim, keepdim=keepdim)
            vt, it = getattr(t, name)(dim, keepdim=keepdim)
            same(ve, vt)
            same(ie, it)
            same(getattr(e, "arg" + name)(dim, keepdim=keepdim),
                 getattr(t, "arg" + name)(dim, keepdim=keepdim))
        same(getattr(e, name)(), getattr(t, name)())
        same(getattr(e, "arg" + name)(), getattr(t, "arg" + name)())
    assert launched() >= 10


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_nan_inf_and_ties(launched, dtype):
    """NaN wins max and min (its first index); equal values give the first index."""
    nan, inf = float("nan"), float("inf")
    rows = [[1.0, nan, 3.0, nan, 3.0], [2.0, 2.0, -inf, 2.0, -inf], [-inf] * 5, [inf] * 5,
            [0.0, -0.0, 0.0, 5.0, 5.0], [nan] * 5, [1.0, 2.0, inf, -inf, 0.0]]
    t = torch.tensor(rows, dtype=getattr(torch, dtype)).cuda()
    e = ember.tensor(rows).to(getattr(ember, dtype)).cuda()
    for x, y in ((e, t), (e.T, t.T)):
        for dim in (0, 1):
            for name in ("max", "min"):
                ve, ie = getattr(x, name)(dim)
                vt, it = getattr(y, name)(dim)
                same(ve, vt)
                same(ie, it)
                same(getattr(x, "arg" + name)(dim), getattr(y, "arg" + name)(dim))
                same(getattr(x, "a" + name)(dim), getattr(y, "a" + name)(dim))
            same(x.sum(dim), y.sum(dim))
            same(x.mean(dim), y.mean(dim))
        same(x.argmax(), y.argmax())
        same(x.max(), y.max())
    big = torch.zeros(1 << 20, dtype=getattr(torch, dtype)).cuda()
    big[700001] = nan
    big[900000] = nan
    eb = ember.tensor(big.double().cpu().numpy()).to(getattr(ember, dtype)).cuda()
    assert eb.argmax().item() == big.argmax().item() == 700001  # across the split partials
    assert np.isnan(eb.amax().item()) and np.isnan(eb.sum().item())
    assert launched() >= 20


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool", "int8"])
def test_integer_and_bool_sums(launched, dtype):
    for shape, dim in (((1 << 20,), None), ((16384, 768), 0), ((300, 50), 1)):
        e, t = pair(shape, dtype)
        same(e.sum(dim) if dim is not None else e.sum(), t.sum(dim) if dim is not None
             else t.sum())
        same(e.sum(dtype=ember.float32), t.sum(dtype=torch.float32), "float32", 10)
        if dtype in ("int32", "int64") and shape[0] < 1000:
            same(e.prod(dim) if dim is not None else e.prod(),
                 t.prod(dim) if dim is not None else t.prod())
    assert launched() >= 6


@pytest.mark.parametrize("dtype", FLOATS)
def test_gradients_through_autograd(launched, dtype):
    e, t = pair((64, 300), dtype, grad=True)
    cases = [lambda x: x.sum(0), lambda x: x.mean(1), lambda x: x.amax(0),
             lambda x: x.amin(1, keepdim=True), lambda x: x.max(1).values,
             lambda x: x.min(0)[0], lambda x: x.max(), lambda x: x.var(1), lambda x: x.std(0),
             lambda x: x[:3, :5].prod(1)]
    g = np.random.default_rng(3).standard_normal(300)
    for f in cases:
        ye, yt = f(e), f(t)
        same(ye, yt, dtype, 4)
        w = g[:int(np.prod(yt.shape))].reshape(tuple(yt.shape))
        (ge,) = ember.autograd.grad(ye, e, ember.tensor(w).to(ye.dtype).cuda())
        (gt,) = torch.autograd.grad(yt, t, torch.tensor(w).to(yt.dtype).cuda())
        same(ge, gt, dtype, 8)
    assert launched() >= 10


def test_non_contiguous_inputs(launched):
    e, t = pair((40, 60, 30), "float32")
    for x, y in ((e.transpose(0, 2), t.transpose(0, 2)), (e[:, ::2, 3:], t[:, ::2, 3:]),
                 (e.flip(1), t.flip(1)), (e[:1].expand(40, 60, 30), t[:1].expand(40, 60, 30))):
        for dim in (0, 1, 2, (0, 2), (1, 2)):
            tdim = list(dim) if isinstance(dim, tuple) else dim
            same(x.sum(dim), y.sum(tdim), "float32", 10)
            same(x.amax(dim), y.amax(tdim))
            same(x.var(dim), y.var(tdim), "float32", 10)
            if not isinstance(dim, tuple):
                same(x.argmax(dim), y.argmax(dim))
        same(x.argmin(), y.argmin())
    assert launched() >= 40


def test_half_sums_accumulate_in_float32_and_are_deterministic(launched):
    e = ember.ones(8192, dtype=ember.float16).cuda()
    assert e.sum().item() == 8192.0  # a float16 running sum would stop at 2048
    b = ember.ones((16384, 768), dtype=ember.bfloat16).cuda()
    assert b.sum(0).float().cpu().tolist() == [16384.0] * 768
    x, t = pair((1 << 24,), "float32")
    assert x.sum().item() == x.sum().item()  # no atomics: the same bits every run
    same(x.sum(), t.sum(), "float32", 10)
    assert launched() >= 4


def test_errors_and_empty_inputs():
    e, t = ember.zeros(0, 3).cuda(), torch.zeros(0, 3).cuda()
    same(e.sum(0), t.sum(0))
    same(e.sum(), t.sum())
    assert np.isnan(e.mean().item())
    for f in (lambda v: v.amax(), lambda v: v.amax(0), lambda v: v.max(0), lambda v: v.argmax(),
              lambda v: v.max()):
        with pytest.raises((RuntimeError, IndexError)) as want:
            f(t)
        with pytest.raises(type(want.value)):
            f(e)
    x = ember.ones(2, 3).cuda()
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
        x.sum((1, 1))
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        x.int().mean()
    with pytest.warns(UserWarning, match="degrees of freedom"):
        x.var(0, correction=2)


def test_cached_plans_prepared_launches_and_unaligned_views(launched):
    """Repeated calls (one plan, the prepared launchers) on new data each time; the launch
    counts of the bias-gradient sum, the full sum and the row sum; a view 2 or 4 bytes past
    an aligned address (the general launch) and the aligned copy (a prepared one) agree."""
    from ember.backends.cuda import reduction_plans
    for seed in range(3):
        e, t = pair((16384, 768), "bfloat16", seed=seed)
        n0 = launched()
        same(e.sum(0), t.sum(0), "bfloat16", 6)
        assert launched() - n0 == 2  # partials, then one launch over them
        n0 = launched()
        same(e.sum(-1), t.sum(-1), "bfloat16", 2)
        assert launched() - n0 == 1
        same(e.sum_to_size(768), t.sum_to_size(768), "bfloat16", 6)
        b, tb = pair((1 << 24,), "float32", seed=seed)
        n0 = launched()
        same(b.sum(), tb.sum(), "float32", 10)
        assert launched() - n0 == 2
        assert b.sum().item() == b.sum().item()
    plans = reduction_plans.STATS["plans"]
    e, t = pair((300, 77), "bfloat16", seed=5)
    e32, t32 = pair((300, 77), "float32", seed=6)
    for x, y, dt in ((e[:, 1:], t[:, 1:], "bfloat16"), (e32[:, 1:], t32[:, 1:], "float32"),
                     (e32.view(-1)[1:], t32.view(-1)[1:], "float32")):
        for _ in range(2):
            same(x.sum(-1), y.sum(-1), dt, 2)
            same(x.amax(0), y.amax(0))
            v, i = x.max(-1)
            same(i, y.max(-1).indices)
            same(x.var(-1), y.var(-1), dt, 2)
        c = x.contiguous()
        same(c.sum(-1), y.sum(-1), dt, 2)
        assert (c.sum(-1) == x.sum(-1)).all().item()  # the same order of additions
    assert reduction_plans.STATS["plans"] > plans
