"""ember's implicit-GEMM convolution kernels (backends/cuda/conv_kernels.py, wrappers conv.py)
through Triton's interpreter on CPU, against PyTorch on CPU: first the three wrappers on numpy
arrays (forward in both reduction orders, the phase-split data gradient, the split-K weight
gradient) over strides, padding, dilation, groups, 1x1 and 1-D, bias, layouts and dtypes;
then through ember's ops and autograd with the CPU backend's overrides swapped for the
kernels (conv2d, conv1d, conv_transpose2d, gradients, unbatched, non-contiguous input); the
fallbacks; the TF32 switch; last, every kernel variant compiled for sm_90 (no GPU needed).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from triton_util import INTERPRETED, compile_for_sm90, cpu_overrides
from ember.backends import cudnn
from ember.backends.cuda import conv

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = INTERPRETED

TOL = {"float32": 2e-5, "bfloat16": 2e-2, "float16": 2e-3}


def data(shape, dtype="float32", seed=0):
    """Values exact in ``dtype``: (numpy array of that dtype, float64 torch tensor)."""
    a = torch.tensor(np.random.default_rng(seed).standard_normal(shape))
    a = a.to(getattr(torch, dtype)).double()
    return a.numpy().astype(getattr(ember, dtype).np), a


def close(got, want, dtype="float32"):
    """``got`` (numpy, of ``dtype``) against a float64 torch result, relative to its size."""
    assert got is not None
    assert got.dtype == getattr(ember, dtype).np and got.shape == tuple(want.shape)
    w = want.detach().numpy()
    t = TOL[dtype] * max(1.0, float(np.abs(w).max(initial=0)))
    np.testing.assert_allclose(got.astype(np.float64), w, rtol=TOL[dtype], atol=t)


@pytest.fixture(params=["tapwise", "flat"])
def order(request, monkeypatch):
    """The forward's reduction (and the weight gradient's columns) tap by tap over channel
    blocks, or flat over (c, kh, kw)."""
    monkeypatch.setattr(conv, "FLAT_BELOW", 10 ** 9 if request.param == "flat" else 0)
    return request.param


# x shape, weight shape, stride, padding, dilation, groups
CASES = [
    ((2, 5, 6, 7), (4, 5, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 5, 7, 7), (6, 5, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 3, 9, 8), (5, 3, 3, 2), (2, 3), (2, 0), (2, 1), 1),
    ((2, 6, 5, 6), (4, 3, 1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((2, 4, 6, 6), (3, 4, 1, 1), (2, 2), (0, 0), (1, 1), 1),
    ((1, 4, 8, 7), (4, 2, 3, 3), (3, 2), (0, 2), (1, 3), 2),
]


def _geometry(xs, ws, stride, pad, dil):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(xs[2:], ws[2:], stride, pad, dil))


@pytest.mark.parametrize("xs,ws,stride,pad,dil,groups", CASES)
def test_forward_matches_torch(xs, ws, stride, pad, dil, groups, order):
    x, tx = data(xs)
    w, tw = data(ws, seed=1)
    b, tb = data((ws[0],), seed=2)
    out = _geometry(xs, ws, stride, pad, dil)
    close(conv._conv_nd(x, w, b, stride, pad, dil, groups, out),
          F.conv2d(tx, tw, tb, stride, pad, dil, groups))
    close(conv._conv_nd(x, w, None, stride, pad, dil, groups, out),
          F.conv2d(tx, tw, None, stride, pad, dil, groups))


@pytest.mark.parametrize("xs,ws,stride,pad,dil,groups", CASES)
def test_data_and_weight_gradients_match_torch(xs, ws, stride, pad, dil, groups, order):
    x, tx = data(xs)
    w, tw = data(ws, seed=1)
    out = _geometry(xs, ws, stride, pad, dil)
    g, tg = data((xs[0], ws[0]) + out, seed=3)
    tx.requires_grad_()
    tw.requires_grad_()
    F.conv2d(tx, tw, None, stride, pad, dil, groups).backward(tg)
    close(conv._conv_transpose_nd(g, w, None, stride, pad, dil, groups, xs[2:]), tx.grad)
    close(conv._conv_weight_grad(x, g, ws[2:], stride, pad, dil, groups), tw.grad)


@pytest.mark.parametrize("stride,pad,opad,dil", [((2, 2), (1, 0), (1, 0), (1, 1)),
                                                 ((3, 2), (0, 1), (0, 1), (2, 1)),
                                                 ((1, 1), (1, 1), (0, 0), (1, 2))])
def test_conv_transpose_with_bias_matches_torch(stride, pad, opad, dil):
    """The transposed convolution as a forward: output_padding (rows no tap reaches, which
    get the bias alone) and groups."""
    y, ty = data((2, 4, 4, 3))
    w, tw = data((4, 3, 3, 2), seed=1)
    b, tb = data((6,), seed=2)
    want = F.conv_transpose2d(ty, tw, tb, stride, pad, opad, 2, dil)
    close(conv._conv_transpose_nd(y, w, b, stride, pad, dil, 2, tuple(want.shape[2:])), want)


def test_one_d_and_non_contiguous_operands(order):
    """1-D as 2-D of height 1; inputs of any strides read in place (a transposed batch, a
    channel slice, a reversed-order weight layout)."""
    x, tx = data((7, 3, 9))
    x = x.transpose(1, 0, 2)  # (3, 7, 9) with strides of a (7, 3, 9) array
    tx = tx.transpose(0, 1)
    w, tw = data((5, 7, 3), seed=1)
    w = np.asfortranarray(w)
    b, tb = data((10,), seed=2)
    b, tb = b[::2], tb[::2]
    close(conv._conv_nd(x, w, b, (2,), (1,), (2,), 1, (4,)), F.conv1d(tx, tw, tb, 2, 1, 2))
    g, tg = data((3, 5, 4), seed=3)
    tx.requires_grad_()
    tw.requires_grad_()
    F.conv1d(tx, tw, None, 2, 1, 2).backward(tg)
    close(conv._conv_transpose_nd(g, w, None, (2,), (1,), (2,), 1, (9,)), tx.grad)
    close(conv._conv_weight_grad(x, g, (3,), (2,), (1,), (2,), 1), tw.grad)
    x4, tx4 = data((2, 12, 5, 6))
    w4, tw4 = data((3, 4, 3, 3), seed=1)
    close(conv._conv_nd(x4[:, 3:7], w4, None, (1, 1), (1, 1), (1, 1), 1, (5, 6)),
          F.conv2d(tx4[:, 3:7], tw4, None, 1, 1))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_dtypes_accumulate_in_float32(dtype):
    x, tx = data((2, 6, 5, 5), dtype)
    w, tw = data((4, 6, 3, 3), dtype, seed=1)
    b, tb = data((4,), dtype, seed=2)
    want = F.conv2d(tx, tw, tb, 1, 1)  # float64 products, rounded once below
    close(conv._conv_nd(x, w, b, (1, 1), (1, 1), (1, 1), 1, (5, 5)),
          want.to(getattr(torch, dtype)).double(), dtype)
    g, tg = data(tuple(want.shape), dtype, seed=3)
    tx.requires_grad_()
    tw.requires_grad_()
    F.conv2d(tx, tw, None, 1, 1).backward(tg)
    close(conv._conv_transpose_nd(g, w, None, (1, 1), (1, 1), (1, 1), 1, (5, 5)),
          tx.grad.to(getattr(torch, dtype)).double(), dtype)
    close(conv._conv_weight_grad(x, g, (3, 3), (1, 1), (1, 1), (1, 1), 1),
          tw.grad.to(getattr(torch, dtype)).double(), dtype)


def test_weight_gradient_split_partials_sum_in_order(monkeypatch):
    """The split-K path (float32 partials, then ``sum_splits``) and the single-chunk path
    (stored straight into the result) agree with torch; the split count is as asked."""
    x, tx = data((3, 4, 6, 6))
    g, tg = data((3, 5, 6, 6), seed=3)
    tw = torch.zeros(5, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    tx.requires_grad_()
    F.conv2d(tx, tw, None, 1, 1).backward(tg)
    for split in (1, 4):
        monkeypatch.setattr(conv, "_split", lambda programs, ktot, bk, s=split: s)
        monkeypatch.setattr(conv, "_PLANS", {})  # plans cache the split they were made with
        before = conv.STATS["launches"]
        close(conv._conv_weight_grad(x, g, (3, 3), (1, 1), (1, 1), (1, 1), 1), tw.grad)
        assert conv.STATS["launches"] - before == (1 if split == 1 else 2)


# ---------------------------------------------------------------------- fallbacks
def test_fallbacks_are_declined():
    """None (the generic impl runs) for: 3-D, float64, complex, integer, mixed dtypes,
    anything empty, and stride-1 depthwise."""
    x, _ = data((2, 4, 5, 5))
    w, _ = data((3, 4, 3, 3), seed=1)
    geo = ((1, 1), (1, 1), (1, 1), 1, (5, 5))
    assert conv._conv_nd(x, w, None, *geo) is not None
    assert conv._conv_nd(x.astype(np.float64), w.astype(np.float64), None, *geo) is None
    assert conv._conv_nd(x.astype(np.complex64), w.astype(np.complex64), None, *geo) is None
    assert conv._conv_nd(x.astype(np.int32), w.astype(np.int32), None, *geo) is None
    assert conv._conv_nd(x, w.astype(np.float16), None, *geo) is None
    assert conv._conv_nd(x, w, np.zeros(3, np.float16), *geo) is None
    assert conv._conv_nd(x[:0], w, None, *geo) is None
    assert conv._conv_nd(x[:, :0], w[:, :0], None, *geo) is None
    x3, w3 = x[..., None], w[..., None]
    assert conv._conv_nd(x3, w3, None, (1,) * 3, (1, 1, 0), (1,) * 3, 1, (5, 5, 1)) is None
    assert conv._conv_weight_grad(x3, x3[:, :3], (3, 3, 1), (1,) * 3, (1, 1, 0), (1,) * 3,
                                  1) is None
    assert conv._conv_transpose_nd(x3[:, :3], w3, None, (1,) * 3, (1, 1, 0), (1,) * 3, 1,
                                   (5, 5, 1)) is None
    dw, _ = data((4, 1, 3, 3), seed=1)
    assert conv._conv_nd(x, dw, None, *geo[:3], 4, (5, 5)) is None
    assert conv._conv_transpose_nd(x, dw, None, *geo[:3], 4, (5, 5)) is None
    assert conv._conv_nd(x, dw, None, (2, 2), (1, 1), (1, 1), 4, (3, 3)) is not None
    assert conv._conv_weight_grad(x[:0], x[:0, :3], (3, 3), *geo[:4]) is None


def test_precision_follows_cudnn_allow_tf32(monkeypatch):
    """float32 products: "tf32" while ember.backends.cudnn.allow_tf32 (the default), "ieee"
    once it is False, read at each call; half dtypes are unaffected."""
    seen = []
    site = conv._site
    monkeypatch.setattr(conv, "_PLANS", {})
    monkeypatch.setattr(conv, "_site", lambda *a, **k: (
        "PRECISION" in k and seen.append(k["PRECISION"]), site(*a, **k))[1])
    x, _ = data((1, 2, 3, 3))
    w, _ = data((2, 2, 1, 1), seed=1)
    assert cudnn.allow_tf32 is True
    conv._conv_nd(x, w, None, (1, 1), (0, 0), (1, 1), 1, (3, 3))
    monkeypatch.setattr(cudnn, "allow_tf32", False)
    conv._conv_nd(x, w, None, (1, 1), (0, 0), (1, 1), 1, (3, 3))
    conv._conv_weight_grad(x, x, (1, 1), (1, 1), (0, 0), (1, 1), 1)
    conv._conv_transpose_nd(x, w, None, (1, 1), (0, 0), (1, 1), 1, (3, 3))
    assert seen == ["tf32", "ieee", "ieee", "ieee"]
    assert conv._precision(np.dtype(ember.bfloat16.np)) == "tf32"


# ---------------------------------------------------------------------- through ember's ops
@pytest.fixture
def cpu_kernels():
    """The CPU backend's overrides of the three internal ops set to the conv kernels (the
    public ops then run them too); returns how many kernels ran since."""
    with cpu_overrides(conv.OVERRIDES, conv.STATS) as launched:
        yield launched


def pair(a, grad=True):
    e, t = ember.tensor(a.astype(np.float32)), torch.tensor(a.astype(np.float32))
    return (e.requires_grad_(), t.requires_grad_()) if grad else (e, t)


def same(e, t, dtype="float32"):
    close(e.detach().numpy(), t.detach().double(), dtype)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def test_ember_conv2d_values_and_gradients(cpu_kernels):
    (x, tx), (w, tw), (b, tb) = (pair(_rand(s, i)) for i, s in
                                 enumerate([(2, 3, 6, 5), (4, 3, 3, 3), (4,)]))
    y = EF.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2))
    ty = F.conv2d(tx, tw, tb, stride=2, padding=1, dilation=(1, 2))
    same(y, ty)
    g = _rand(tuple(ty.shape), 5)
    y.backward(ember.tensor(g.astype(np.float32)))
    ty.backward(torch.tensor(g.astype(np.float32)))
    for e, t in ((x, tx), (w, tw), (b, tb)):
        same(e.grad, t.grad)
    # forward, the weight packed for the data gradient, the data gradient and the weight
    # gradient (split 1 here)
    assert cpu_kernels() == 4


def test_ember_conv1d_unbatched_padding_same_and_noncontiguous(cpu_kernels):
    (x, tx), (w, tw) = pair(_rand((5, 7), 0)), pair(_rand((3, 7, 3), 1))
    y, ty = EF.conv1d(x.t(), w, padding="same"), F.conv1d(tx.t(), tw, padding="same")
    same(y, ty)
    y.sum().backward()
    ty.sum().backward()
    same(x.grad, tx.grad)
    same(w.grad, tw.grad)
    assert cpu_kernels() >= 3


def test_ember_conv_transpose2d_values_and_gradients(cpu_kernels):
    (y, ty), (w, tw), (b, tb) = (pair(_rand(s, i)) for i, s in
                                 enumerate([(2, 4, 3, 4), (4, 3, 3, 3), (6,)]))
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    x, tx = EF.conv_transpose2d(y, w, b, **kw), F.conv_transpose2d(ty, tw, tb, **kw)
    same(x, tx)
    x.square().sum().backward()
    tx.square().sum().backward()
    for e, t in ((y, ty), (w, tw), (b, tb)):
        same(e.grad, t.grad)
    assert cpu_kernels() >= 3


def test_ember_bfloat16_and_empty_batch(cpu_kernels):
    xs, ws = _rand((2, 3, 5, 5)), _rand((4, 3, 3, 3), 1)
    x = ember.tensor(xs).to(ember.bfloat16)
    w = ember.tensor(ws).to(ember.bfloat16)
    want = F.conv2d(torch.tensor(xs).bfloat16().double(), torch.tensor(ws).bfloat16().double(),
                    padding=1)
    close(EF.conv2d(x, w, padding=1).float().numpy().astype(ember.bfloat16.np),
          want.bfloat16().double(), "bfloat16")
    before = cpu_kernels()
    e, t = pair(_rand((0, 3, 5, 5)))
    (we, wt) = pair(ws)
    ye, yt = EF.conv2d(e, we, padding=1), F.conv2d(t, wt, padding=1)
    assert tuple(ye.shape) == tuple(yt.shape) == (0, 4, 5, 5)
    ye.sum().backward()
    yt.sum().backward()
    same(we.grad, wt.grad)
    assert tuple(e.grad.shape) == (0, 3, 5, 5)
    assert cpu_kernels() == before  # all of it the generic impl's


# ---------------------------------------------------------------------- sm_90
COMPILE = r"""
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ember.backends.cuda import conv_kernels as K

def build(fn, types, warps, **consts):
    sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    triton.compile(ASTSource(fn, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": warps,
                                                              "num_stages": 3})

# the float32 (TF32) and bfloat16 variants the GPU configs launch (float16 compiles as
# bfloat16 does), IEEE float32 (no tensor cores: FMA products) for the forward
for dt, prec, bk, bm, bn, warps in (("fp32", "tf32", 32, 128, 128, 8),
                                    ("bf16", "tf32", 64, 128, 64, 4)):
    p = {n: "*" + dt for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr", "g_ptr")}
    p["p_ptr"] = "*fp32"
    blocks = dict(PRECISION=prec, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    for flat in (False, True):
        build(K.conv_fwd, p, warps, KH=3, KW=3, FLAT=flat, HAS_BIAS=flat, **blocks)
    build(K.conv_dgrad, p, warps, KH=3, KW=3, HAS_BIAS=True, **blocks)
    for flat in (False, True):
        build(K.conv_wgrad, p, warps, KH=3, KW=3, FLAT=flat, **blocks)
    build(K.sum_splits, {"p_ptr": "*fp32", "out_ptr": "*" + dt}, 4, BLOCK=1024)
    build(K.pack4, {"src_ptr": "*" + dt, "out_ptr": "*" + dt}, 4, BLOCK=1024)
build(K.conv_fwd, {n: "*fp32" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}, 4, KH=1, KW=1,
      FLAT=False, HAS_BIAS=False, PRECISION="ieee", BLOCK_M=128, BLOCK_N=64, BLOCK_K=32)
# the narrow configs: the 3-channel stem's weight gradient (32 flat columns), a forward
# over 16 flat columns, a data gradient over at most 16 channels
for dt in ("fp32", "bf16"):
    p = {n: "*" + dt for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr", "g_ptr", "p_ptr")}
    narrow = dict(KH=3, KW=3, PRECISION="tf32", BLOCK_M=64, BLOCK_N=32, BLOCK_K=16)
    build(K.conv_wgrad, p, 4, FLAT=True, **narrow)
    build(K.conv_fwd, p, 4, FLAT=True, HAS_BIAS=False, **narrow)
    build(K.conv_dgrad, p, 4, HAS_BIAS=False, **narrow)
# launches specialise integer arguments equal to 1 (unit strides, stride 1, one split)
p = {n: "*fp32" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr", "g_ptr", "p_ptr")}
ones = dict(KH=3, KW=3, PRECISION="tf32", BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, sth=1, stw=1,
            dh=1, dw=1)
build(K.conv_fwd, p, 4, FLAT=False, HAS_BIAS=False, sxw=1, swc=1, syw=1, **ones)
build(K.conv_dgrad, p, 4, HAS_BIAS=False, sxw=1, swo=1, syw=1, steph=1, stepw=1, **ones)
build(K.conv_wgrad, p, 4, FLAT=False, sxw=1, sgw=1, SPLIT=1, **ones)
print("ok")
"""


def test_kernels_compile_for_sm90():
    """Each kernel variant the wrappers launch, through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)


def test_gpu_block_configs_split_and_tuning_overrides(monkeypatch):
    """The GPU's choices (run here by pretending not to interpret): the table's entry, BLOCK_M
    then BLOCK_N halved while the grid is under one wave of 132 SMs; the split-K count; and
    ``EMBER_CONV_BLOCKS`` entries replacing the table's."""
    monkeypatch.setattr(conv.adapter, "interpreting", lambda: False)
    monkeypatch.setattr(conv, "_sms", lambda: 132)
    f32 = np.dtype(np.float32)
    # 64 x 32 x 32 batch of 64 channels, 64 outputs: 512 x 1 tiles of 128 x 64
    assert conv._config("fwd", f32, False, lambda bm, bn: 512) == (128, 64, 32, 4, 3)
    # 512 channels at 4 x 4, batch 64: M = 1024, 512 outputs
    tiles = lambda bm, bn: -(-1024 // bm) * -(-512 // bn)  # noqa: E731
    assert conv._config("fwd", f32, True, tiles) == (64, 64, 32, 4, 3)
    assert conv._config("dgrad", np.dtype(ember.bfloat16.np), True) == (128, 128, 64, 8, 3)
    assert conv._split(9, 65536, 32) == 30  # 64 -> 64 3x3 at 32x32: 9 tiles, 2 waves
    assert conv._split(144, 1024, 32) == 1  # 512 -> 512 at 4x4: a wave of tiles already
    assert conv._split(1, 256, 32) == 2  # at least SPLIT_MIN_STEPS steps per split
    monkeypatch.setenv("EMBER_CONV_BLOCKS", "fwd,1,0=64,32,16,2,4;wgrad,0,1=32,32,32,4,2")
    conv._overrides.cache_clear()
    try:
        assert conv._config("fwd", f32, False, lambda bm, bn: 1) == (64, 32, 16, 2, 4)
        assert conv._config("wgrad", np.dtype(np.float16), True) == (32, 32, 32, 4, 2)
        assert conv._config("fwd", f32, True, lambda bm, bn: 10 ** 6) == (128, 128, 32, 8, 3)
    finally:
        monkeypatch.delenv("EMBER_CONV_BLOCKS")
        conv._overrides.cache_clear()
