"""ember's Triton scatter kernel on the GPU (backends/cuda/scatter.py, ``xp.ufunc_at``) against
PyTorch's CUDA results (the GPU tier: ``-m cuda``): index_add, index_put(accumulate=True),
scatter(reduce=), scatter_add and scatter_reduce in every reduction, over float, half and
integer dtypes with many repeated indices, on dims other than 0 and on strided inputs; the
backward of indexing, take and embedding. Each test checks that the kernel ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8"]
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture
def launched():
    from ember.backends.cuda import scatter
    before = scatter.STATS["launches"]
    return lambda: scatter.STATS["launches"] - before


def pair(a, dtype, grad=False):
    t = torch.tensor(a).to(getattr(torch, dtype)).cuda()
    e = ember.tensor(t.cpu().double().numpy()).to(getattr(ember, dtype)).cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype):
    """Values as torch's, where a half type's are torch's float32 result rounded once to the
    half type: torch's CUDA atomics round each addition of a sum to it (and in no set
    order), ember's kernel adds in float32."""
    assert e.is_cuda and str(e.dtype) == str(t.dtype).replace("torch.", "ember.")
    want = t.detach().cpu().double().numpy()
    got = ember.Tensor.double(e.detach()).cpu().numpy()
    tol = TOL.get(dtype, 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * (1 + np.abs(want).max(initial=0)))


def reference(fn, dtype, *tensors):
    """``fn`` of the torch tensors, in float32 for the half types."""
    if dtype in ("float16", "bfloat16"):
        return fn(*(t.float() if t.is_floating_point() else t for t in tensors)).to(
            getattr(torch, dtype))
    return fn(*tensors)


def data(shape, dtype, rng):
    if dtype in ("int64", "int32", "uint8"):
        return rng.integers(0 if dtype == "uint8" else -3, 4, shape)
    return rng.integers(-8, 9, shape) / 4  # exact sums in every float type


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_add_and_index_put(dtype, launched):
    rng = np.random.default_rng(0)
    x, src = data((50, 3, 40), dtype, rng), data((50, 700, 40), dtype, rng)
    idx = rng.integers(0, 3, 700)
    (ex, tx), (es, ts) = pair(x, dtype), pair(src, dtype)
    ei, ti = ember.tensor(idx).cuda(), torch.tensor(idx).cuda()
    same(ex.index_add(1, ei, es), reference(lambda a, s: a.index_add(1, ti, s), dtype, tx, ts),
         dtype)
    rows = rng.integers(-50, 50, 2000)
    vals = data((2000, 3, 40), dtype, rng)
    (ev, tv) = pair(vals, dtype)
    er, tr = ember.tensor(rows).cuda(), torch.tensor(rows).cuda()
    same(ex.index_put((er,), ev, accumulate=True),
         reference(lambda a, v: a.index_put((tr,), v, accumulate=True), dtype, tx, tv), dtype)
    assert launched() == 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self, launched):
    rng = np.random.default_rng(1)
    x = data((8, 300), dtype, rng)
    src = data((500, 300), dtype, rng)
    if reduce == "prod":  # about 60 factors a slot: mostly 1, so products stay in range
        src = rng.choice([-1.0, 1.0, 2.0, 0.5], (500, 300), p=[0.1, 0.7, 0.1, 0.1])
        if dtype in ("int64", "int32", "uint8"):
            src = np.where(src == 0.5, 1.0, src)
    idx = rng.integers(0, 8, (500, 300))
    (ex, tx), (es, ts) = pair(x, dtype), pair(src, dtype)
    ei, ti = ember.tensor(idx).cuda(), torch.tensor(idx).cuda()
    same(ex.scatter_reduce(0, ei, es, reduce, include_self=include_self),
         reference(lambda a, s: a.scatter_reduce(0, ti, s, reduce, include_self=include_self),
                   dtype, tx, ts), dtype)
    assert launched() == 1


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_scatter_add_and_reduce_on_strided_inputs(dtype, launched):
    rng = np.random.default_rng(2)
    x = data((40, 30), dtype, rng)
    src = data((30, 25), dtype, rng)
    idx = rng.integers(0, 20, (20, 25))
    (ex, tx), (es, ts) = pair(x, dtype), pair(src, dtype)
    ex, tx, es, ts = ex.t()[:, ::2], tx.t()[:, ::2], es.t(), ts.t()  # (30, 20), (25, 30)
    ei, ti = ember.tensor(idx.T.copy()).cuda()[:, :20], torch.tensor(idx.T.copy()).cuda()[:, :20]
    same(ex.scatter_add(1, ei, es), tx.scatter_add(1, ti, ts), dtype)
    same(ex.scatter(1, ei, es, reduce="add"), tx.scatter(1, ti, ts, reduce="add"), dtype)
    assert launched() == 2


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_backward_of_indexing_take_embedding(dtype, launched):
    rng = np.random.default_rng(3)
    x = data((300, 64), dtype, rng)
    rows = rng.integers(-300, 300, 5000)
    (ex, tx) = pair(x, dtype, grad=True)
    ex[ember.tensor(rows).cuda()].sum().backward()
    tx[torch.tensor(rows).cuda()].sum().backward()
    same(ex.grad, tx.grad, dtype)
    (ex, tx) = pair(x, dtype, grad=True)
    flat = rng.integers(-x.size, x.size, 7000)
    ember.take(ex, ember.tensor(flat).cuda()).sum().backward()
    torch.take(tx, torch.tensor(flat).cuda()).sum().backward()
    same(ex.grad, tx.grad, dtype)
    (ew, tw) = pair(x, dtype, grad=True)
    ids = rng.integers(0, 300, (8, 512))
    ember.nn.functional.embedding(ember.tensor(ids).cuda(), ew).sum().backward()
    torch.nn.functional.embedding(torch.tensor(ids).cuda(), tw).sum().backward()
    same(ew.grad, tw.grad, dtype)
    assert launched() >= 2
