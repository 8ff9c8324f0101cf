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
