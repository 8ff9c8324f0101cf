"""ember's batch-norm and pooling kernels on the GPU (backends/cuda/channels.py, pool.py)
against PyTorch's CUDA results (the GPU tier: ``-m cuda``): F.batch_norm in training and
evaluation, nn.BatchNorm2d's running statistics, half input with float32 parameters,
max_pool2d with indices (padding, dilation, ceil mode, NaN), avg_pool2d with every divisor
rule, adaptive average pooling, and a small conv + batch norm + relu + pool network's
gradients; values and gradients through autograd. Each test also checks that the kernels
ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

TOL = {"float32": 3e-5, "float64": 1e-10, "float16": 4e-3, "bfloat16": 3e-2}


@pytest.fixture
def launched():
    """How many batch-norm and pooling kernels ran since the test began."""
    from ember.backends.cuda import channels, pool
    before = channels.STATS["launches"], pool.STATS["launches"]
    return lambda: (channels.STATS["launches"] - before[0], pool.STATS["launches"] - before[1])


@pytest.fixture(autouse=True)
def ieee(monkeypatch):
    """Convolutions in IEEE float32 on both sides: torch's cuDNN and ember's kernels (which
    follow ember.backends.cudnn.allow_tf32, True by default as PyTorch's)."""
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", False)
    # (torch's test utilities, which other files import, freeze the global flags: the context
    # manager is what they leave open)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


def pair(shape, dtype="float32", seed=0, grad=False, scale=3.0, shift=0.0):
    """The same values (exact in ``dtype``) as an ember and a torch tensor on the GPU."""
    a = np.random.default_rng(seed).standard_normal(shape) * scale + shift
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.double().numpy()).to(getattr(ember, dtype))
    e, t = e.cuda(), t.cuda()
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t, dtype, scale=1.0, sums=False):
    assert e.is_cuda, f"result is on {e.device}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    w = t.detach().double().cpu().numpy()
    tol = TOL[dtype] * scale
    atol = tol * max(1.0, float(np.nanmax(np.abs(w), initial=0))) if sums else tol
    np.testing.assert_allclose(e.detach().double().cpu().numpy(), w, rtol=tol, atol=atol,
                               equal_nan=True)


# ---------------------------------------------------------------------- batch norm
BN_SHAPES = [(2, 3, 5, 7), (64, 64, 32, 32), (64, 512, 4, 4), (256, 10), (8, 16, 3, 70, 9),
             (4, 8, 128, 130)]


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_functional(launched, training, dtype, shape):
    """Values, running statistics and the gradients of input, weight and bias; half input
    takes float32 parameters, as with PyTorch's mixed-precision batch norm."""
    c = shape[1]
    pdt = "float32" if dtype in ("float16", "bfloat16") else dtype
    e, t = pair(shape, dtype, grad=True, shift=2.0)
    (we, wt), (be, bt) = (pair((c,), pdt, seed=s, grad=True) for s in (1, 2))
    rme, rmt = pair((c,), pdt, seed=3)
    rve, rvt = (x.abs() + 0.5 for x in pair((c,), pdt, seed=4))
    ye = ember.nn.functional.batch_norm(e, rme, rve, we, be, training, 0.2, 1e-4)
    yt = torch.nn.functional.batch_norm(t, rmt, rvt, wt, bt, training, 0.2, 1e-4)
    same(ye, yt, dtype, scale=4)
    same(rme, rmt, pdt, scale=4)
    same(rve, rvt, pdt, scale=4)
    ge, gt = pair(shape, dtype, seed=5)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=20, sums=True)
    if dtype == pdt:  # (a half input's parameter gradients: ember rounds them to the input's)
        same(we.grad, wt.grad, dtype, scale=50, sums=True)
        same(be.grad, bt.grad, dtype, scale=50, sums=True)
    assert launched()[0] >= (5 if training else 2)


def test_batch_norm_repeated_calls_with_misaligned_operands(launched):
    """Plans are cached by shape and their launchers prepared for 16-byte-aligned addresses:
    the same call with an input (and weight) starting 4 bytes into a buffer takes the general
    launch and is still right, and so is the aligned call after it."""
    for misalign in (False, True, False):
        lo = 1 if misalign else 0
        n = 4 * 6 * 5 * 5
        flat_e, flat_t = pair((n + 1,), "float32", seed=int(misalign), shift=1.0)
        e = flat_e[lo:lo + n].view(4, 6, 5, 5).requires_grad_()
        t = flat_t[lo:lo + n].view(4, 6, 5, 5).requires_grad_()
        fwe, fwt = pair((7,), "float32", seed=2)
        we, wt = fwe[lo:lo + 6].requires_grad_(), fwt[lo:lo + 6].requires_grad_()
        ye = ember.nn.functional.batch_norm(e, None, None, we, None, True, 0.1, 1e-5)
        yt = torch.nn.functional.batch_norm(t, None, None, wt, None, True, 0.1, 1e-5)
        same(ye, yt, "float32", scale=4)
        ge, gt = pair((4, 6, 5, 5), "float32", seed=5)
        ye.backward(ge)
        yt.backward(gt)
        same(e.grad, t.grad, "float32", scale=20, sums=True)
        same(we.grad, wt.grad, "float32", scale=50, sums=True)
    assert launched()[0] >= 18


def test_batch_norm_module_running_stats_and_double_backward(launched):
    e, t = pair((16, 8, 10, 10), "float64", grad=True, shift=1.0)
    em, tm = ember.nn.BatchNorm2d(8).double().cuda(), torch.nn.BatchNorm2d(8).double().cuda()
    for _ in range(3):
        ye, yt = em(e), tm(t)
        same(ye, yt, "float64")
    same(em.running_mean, tm.running_mean, "float64")
    same(em.running_var, tm.running_var, "float64")
    assert int(em.num_batches_tracked.cpu()) == 3
    em.eval()
    tm.eval()
    same(em(e), tm(t), "float64")
    grads = []
    for lib, x in ((ember, e), (torch, t)):
        w = lib.full((8,), 1.5, dtype=lib.float64, device="cuda", requires_grad=True)
        y = (lib.nn.functional.batch_norm(x, None, None, w, None, True) ** 3).sum()
        gx, = lib.autograd.grad(y, x, create_graph=True)
        (gx * gx).sum().backward()
        grads.append(w.grad)
    same(*grads, "float64", scale=1e3, sums=True)
    assert launched()[0] >= 3 * 3 + 2


# ---------------------------------------------------------------------- pooling
MAX_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
             dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1),
                  ceil_mode=True),
             dict(kernel_size=3, stride=1, padding=1, dilation=2)]


@pytest.mark.parametrize("kw", MAX_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (64, 64, 64, 64), (3, 33, 17)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_max_pool2d(launched, dtype, shape, kw):
    e, t = pair(shape, dtype, grad=True)
    ye, ie = ember.nn.functional.max_pool2d(e, return_indices=True, **kw)
    yt, it = torch.nn.functional.max_pool2d(t, return_indices=True, **kw)
    same(ye, yt, dtype)
    assert (ie.cpu().numpy() == it.cpu().numpy()).all()
    ge, gt = pair(tuple(yt.shape), dtype, seed=1)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=4, sums=True)
    assert launched()[1] >= 2


def test_max_pool2d_nan_and_inf(launched):
    a = np.random.default_rng(0).standard_normal((2, 3, 9, 8))
    a[0, 0, 1, 1] = a[0, 0, 2, 2] = np.nan
    a[1, 2] = -np.inf
    e, t = ember.tensor(a).cuda(), torch.tensor(a).cuda()
    for kw in MAX_CASES:
        ye, ie = ember.nn.functional.max_pool2d(e, return_indices=True, **kw)
        yt, it = torch.nn.functional.max_pool2d(t, return_indices=True, **kw)
        same(ye, yt, "float64")
        assert (ie.cpu().numpy() == it.cpu().numpy()).all()
    assert launched()[1] >= len(MAX_CASES)


AVG_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                  count_include_pad=False),
             dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True,
                  divisor_override=5),
             dict(kernel_size=(3, 2), stride=(3, 1), padding=(1, 0), count_include_pad=False)]


@pytest.mark.parametrize("kw", AVG_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (64, 64, 32, 32)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_avg_pool2d(launched, dtype, shape, kw):
    e, t = pair(shape, dtype, grad=True)
    ye = ember.nn.functional.avg_pool2d(e, **kw)
    yt = torch.nn.functional.avg_pool2d(t, **kw)
    same(ye, yt, dtype, scale=2)
    ge, gt = pair(tuple(yt.shape), dtype, seed=1)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, dtype, scale=4)
    assert launched()[1] >= 2


@pytest.mark.parametrize("out", [1, (2, 3), (5, 7), (3, None), (7, 9)])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (64, 512, 4, 4), (8, 64, 56, 56)])
def test_adaptive_avg_pool2d(launched, shape, out):
    e, t = pair(shape, "float32", grad=True)
    ye = ember.nn.functional.adaptive_avg_pool2d(e, out)
    yt = torch.nn.functional.adaptive_avg_pool2d(t, out)
    same(ye, yt, "float32", scale=2)
    ge, gt = pair(tuple(yt.shape), "float32", seed=1)
    ye.backward(ge)
    yt.backward(gt)
    same(e.grad, t.grad, "float32", scale=4)
    assert launched()[1] >= 1


# ---------------------------------------------------------------------- a small network
def test_conv_bn_relu_pool_network_gradients(launched):
    nets = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        nn = lib.nn
        nets.append(nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1), nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(32), nn.ReLU(), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(32, 10)).cuda())
    en, tn = nets
    with torch.no_grad():
        for pe, pt in zip(en.parameters(), tn.parameters()):
            pt.copy_(torch.tensor(pe.detach().cpu().numpy()).cuda())
    e, t = pair((8, 3, 32, 32), "float32")
    le = en(e).log_softmax(-1).sum()
    lt = tn(t).log_softmax(-1).sum()
    same(le, lt, "float32", scale=10, sums=True)
    le.backward()
    lt.backward()
    for pe, pt in zip(en.parameters(), tn.parameters()):
        same(pe.grad, pt.grad, "float32", scale=200, sums=True)
    ran = launched()
    assert ran[0] >= 2 * 6 and ran[1] >= 4
