"""CUDA products through ember's cuBLAS binding (backends/cuda/blas.py) against PyTorch's CUDA
results: layouts (transposed views, slices, broadcast batches, vectors, empty), dtypes
(float16, bfloat16, float32, float64), TF32 settings, and a bfloat16 batched product captured
in a CUDA graph and replayed."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")
pytestmark = GPU_TIER

TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-10}


def pair(shape, dtype, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return (ember.tensor(a).cuda().to(getattr(ember, dtype)),
            torch.tensor(a).cuda().to(getattr(torch, dtype)))


def close(e, t, dtype):
    e, t = e.detach(), t.detach()
    assert e.is_cuda and str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    scale = max(1.0, float(t.abs().max())) if t.numel() else 1.0
    np.testing.assert_allclose(e.float().cpu().numpy(), t.float().cpu().numpy(),
                               rtol=TOL[dtype], atol=TOL[dtype] * scale)


SHAPES = [((64, 32), (32, 48)), ((4, 64, 32), (4, 32, 48)), ((4, 64, 32), (32, 48)),
          ((64, 32), (3, 32, 48)), ((2, 1, 8, 16), (3, 16, 5)), ((32,), (32, 7)),
          ((5, 32), (32,)), ((32,), (32,)), ((0, 8), (8, 4)), ((6, 0), (0, 4))]


@pytest.fixture(autouse=True)
def ieee_fp32():
    torch.backends.cuda.matmul.allow_tf32 = False
    ember.backends.cuda.matmul.allow_tf32 = False
    yield
    ember.backends.cuda.matmul.allow_tf32 = False


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_matmul_matches_torch(shapes, dtype):
    (ea, ta), (eb, tb) = pair(shapes[0], dtype, 0), pair(shapes[1], dtype, 1)
    close(ea @ eb, ta @ tb, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_transposed_and_sliced_operands(dtype):
    (ea, ta), (eb, tb) = pair((3, 40, 24), dtype, 0), pair((3, 40, 24), dtype, 1)
    close(ea.mT @ eb, ta.mT @ tb, dtype)          # transposed first operand, no copy
    close(ea @ eb.mT, ta @ tb.mT, dtype)          # transposed second operand
    close(ea[:, ::2] @ eb.mT[..., ::2], ta[:, ::2] @ tb.mT[..., ::2], dtype)  # strided: copied
    close(ember.bmm(ea, eb.mT), torch.bmm(ta, tb.mT), dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_linear_with_bias_and_gradients(dtype):
    (ex, tx), (ew, tw) = pair((2, 16, 64), dtype, 0), pair((32, 64), dtype, 1)
    eb, tb = pair((32,), dtype, 2)
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        e.requires_grad_(True), t.requires_grad_(True)
    ey, ty = ember.nn.functional.linear(ex, ew, eb), torch.nn.functional.linear(tx, tw, tb)
    close(ey, ty, dtype)
    ey.float().square().sum().backward()
    ty.float().square().sum().backward()
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        close(e.grad, t.grad, dtype)


def test_tf32_setting_is_honoured():
    (ea, ta), (eb, tb) = pair((256, 256), "float32", 0), pair((256, 256), "float32", 1)
    exact = (ea.double() @ eb.double()).float()
    ember.backends.cuda.matmul.allow_tf32 = True
    fast = ea @ eb
    ember.backends.cuda.matmul.allow_tf32 = False
    ieee = ea @ eb
    err_fast = float((fast - exact).abs().max())
    err_ieee = float((ieee - exact).abs().max())
    assert err_ieee < 1e-3 < err_fast < 0.5, (err_ieee, err_fast)


def test_bf16_batched_product_in_a_cuda_graph():
    """Captured on a side stream and replayed: cuBLAS through ember's handle (with its preset
    workspace) allocates nothing and is captured; CuPy's own matmul refuses capture."""
    import cupy as cp
    from ember.backends.cuda import blas
    a = cp.asarray(np.random.default_rng(0).standard_normal((8, 64, 32))).astype(
        np.dtype(ember.bfloat16.np))
    b = cp.asarray(np.random.default_rng(1).standard_normal((8, 32, 16))).astype(a.dtype)
    out = cp.empty((8, 64, 16), a.dtype)
    blas.matmul(a, b, out=out)  # warm up: handle and workspace exist before capture
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        blas.matmul(a, b, out=out)
        graph = stream.end_capture()
    out.fill(0)
    graph.launch(stream)
    stream.synchronize()
    want = torch.as_tensor(a.astype(np.float32).get()) @ torch.as_tensor(b.astype(
        np.float32).get())
    np.testing.assert_allclose(out.astype(np.float32).get(), want.numpy(), rtol=5e-2, atol=5e-2)
    b *= 2  # a replay reads the arrays' current values
    graph.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(out.astype(np.float32).get(), 2 * want.numpy(), rtol=5e-2,
                               atol=1e-1)


# ---- cuBLASLt (blas_lt.py): the path products take, its bias epilogue, its fallback ----

def _cp_pair(shape, dtype, seed=0, scale=1.0):
    """A CuPy array (ember's storage) and the same values as a torch CUDA tensor."""
    import cupy as cp
    a = np.asarray(np.random.default_rng(seed).standard_normal(shape), np.float32) * scale
    t = torch.tensor(a).cuda().to(getattr(torch, dtype))
    return cp.asarray(a).astype(np.dtype(getattr(ember, dtype).np)), t


def _close_cp(e, t, dtype):
    assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
    want = t.float().cpu().numpy()
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(e.astype(np.float32).get(), want, rtol=TOL[dtype],
                               atol=TOL[dtype] * scale)


def _stats():
    from ember.backends.cuda import blas_lt
    return dict(blas_lt.STATS)


LT_SHAPES = [((16, 32), (32, 24)), ((1, 32), (32, 24)), ((16, 1), (1, 24)), ((16, 32), (32, 1)),
             ((7, 13), (13, 33)), ((3, 5, 9), (3, 9, 11)), ((4, 8, 16), (16, 8)),
             ((8, 16), (2, 16, 8)), ((2, 1, 7, 5), (3, 5, 6)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("shapes", LT_SHAPES, ids=str)
def test_lt_products_match_torch(shapes, dtype):
    from ember.backends.cuda import blas
    (a, ta), (b, tb) = _cp_pair(shapes[0], dtype, 0), _cp_pair(shapes[1], dtype, 1)
    before = _stats()
    _close_cp(blas.matmul(a, b), ta @ tb, dtype)
    after = _stats()
    assert after["lt"] + after["gemm_ex"] == before["lt"] + before["gemm_ex"] + 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_lt_path_runs_for_aligned_shapes(dtype):
    """Aligned operands (the models' case) go through cublasLtMatmul, not the fallback."""
    from ember.backends.cuda import blas
    (a, ta), (b, tb) = _cp_pair((64, 128), dtype, 0), _cp_pair((128, 96), dtype, 1)
    before = _stats()
    _close_cp(blas.matmul(a, b), ta @ tb, dtype)
    _close_cp(blas.matmul(a, b.T.copy().T), ta @ tb, dtype)       # transposed view of b
    _close_cp(blas.matmul(a.T.copy().T, b), ta @ tb, dtype)       # transposed view of a
    (x, tx), (y, ty) = _cp_pair((4, 64, 32), dtype, 2), _cp_pair((4, 32, 48), dtype, 3)
    _close_cp(blas.matmul(x, y), tx @ ty, dtype)                  # strided batch
    after = _stats()
    assert after["lt"] - before["lt"] == 4, (before, after)
    assert after["gemm_ex"] == before["gemm_ex"]
    blas.matmul(a, b)
    assert _stats()["heuristics"] == after["heuristics"]           # the plan is cached


BIASES = [(24,), (1, 24), (16, 24), (16, 1), ()]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("bias_shape", BIASES, ids=str)
def test_lt_products_with_bias(bias_shape, dtype):
    """The bias (broadcast to the result) is added in the accumulator: a row vector in the
    epilogue, any other shape as beta=1 on a copy; matches torch's addmm / matmul + bias."""
    import cupy as cp
    from ember.backends.cuda import blas
    (a, ta), (b, tb) = _cp_pair((16, 32), dtype, 0), _cp_pair((32, 24), dtype, 1)
    bias, tbias = _cp_pair(bias_shape, dtype, 2)
    got = blas.matmul(a, b, bias=cp.broadcast_to(bias, (16, 24)))
    if len(bias_shape) == 1:
        want = torch.addmm(tbias, ta, tb)
    else:
        want = (ta.double() @ tb.double() + tbias.double()).to(ta.dtype)
    _close_cp(got, want, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", [(16384 // 64, 768, 3072), (33, 17, 9), (1, 8, 8), (8, 8, 1)],
                         ids=str)
def test_linear_bias_epilogue_ran(shape, dtype):
    """nn.Linear's forward (x @ w.T + b) is one cublasLtMatmul with the bias epilogue."""
    m, k, n = shape
    (ex, tx), (ew, tw) = pair((m, k), dtype, 0), pair((n, k), dtype, 1)
    eb, tb = pair((n,), dtype, 2)
    before = _stats()
    ey = ember.nn.functional.linear(ex, ew, eb)
    after = _stats()
    close(ey, torch.nn.functional.linear(tx, tw, tb), dtype)
    if m % 8 == 0 and n % 8 == 0 and k % 8 == 0:  # aligned: the epilogue is to be offered
        assert after["lt_bias"] - before["lt_bias"] == 1, (before, after)
    assert after["lt"] + after["gemm_ex"] - before["lt"] - before["gemm_ex"] == 1


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_batched_linear_is_one_product(dtype):
    """A (B, T, C) input: linear reshapes to one (B*T, C) product; a batch of a's against one
    b also folds into one tall product (batch count 1) inside blas.matmul."""
    from ember.backends.cuda import blas
    (ex, tx), (ew, tw) = pair((4, 24, 64), dtype, 0), pair((32, 64), dtype, 1)
    eb, tb = pair((32,), dtype, 2)
    module = ember.nn.Linear(64, 32).cuda().to(getattr(ember, dtype))
    tmod = torch.nn.Linear(64, 32).cuda().to(getattr(torch, dtype))
    with ember.no_grad():
        module.weight.copy_(ew), module.bias.copy_(eb)
    with torch.no_grad():
        tmod.weight.copy_(tw), tmod.bias.copy_(tb)
    before = _stats()
    close(module(ex), tmod(tx), dtype)
    assert _stats()["lt_bias"] - before["lt_bias"] == 1
    (a, ta), (b, tb2) = _cp_pair((4, 24, 64), dtype, 3), _cp_pair((64, 32), dtype, 4)
    _close_cp(blas.matmul(a, b), ta @ tb2, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_k_zero_and_empty_with_bias(dtype):
    import cupy as cp
    from ember.backends.cuda import blas
    (a, ta), (b, tb) = _cp_pair((5, 0), dtype, 0), _cp_pair((0, 3), dtype, 1)
    bias, tbias = _cp_pair((3,), dtype, 2)
    _close_cp(blas.matmul(a, b, bias=cp.broadcast_to(bias, (5, 3))), torch.addmm(tbias, ta, tb),
              dtype)
    _close_cp(blas.matmul(a, b), ta @ tb, dtype)
    (a, ta), (b, tb) = _cp_pair((0, 4), dtype, 0), _cp_pair((4, 3), dtype, 1)
    _close_cp(blas.matmul(a, b, bias=cp.broadcast_to(bias, (0, 3))), torch.addmm(tbias, ta, tb),
              dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float64"])
def test_fallback_when_lt_has_no_algorithm(dtype, monkeypatch):
    """Where cuBLASLt offers no algorithm, cublasGemmStridedBatchedEx computes the product
    (and the bias as beta=1 on a copy); both paths agree."""
    import cupy as cp
    from ember.backends.cuda import blas, blas_lt
    (a, ta), (b, tb) = _cp_pair((3, 16, 32), dtype, 0), _cp_pair((32, 24), dtype, 1)
    bias, tbias = _cp_pair((24,), dtype, 2)
    lt = blas.matmul(a, b, bias=cp.broadcast_to(bias, (3, 16, 24)))
    monkeypatch.setattr(blas_lt, "plan", lambda *args: None)
    before = _stats()
    ref = blas.matmul(a, b, bias=cp.broadcast_to(bias, (3, 16, 24)))
    assert _stats()["gemm_ex"] == before["gemm_ex"] + 1 and _stats()["lt"] == before["lt"]
    _close_cp(ref, ta @ tb + tbias, dtype)
    np.testing.assert_allclose(lt.astype(np.float32).get(), ref.astype(np.float32).get(),
                               rtol=TOL[dtype], atol=TOL[dtype] * 4)


def test_tf32_setting_reaches_lt():
    """TF32 is a compute type of the Lt plan: changing the setting changes the plan."""
    from ember.backends.cuda import blas
    (a, _), (b, _) = _cp_pair((256, 256), "float32", 0), _cp_pair((256, 256), "float32", 1)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    ember.backends.cuda.matmul.allow_tf32 = True
    before = _stats()
    fast = blas.matmul(a, b)
    ember.backends.cuda.matmul.allow_tf32 = False
    ieee = blas.matmul(a, b)
    assert _stats()["lt"] - before["lt"] == 2
    err_fast, err_ieee = float(abs(fast - exact).max()), float(abs(ieee - exact).max())
    assert err_ieee < 1e-3 < err_fast < 0.5, (err_ieee, err_fast)


def test_misaligned_operands():
    """Views starting off the 256-byte boundary (read in place, not copied): the plan asks
    for their true alignment."""
    from ember.backends.cuda import blas
    (a, ta), (b, tb) = _cp_pair((17, 32), "bfloat16", 0), _cp_pair((1 + 32 * 40,), "bfloat16", 1)
    b, tb = b[1:].reshape(32, 40), tb[1:].reshape(32, 40)  # 2-byte aligned
    assert b.data.ptr % 4 == 2
    _close_cp(blas.matmul(a[1:], b), ta[1:] @ tb, "bfloat16")
    _close_cp(blas.matmul(a[1:], a[:16].T), ta[1:] @ ta[:16].T, "bfloat16")
    (a, ta), (b, tb) = _cp_pair((2, 65, 64), "float16", 2), _cp_pair((64, 40), "float16", 3)
    _close_cp(blas.matmul(a[:, 1:], b), ta[:, 1:] @ tb, "float16")


def test_bf16_linear_with_bias_epilogue_in_a_cuda_graph():
    """The epilogue's bias pointer is captured with the product; a replay reads the current
    values of input, weight and bias."""
    import cupy as cp
    from ember.backends.cuda import blas
    (x, tx), (w, tw) = _cp_pair((64, 32), "bfloat16", 0), _cp_pair((48, 32), "bfloat16", 1)
    bias, tbias = _cp_pair((48,), "bfloat16", 2)
    out = cp.empty((64, 48), x.dtype)
    blas.matmul(x, w.T, out=out, bias=cp.broadcast_to(bias, (64, 48)))  # warm up: plan exists
    before = _stats()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        blas.matmul(x, w.T, out=out, bias=cp.broadcast_to(bias, (64, 48)))
        graph = stream.end_capture()
    assert _stats()["lt_bias"] == before["lt_bias"] + 1
    out.fill(0)
    cp.cuda.Device().synchronize()  # the fill (current stream) before the replay (stream)
    graph.launch(stream)
    stream.synchronize()
    _close_cp(out, torch.nn.functional.linear(tx, tw, tbias), "bfloat16")
    bias *= 2
    cp.cuda.Device().synchronize()
    graph.launch(stream)
    stream.synchronize()
    _close_cp(out, torch.nn.functional.linear(tx, tw, 2 * tbias), "bfloat16")
