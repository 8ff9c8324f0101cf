"""ember's implicit-GEMM convolution kernels on the GPU (backends/cuda/conv.py) against
PyTorch's CUDA results (cuDNN; the GPU tier: ``-m cuda``): conv2d / conv1d /
conv_transpose2d values and gradients through autograd over strides, padding, dilation,
groups, 1x1, bias, non-contiguous (channels-last) input, the ResNet-like benchmark's layer
shapes (which take the full-size block configs and the split-K weight gradient), half
dtypes, and TF32. float32 comparisons run both sides in IEEE float32
(``torch.backends.cudnn.flags(allow_tf32=False)``, ``ember.backends.cudnn.allow_tf32 =
False``); the TF32 test turns it on for both. Each test also checks that the kernels ran.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER

TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2, "tf32": 5e-3}


@pytest.fixture
def launched():
    """How many convolution kernels ran since the test began."""
    from ember.backends.cuda import conv
    before = conv.STATS["launches"]
    return lambda: conv.STATS["launches"] - before


@pytest.fixture
def ieee(monkeypatch):
    monkeypatch.setattr(ember.backends.cudnn, "allow_tf32", False)
    # (torch's test utilities freeze the global flags: the context manager is what is left)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


def pair(shape, dtype="float32", seed=0, grad=True):
    """The same values (exact in ``dtype``) as ember and torch tensors on the GPU."""
    a = np.random.default_rng(seed).standard_normal(shape)
    t = torch.tensor(a).to(getattr(torch, dtype))
    e = ember.tensor(t.double().numpy()).to(getattr(ember, dtype)).cuda()
    t = t.cuda()
    return (e.requires_grad_(), t.requires_grad_()) if grad else (e, t)


def same(e, t, dtype="float32"):
    """Within ``dtype``'s tolerance of the largest magnitude (sums of many products)."""
    assert e.is_cuda and str(e.dtype) == str(t.dtype).replace("torch", "ember")
    assert tuple(e.shape) == tuple(t.shape)
    w = t.detach().double().cpu().numpy()
    atol = TOL[dtype] * max(1.0, float(np.abs(w).max(initial=0)))
    np.testing.assert_allclose(e.detach().double().cpu().numpy(), w, rtol=TOL[dtype],
                               atol=atol)


def run_both(fn, shapes, dtype="float32", check=None, grad_seed=9):
    """``fn(lib, *tensors)`` for ember and torch on the same inputs; the outputs and every
    input's gradient (for a random output gradient) compared, within ``check``'s tolerance
    (``dtype``'s by default)."""
    es, ts = zip(*(pair(s, dtype, seed=i) for i, s in enumerate(shapes)))
    ye, yt = fn(ember, *es), fn(torch, *ts)
    check = check or dtype
    same(ye, yt, check)
    g = np.random.default_rng(grad_seed).standard_normal(tuple(yt.shape))
    gt = torch.tensor(g).to(yt.dtype).cuda()
    ye.backward(ember.tensor(gt.double().cpu().numpy()).to(ye.dtype).cuda())
    yt.backward(gt)
    for e, t in zip(es, ts):
        same(e.grad, t.grad, check)


# x shape, weight shape, keyword arguments
CASES = [
    ((4, 16, 12, 12), (32, 16, 3, 3), dict(padding=1)),
    ((4, 16, 13, 11), (24, 16, 3, 3), dict(stride=2, padding=1)),
    ((2, 8, 15, 17), (8, 8, 3, 2), dict(stride=(2, 3), padding=(2, 0), dilation=(2, 1))),
    ((2, 12, 9, 9), (12, 4, 3, 3), dict(padding=1, groups=3)),
    ((4, 32, 8, 8), (64, 32, 1, 1), dict(stride=2)),
    ((4, 3, 32, 32), (16, 3, 3, 3), dict(padding=1)),
    ((3, 20, 7, 9), (10, 20, 5, 5), dict(padding=3, dilation=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_values_and_gradients(ieee, launched, xs, ws, kw, bias):
    shapes = [xs, ws] + ([(ws[0],)] if bias else [])
    run_both(lambda lib, x, w, b=None: lib.nn.functional.conv2d(x, w, b, **kw), shapes)
    assert launched() >= 3


# the ResNet-like benchmark's layers (bench/cuda.py), batch 16: every block config, 1x1
# projections at stride 2, and the split-K weight gradient over long reductions
RESNET = [((16, 3, 64, 64), (64, 3, 3, 3), 1), ((16, 64, 32, 32), (64, 64, 3, 3), 1),
          ((16, 64, 32, 32), (128, 64, 3, 3), 2), ((16, 64, 32, 32), (128, 64, 1, 1), 2),
          ((16, 128, 16, 16), (128, 128, 3, 3), 1), ((16, 256, 8, 8), (512, 256, 3, 3), 2),
          ((16, 512, 4, 4), (512, 512, 3, 3), 1)]


@pytest.mark.parametrize("xs,ws,stride", RESNET)
def test_resnet_layer_shapes(ieee, launched, xs, ws, stride):
    k = ws[2] // 2
    run_both(lambda lib, x, w: lib.nn.functional.conv2d(x, w, None, stride, k), [xs, ws])
    assert launched() >= 3


def test_conv1d_and_channels_last_input(ieee, launched):
    run_both(lambda lib, x, w, b: lib.nn.functional.conv1d(x, w, b, stride=2, padding=2,
                                                           dilation=2),
             [(4, 16, 50), (32, 16, 5), (32,)])
    run_both(lambda lib, x, w: lib.nn.functional.conv2d(x.permute(0, 3, 1, 2), w, padding=1),
             [(4, 10, 12, 16), (32, 16, 3, 3)])
    assert launched() >= 6


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1),
                                dict(stride=3, padding=2, dilation=2, groups=2),
                                dict(padding=1)])
def test_conv_transpose2d_values_and_gradients(ieee, launched, kw):
    run_both(lambda lib, y, w, b: lib.nn.functional.conv_transpose2d(y, w, b, **kw),
             [(4, 32, 9, 7), (32, 16, 3, 3), (16 * kw.get("groups", 1),)])
    assert launched() >= 3


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("xs,ws,kw", CASES[:2] + CASES[4:6])
def test_half_dtypes(launched, dtype, xs, ws, kw):
    run_both(lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, **kw),
             [xs, ws, (ws[0],)], dtype)
    assert launched() >= 3


@pytest.mark.parametrize("xs,ws,stride", RESNET[1:3] + RESNET[-1:])
def test_tf32_default_on_both_sides(launched, xs, ws, stride):
    """ember.backends.cudnn.allow_tf32 (default True) against torch's cuDNN with TF32 (its
    default): within TF32's rounding; and TF32 is really used (the IEEE result differs)."""
    assert ember.backends.cudnn.allow_tf32
    k = ws[2] // 2
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        run_both(lambda lib, x, w: lib.nn.functional.conv2d(x, w, None, stride, k),
                 [xs, ws], check="tf32")
    (x, _), (w, _) = pair(xs, grad=False), pair(ws, seed=1, grad=False)
    tf32 = ember.nn.functional.conv2d(x, w, None, stride, k)
    ember.backends.cudnn.allow_tf32 = False
    try:
        full = ember.nn.functional.conv2d(x, w, None, stride, k)
    finally:
        ember.backends.cudnn.allow_tf32 = True
    assert not bool((tf32 == full).all())
    assert launched() >= 4


def test_repeated_calls_with_misaligned_operands(ieee, launched):
    """A call plan is cached by layout and its launcher prepared for 16-byte-aligned
    addresses: a later call of the same shapes whose input (or weight) starts mid-buffer
    (4 bytes in) takes the general launch and is still right, and so is the aligned call
    after it."""
    import torch.nn.functional as F
    for misalign in (False, True, False):
        a = np.random.default_rng(int(misalign)).standard_normal(2 * 3 * 6 * 6 + 1)
        flat_e = ember.tensor(a, dtype=ember.float32).cuda()
        flat_t = torch.tensor(a, dtype=torch.float32).cuda()
        lo = 1 if misalign else 0
        x_e = flat_e[lo:lo + 2 * 3 * 6 * 6].view(2, 3, 6, 6).requires_grad_()
        x_t = flat_t[lo:lo + 2 * 3 * 6 * 6].view(2, 3, 6, 6).requires_grad_()
        w_e, w_t = pair((4, 3, 3, 3), seed=5)
        y_e = ember.nn.functional.conv2d(x_e, w_e, None, 1, 1)
        y_t = F.conv2d(x_t, w_t, None, 1, 1)
        same(y_e, y_t)
        g = np.random.default_rng(9).standard_normal(tuple(y_t.shape))
        y_e.backward(ember.tensor(g, dtype=ember.float32).cuda())
        y_t.backward(torch.tensor(g, dtype=torch.float32).cuda())
        same(x_e.grad, x_t.grad)
        same(w_e.grad, w_t.grad)
    assert launched() >= 9
