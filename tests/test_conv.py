"""Convolution, pooling and resampling (ember.nn.functional) against torch.nn.functional."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
from oracle import assert_same, check, rand, raises_like, to_torch

try:
    import ember.nn.functional as EF
    if not hasattr(EF, "conv2d"):
        raise ImportError
except ImportError:  # nn.functional not wired yet: the kernels themselves
    import ember.ops.conv as EF

FLOATS = [ember.float32, ember.float64]
warnings.filterwarnings("ignore", message=".*padding='same'.*")
warnings.filterwarnings("ignore", message=".*upsample.*deprecated.*")


def run(fn, *args, **kw):
    """``check`` with ``fn(F, *args)``, F being each library's functional namespace."""
    return check(lambda *a: fn(EF, *a), lambda *a: fn(TF, *a), *args, **kw)


def tol(dtype):
    """float32 sums of many products lose a few ulps to cancellation; float64 stays tight."""
    return dict(rtol=1e-4, atol=1e-4) if dtype in (ember.float32, ember.complex64) else {}


def tensor(shape, dtype, noncontig=False, grad=True, seed=0, low=-2.0, high=2.0):
    """A random input; ``noncontig`` builds it as a transposed view of the same shape."""
    if noncontig:
        s = list(shape)
        s[-1], s[-2] = s[-2], s[-1]
        t = rand(*s, dtype=dtype, seed=seed, low=low, high=high).transpose(-1, -2)
        assert not t.is_contiguous()
    else:
        t = rand(*shape, dtype=dtype, seed=seed, low=low, high=high)
    return t.requires_grad_() if grad else t


# ---------------------------------------------------------------------- convolution
# (name, input shape, weight shape, bias, kwargs, non-contiguous input)
CONV = [
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 3), True, {}, False),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 3), False, dict(stride=2, padding=1), False),
    ("conv2d", (2, 3, 9, 8), (5, 3, 3, 2), True, dict(stride=(2, 1), padding=(0, 2),
                                                      dilation=(1, 2)), True),
    ("conv2d", (2, 3, 7, 6), (4, 3, 4, 4), True, dict(padding="same"), False),
    ("conv2d", (1, 2, 8, 7), (3, 2, 2, 3), True, dict(padding="same", dilation=2), True),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), True, dict(padding="valid", stride=(2, 3)), False),
    ("conv2d", (2, 4, 6, 6), (6, 2, 3, 3), True, dict(groups=2, padding=1), False),
    ("conv2d", (2, 4, 6, 7), (4, 1, 3, 3), True, dict(groups=4, padding=1), True),
    ("conv2d", (2, 4, 6, 7), (8, 1, 3, 2), False, dict(groups=4, dilation=2, padding=(2, 1)),
     False),
    ("conv2d", (2, 4, 9, 7), (8, 1, 3, 3), True, dict(groups=4, stride=2), False),
    ("conv2d", (3, 7, 6), (4, 3, 3, 3), True, dict(padding=1), False),
    ("conv2d", (2, 5, 4, 4), (3, 5, 1, 1), True, {}, False),
    ("conv2d", (2, 3, 4, 5), (2, 3, 4, 5), True, {}, False),
    ("conv2d", (0, 3, 5, 5), (4, 3, 3, 3), True, {}, False),
    ("conv1d", (2, 3, 10), (4, 3, 3), True, dict(stride=2, padding=2, dilation=2), False),
    ("conv1d", (3, 10), (6, 1, 4), True, dict(groups=3, padding="same"), False),
    ("conv1d", (2, 4, 9), (2, 4, 5), False, dict(padding="valid"), True),
    ("conv3d", (2, 2, 5, 4, 6), (3, 2, 3, 2, 3), True, dict(stride=(1, 2, 1),
                                                          padding=(1, 0, 2)), False),
    ("conv3d", (2, 5, 4, 4), (4, 1, 2, 2, 3), True, dict(groups=2, padding="same"), False),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 3), True, {}, False),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 3), True, dict(stride=2, padding=1,
                                                               output_padding=1), True),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 2, 3, 2), False, dict(stride=(1, 2), groups=2,
                                                                dilation=(3, 1),
                                                                output_padding=(2, 1)), False),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 1, 3, 3), True, dict(groups=4, padding=1), False),
    ("conv_transpose2d", (2, 2, 5, 6), (2, 6, 3, 3), True, dict(padding=(2, 1)), False),
    ("conv_transpose2d", (4, 5, 6), (4, 3, 2, 2), True, dict(stride=2), False),
    ("conv_transpose1d", (2, 4, 7), (4, 5, 3), True, dict(stride=3, padding=1,
                                                          output_padding=2), False),
    ("conv_transpose1d", (4, 7), (4, 2, 4), True, dict(groups=2, dilation=2), False),
    ("conv_transpose3d", (2, 3, 3, 4, 2), (3, 2, 2, 3, 2), True, dict(stride=2, padding=(0, 1, 0),
                                                                    output_padding=(1, 0, 1)),
     False),
]


def _conv_call(name, kwargs):
    def fn(F, x, w, b=None):
        return getattr(F, name)(x, w, b, **kwargs)
    return fn


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,xs,ws,bias,kwargs,nc", CONV)
def test_conv(name, xs, ws, bias, kwargs, nc, dtype):
    x = tensor(xs, dtype, nc, seed=1)
    w = tensor(ws, dtype, seed=2)
    b = tensor((ws[1] * kwargs.get("groups", 1) if "transpose" in name else ws[0],), dtype,
               seed=3) if bias else None
    args = (x, w, b) if bias else (x, w)
    run(_conv_call(name, kwargs), *args, **tol(dtype))


@pytest.mark.parametrize("name,xs,ws,kwargs", [
    ("conv2d", (2, 4, 6, 5), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ("conv2d", (2, 3, 6, 5), (3, 1, 3, 2), dict(groups=3, padding="same")),
    ("conv_transpose2d", (2, 4, 4, 5), (4, 3, 3, 3), dict(stride=2, output_padding=1)),
    ("conv1d", (2, 3, 9), (2, 3, 4), dict(dilation=2)),
])
def test_conv_double_backward(name, xs, ws, kwargs):
    def fn(F, x, w, b):
        lib = torch if F is TF else ember
        y = getattr(F, name)(x, w, b, **kwargs)
        return lib.autograd.grad([(y * y).sum()], [x, w, b], create_graph=True)
    x, w = tensor(xs, ember.float64, seed=1), tensor(ws, ember.float64, seed=2)
    nb = ws[1] * kwargs.get("groups", 1) if "transpose" in name else ws[0]
    run(fn, x, w, tensor((nb,), ember.float64, seed=3))


@pytest.mark.parametrize("dtype,tol", [(ember.float16, 1e-2), (ember.bfloat16, 6e-2)])
def test_conv2d_half(dtype, tol):
    x = tensor((2, 3, 6, 6), dtype, seed=1, low=-1, high=1)
    w = tensor((4, 3, 3, 3), dtype, seed=2, low=-1, high=1)
    b = tensor((4,), dtype, seed=3, low=-1, high=1)
    run(lambda F, x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, grad=False, rtol=tol,
        atol=tol)
    run(lambda F, x, w: F.conv_transpose2d(x, w, stride=2), x, w.transpose(0, 1), grad=False,
        rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("name,ws,kwargs", [
    ("conv2d", (4, 3, 3, 2), dict(stride=2, padding=1)),
    ("conv2d", (6, 1, 3, 3), dict(groups=3, padding=1)),
    ("conv_transpose2d", (3, 2, 3, 3), dict(stride=2, output_padding=1)),
])
def test_conv_complex(name, ws, kwargs, dtype):
    x, w = tensor((2, 3, 6, 5), dtype, seed=1), tensor(ws, dtype, seed=2)
    run(_conv_call(name, kwargs), x, w, **tol(dtype))

    def dbl(F, x, w, v):  # the first-order gradients, differentiated again by run()
        lib = torch if F is TF else ember
        y = getattr(F, name)(x, w, **kwargs)
        return lib.autograd.grad([y], [x, w], [v], create_graph=True)
    v = getattr(EF, name)(x.detach(), w.detach(), **kwargs)
    run(dbl, x, w, rand(*v.shape, dtype=dtype, seed=3), **tol(dtype))


def test_conv_integer():
    x = rand(1, 2, 5, 5, dtype=ember.int64, seed=1)
    w = rand(3, 2, 3, 3, dtype=ember.int64, seed=2)
    run(lambda F, x, w: F.conv2d(x, w, padding=1, stride=2), x, w)


@pytest.mark.parametrize("name,args,kwargs", [
    ("conv2d", [(2, 3, 7, 6), (4, 3, 3, 3), (4,)], dict(stride=2, padding=1)),
    ("conv2d", [(3, 7, 6), (4, 3, 2, 2)], dict(padding="same")),
    ("conv_transpose1d", [(2, 4, 7), (4, 5, 3)], dict(stride=3, output_padding=2, padding=1)),
    ("max_pool2d_with_indices", [(2, 3, 7, 6)], dict(kernel_size=3, stride=2, ceil_mode=True)),
    ("avg_pool1d", [(3, 11)], dict(kernel_size=4, padding=2)),
    ("adaptive_avg_pool2d", [(2, 3, 7, 6)], dict(output_size=(None, 4))),
    ("adaptive_max_pool2d_with_indices", [(3, 7, 6)], dict(output_size=(5, 2))),
])
def test_meta_matches_eager(name, args, kwargs):
    d = ember.ops.OPS[name]
    tensors = [rand(*s, dtype=ember.float32) for s in args]
    metas = [ember.autograd.engine.TensorMeta(t) for t in tensors]
    real = d(*tensors, **kwargs)
    expect = tuple((tuple(r.shape), r.dtype) for r in real) if isinstance(real, tuple) else \
        (tuple(real.shape), real.dtype)
    assert d.run_meta(*metas, **kwargs) == expect


def test_conv_grad_fn_name():
    x, w = tensor((1, 2, 5, 5), ember.float32), tensor((3, 2, 3, 3), ember.float32)
    assert EF.conv2d(x, w).grad_fn.name() == "ConvolutionBackward0"


# ---------------------------------------------------------------------- pooling
# (function, input shape, kwargs, non-contiguous input)
POOL = [
    ("max_pool2d", (2, 3, 7, 6), dict(kernel_size=2), False),
    ("max_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1), True),
    ("max_pool2d", (2, 3, 9, 8), dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1),
                                      ceil_mode=True), False),
    ("max_pool2d", (3, 7, 6), dict(kernel_size=3, stride=2, ceil_mode=True,
                                   return_indices=True), False),
    ("max_pool2d", (2, 2, 8, 8), dict(kernel_size=3, stride=1, padding=1, return_indices=True),
     True),
    ("max_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, padding=1, dilation=2,
                                    return_indices=True), False),
    ("max_pool1d", (3, 11), dict(kernel_size=4, ceil_mode=True), False),
    ("max_pool3d", (2, 2, 5, 6, 4), dict(kernel_size=2, stride=(1, 2, 2), padding=(1, 0, 1),
                                         return_indices=True), False),
    ("max_pool2d_with_indices", (2, 3, 6, 6), dict(kernel_size=2), False),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=2), False),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1), True),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False), False),
    ("avg_pool2d", (3, 8, 7), dict(kernel_size=(3, 2), stride=2, ceil_mode=True,
                                   divisor_override=5), False),
    ("avg_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), False),
    ("avg_pool1d", (3, 11), dict(kernel_size=4, count_include_pad=False, padding=2), False),
    ("avg_pool3d", (2, 2, 5, 6, 4), dict(kernel_size=2, stride=1, padding=1,
                                         count_include_pad=False), False),
    ("avg_pool3d", (2, 5, 6, 4), dict(kernel_size=(3, 2, 2), ceil_mode=True, stride=2), False),
    ("adaptive_avg_pool2d", (2, 3, 7, 6), dict(output_size=3), False),
    ("adaptive_avg_pool2d", (2, 3, 7, 6), dict(output_size=(9, 4)), True),
    ("adaptive_avg_pool2d", (3, 7, 6), dict(output_size=(None, 1)), False),
    ("adaptive_avg_pool1d", (2, 3, 11), dict(output_size=4), False),
    ("adaptive_avg_pool3d", (2, 5, 6, 4), dict(output_size=(2, 4, 3)), False),
    ("adaptive_max_pool2d", (2, 3, 7, 6), dict(output_size=3, return_indices=True), False),
    ("adaptive_max_pool2d", (2, 3, 7, 6), dict(output_size=(10, 4)), True),
    ("adaptive_max_pool2d", (3, 7, 6), dict(output_size=(None, 2), return_indices=True), False),
    ("adaptive_max_pool1d", (2, 3, 11), dict(output_size=4, return_indices=True), False),
    ("adaptive_max_pool3d", (2, 2, 5, 6, 4), dict(output_size=(2, 4, 3)), False),
    ("lp_pool2d", (2, 3, 7, 6), dict(norm_type=2, kernel_size=2), False),
    ("lp_pool1d", (2, 3, 11), dict(norm_type=3, kernel_size=3, stride=2), False),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,xs,kwargs,nc", POOL)
def test_pool(name, xs, kwargs, nc, dtype):
    low = 0.1 if name.startswith("lp") else -2.0
    x = tensor(xs, dtype, nc, seed=4, low=low)
    run(lambda F, x: getattr(F, name)(x, **kwargs), x, **tol(dtype))


@pytest.mark.parametrize("name,kwargs", [
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1, return_indices=True)),
    ("max_pool2d", dict(kernel_size=2, return_indices=True)),
    ("adaptive_max_pool2d", dict(output_size=(3, 4), return_indices=True)),
])
def test_max_pool_ties_and_nan(name, kwargs):
    # few distinct values: many ties, which PyTorch breaks toward the first index
    x = rand(2, 3, 8, 9, dtype=ember.int64, seed=5, low=-0.2, high=0.2).to(ember.float32)
    run(lambda F, x: getattr(F, name)(x, **kwargs), x.requires_grad_())
    a = np.random.default_rng(6).standard_normal((2, 3, 8, 9)).astype(np.float32)
    a[0, 0, 1, 2] = a[1, 2, 5, 5] = a[1, 2, 5, 6] = np.nan
    a[0, 1, :3, :3] = -np.inf
    run(lambda F, x: getattr(F, name)(x, **kwargs), ember.tensor(a), grad=False)


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.uint8])
def test_pool_integer(dtype):
    x = rand(2, 3, 6, 7, dtype=dtype, seed=7)
    run(lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    if dtype is ember.int64:  # PyTorch averages no other integer type
        run(lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True), x)
        run(lambda F, x: F.avg_pool2d(x * -7, 3, padding=1), x)


@pytest.mark.parametrize("dtype,tol", [(ember.float16, 1e-3), (ember.bfloat16, 1e-2)])
def test_pool_half(dtype, tol):
    x = tensor((2, 3, 6, 7), dtype, seed=8)
    run(lambda F, x: F.max_pool2d(x, 2, return_indices=True), x, grad=False)
    run(lambda F, x: F.avg_pool2d(x, 3, 2, 1), x, grad=False, rtol=tol, atol=tol)
    run(lambda F, x: F.adaptive_avg_pool2d(x, (4, 3)), x, grad=False, rtol=tol, atol=tol)


def test_pool_empty_batch():
    x = tensor((0, 3, 6, 6), ember.float32)
    for fn in (lambda F, x: F.max_pool2d(x, 2), lambda F, x: F.avg_pool2d(x, 2),
               lambda F, x: F.adaptive_avg_pool2d(x, 3), lambda F, x: F.conv2d(
                   x, torch.ones(2, 3, 3, 3) if F is TF else ember.ones(2, 3, 3, 3))):
        run(fn, x)


@pytest.mark.parametrize("nd,xs,kwargs", [
    (2, (2, 3, 6, 8), dict(kernel_size=2)),
    (2, (3, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 6, 7), dict(kernel_size=2, output_size=(7, 7))),
    (1, (2, 3, 9), dict(kernel_size=3, stride=2)),
    (3, (1, 2, 4, 4, 6), dict(kernel_size=2)),
])
def test_max_unpool(nd, xs, kwargs):
    kw = {k: v for k, v in kwargs.items() if k != "output_size"}

    def fn(F, x):
        out, idx = getattr(F, f"max_pool{nd}d")(x, return_indices=True, **kw)
        return getattr(F, f"max_unpool{nd}d")(out * 2, idx, **kwargs)
    run(fn, tensor(xs, ember.float64, seed=9))


@pytest.mark.parametrize("name,kwargs", [
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("adaptive_max_pool2d", dict(output_size=(3, 4))),
    ("adaptive_avg_pool2d", dict(output_size=(3, 4))),
])
def test_pool_double_backward(name, kwargs):
    def fn(F, x):
        lib = torch if F is TF else ember
        y = getattr(F, name)(x, **kwargs)
        return lib.autograd.grad([(y * y).sum()], [x], create_graph=True)
    run(fn, tensor((2, 3, 7, 8), ember.float64, seed=10))


# ---------------------------------------------------------------------- resampling
INTERP = [
    ((2, 3, 5, 6), dict(size=(9, 4))),
    ((2, 3, 5, 6), dict(scale_factor=2)),
    ((2, 3, 5, 6), dict(scale_factor=1.7)),
    ((2, 3, 5, 6), dict(scale_factor=(0.6, 2.3), recompute_scale_factor=True)),
    ((2, 3, 4, 6), dict(scale_factor=1.2)),
    ((2, 3, 5, 6), dict(size=(1, 6))),
]
MODES = [("nearest", None), ("nearest-exact", None), ("area", None), ("bilinear", False),
         ("bilinear", True), ("bicubic", False), ("bicubic", True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode,align", MODES)
@pytest.mark.parametrize("xs,kwargs", INTERP)
def test_interpolate(xs, kwargs, mode, align, dtype):
    x = tensor(xs, dtype, noncontig=kwargs.get("scale_factor") == 2, seed=11)
    run(lambda F, x: F.interpolate(x, mode=mode, align_corners=align, **kwargs), x, **tol(dtype))


@pytest.mark.parametrize("xs,kwargs", [
    ((2, 3, 7), dict(size=12, mode="linear")),
    ((2, 3, 7), dict(scale_factor=0.5, mode="linear", align_corners=True)),
    ((2, 3, 7), dict(size=3, mode="nearest")),
    ((2, 3, 7), dict(scale_factor=2.5, mode="area")),
    ((1, 2, 3, 4, 5), dict(size=(4, 3, 7), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(scale_factor=(2, 1, 0.5), mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=1.5, mode="nearest")),
    ((1, 2, 6, 4, 5), dict(size=(3, 2, 4), mode="area")),
])
def test_interpolate_dims(xs, kwargs):
    run(lambda F, x: F.interpolate(x, **kwargs), tensor(xs, ember.float64, seed=12))


def test_interpolate_half_and_uint8():
    x = tensor((1, 2, 4, 5), ember.float16, seed=13, grad=False)
    run(lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"), x, rtol=1e-3, atol=1e-3)
    u = rand(1, 2, 4, 5, dtype=ember.uint8, seed=14)
    run(lambda F, x: F.interpolate(x, size=(7, 3)), u)


@pytest.mark.parametrize("name", ["upsample", "upsample_nearest", "upsample_bilinear"])
def test_upsample_aliases(name):
    kw = dict(mode="bilinear") if name == "upsample" else {}
    run(lambda F, x: getattr(F, name)(x, scale_factor=2, **kw), tensor((1, 2, 3, 4),
                                                                      ember.float64))


def test_interpolate_double_backward():
    def fn(F, x):
        lib = torch if F is TF else ember
        y = F.interpolate(x, size=(7, 5), mode="bicubic")
        return lib.autograd.grad([(y * y).sum()], [x], create_graph=True)
    run(fn, tensor((1, 2, 4, 3), ember.float64))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xs,kwargs", [
    ((2, 3, 6, 7), dict(kernel_size=2)),
    ((2, 3, 6, 7), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))),
    ((3, 5, 5), dict(kernel_size=3, padding=1, stride=2)),
])
def test_unfold_fold(xs, kwargs, dtype):
    x = tensor(xs, dtype, seed=15)
    run(lambda F, x: F.unfold(x, **kwargs), x)
    cols = EF.unfold(x.detach(), **kwargs)
    run(lambda F, c: F.fold(c, xs[-2:], **kwargs), cols.requires_grad_(), **tol(dtype))


@pytest.mark.parametrize("xs,fn", [
    ((2, 12, 3, 4), lambda F, x: F.pixel_shuffle(x, 2)),
    ((2, 2, 18, 2, 3), lambda F, x: F.pixel_shuffle(x, 3)),
    ((2, 3, 4, 6), lambda F, x: F.pixel_unshuffle(x, 2)),
    ((3, 4, 6), lambda F, x: F.pixel_unshuffle(x, 1)),
    ((2, 6, 4, 5), lambda F, x: F.channel_shuffle(x, 3)),
    ((2, 6, 4), lambda F, x: F.channel_shuffle(x, 2)),
])
def test_shuffles(xs, fn):
    run(fn, tensor(xs, ember.float32, noncontig=True, seed=16))


# ---------------------------------------------------------------------- errors
def _z(lib, *shape, dtype=None):
    return lib.zeros(*shape, dtype=dtype or lib.float32)


ERRORS = [  # (fn(F, lib), substring ember's message must contain)
    (lambda F, m: F.conv2d(_z(m, 2, 3), _z(m, 8, 3, 3, 3)),
     "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3]"),
    (lambda F, m: F.conv2d(_z(m, 1, 4, 5, 5), _z(m, 8, 3, 3, 3)),
     "Given groups=1, weight of size [8, 3, 3, 3], expected input[1, 4, 5, 5] to have 3 "
     "channels, but got 4 channels instead"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 2, 2), _z(m, 8, 3, 3, 3)),
     "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
     "can't be greater than actual input size"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), stride=0),
     "non-positive stride is not supported"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), padding=-1),
     "negative padding is not supported"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), groups=0),
     "non-positive groups is not supported"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), padding="same", stride=2),
     "padding='same' is not supported for strided convolutions"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), padding="foo"),
     "Invalid padding string: 'foo'"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), _z(m, 7)),
     "expected bias to be 1-dimensional with 8 elements, but got bias of size [7] instead"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3, dtype=m.float64)),
     "expected scalar type Float but found Double"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), _z(m, 8, dtype=m.float64)),
     "Input type (float) and bias type (double) should be the same"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), stride=(1, 1, 1)),
     "expected stride to be a single integer value or a list of 2 values"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), groups=3),
     "expected weight to be divisible by 3 at dimension 0"),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5), _z(m, 8, 3, 3, 3), padding=1.5), None),
    (lambda F, m: F.conv2d(_z(m, 1, 3, 5, 5, dtype=m.bool), _z(m, 8, 3, 3, 3, dtype=m.bool)),
     "not implemented for 'Bool'"),
    (lambda F, m: F.conv1d(_z(m, 1, 3, 5), _z(m, 8, 3, 3, 3)),
     "Expected 4-dimensional input for 4-dimensional weight [8, 3, 3, 3]"),
    (lambda F, m: F.conv_transpose2d(_z(m, 1, 4, 5, 5), _z(m, 4, 3, 3, 3), output_padding=1),
     "output padding must be smaller than either stride or dilation, but got "
     "output_padding_height: 1 output_padding_width: 1 stride_height: 1"),
    (lambda F, m: F.conv_transpose2d(_z(m, 1, 4, 5, 5), _z(m, 4, 3, 3, 3), padding=5),
     "Given input size per channel: (5 x 5). Calculated output size per channel: (-3 x -3). "
     "Output size is too small"),
    (lambda F, m: F.conv_transpose2d(_z(m, 1, 3, 5, 5), _z(m, 4, 3, 3, 3)),
     "Given transposed=1, weight of size [4, 3, 3, 3], expected input[1, 3, 5, 5] to have 4 "
     "channels, but got 3 channels instead"),
    (lambda F, m: F.conv_transpose2d(_z(m, 1, 4, 5, 5), _z(m, 4, 3, 3, 3), padding="same"),
     "argument 'padding' must be tuple of ints, not str"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5), 2, padding=2),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and "
     "dilation=1"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5), 6),
     "Given input size: (4x5x5). Calculated output size: (4x0x0). Output size is too small"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5), (2, 2, 2)),
     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5), 2, stride=0), "stride should not be zero"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5), 2, dilation=0),
     "dilation should be greater than zero"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 5, 5, dtype=m.bool), 2), "not implemented for"),
    (lambda F, m: F.max_pool1d(_z(m, 1, 4, 5, 5), 2),
     "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
     "input, but got:[1, 4, 5, 5]"),
    (lambda F, m: F.max_pool2d(_z(m, 1, 4, 0, 5), 2), "Expected 3D or 4D (batch mode) tensor"),
    (lambda F, m: F.avg_pool2d(_z(m, 1, 4, 5, 5), 2, divisor_override=0),
     "divisor must be not zero"),
    (lambda F, m: F.avg_pool2d(_z(m, 1, 4, 5, 5), 2, padding=2), "pad should be at most half"),
    (lambda F, m: F.adaptive_avg_pool2d(_z(m, 1, 4, 5, 5), (2, 3, 4)),
     "adaptive_avg_pool2d: output_size must be 2"),
    (lambda F, m: F.adaptive_avg_pool2d(_z(m, 4, 5), 3),
     "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [4, 5]"),
    (lambda F, m: F.adaptive_avg_pool2d(_z(m, 1, 4, 0, 5), 3),
     "Expected input to have non-zero size for non-batch dimensions"),
    (lambda F, m: F.adaptive_max_pool2d(_z(m, 1, 4, 5, 5, dtype=m.int64), 3),
     "\"adaptive_max_pool2d\" not implemented for 'Long'"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5)), "either size or scale_factor should be"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=3, scale_factor=2),
     "only one of size or scale_factor should be defined"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=(3, 4, 5)),
     "Input and output must have the same number of spatial dimensions"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=3, mode="linear"),
     "Got 4D input, but linear mode needs 3D input"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=3, mode="foo"),
     "Input Error: Only 3D, 4D and 5D input Tensors supported (got 4D)"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=3, align_corners=True),
     "align_corners option can only be set with the interpolating modes"),
    (lambda F, m: F.interpolate(_z(m, 4, 5), size=3), "Input Error"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), scale_factor=0.1),
     "Input and output sizes should be greater than 0, but got input (H: 5, W: 5) output "
     "(H: 0, W: 0)"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=3, recompute_scale_factor=True),
     "recompute_scale_factor is not meaningful with an explicit size."),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5), size=[3.0, 4]), "expected size to be one"),
    (lambda F, m: F.interpolate(_z(m, 1, 4, 5, 5, dtype=m.int64), size=3, mode="bilinear"),
     "not implemented for 'Long'"),
    (lambda F, m: F.unfold(_z(m, 1, 2, 5, 5), 7),
     "calculated shape of the array of sliding blocks as (-1, -1), but its components must be "
     "at least one."),
    (lambda F, m: F.unfold(_z(m, 1, 2, 5, 5, 5), 2), "Expected 3D or 4D (batch mode) tensor"),
    (lambda F, m: F.unfold(_z(m, 1, 2, 5, 5), 2, stride=0),
     "stride should be greater than zero, but got stride_height: 0 stride_width: 0"),
    (lambda F, m: F.fold(_z(m, 2, 12, 15), (5, 5), 2),
     "expected size of input's dimension 2 to match the calculated number of sliding blocks "
     "4 * 4 = 16, but got input.size(2)=15."),
    (lambda F, m: F.fold(_z(m, 2, 13, 16), (5, 5), 2),
     "Expected size of input's dimension 1 to be divisible by the product of kernel_size"),
    (lambda F, m: F.pixel_shuffle(_z(m, 8, 3), 2),
     "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 "
     "dimension(s)"),
    (lambda F, m: F.pixel_shuffle(_z(m, 1, 6, 3, 3), 2),
     "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
     "upscale_factor, but input.size(-3)=6 is not divisible by 4"),
    (lambda F, m: F.pixel_unshuffle(_z(m, 1, 8, 3, 4), 2),
     "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=3 "
     "is not divisible by 2"),
    (lambda F, m: F.pixel_shuffle(_z(m, 1, 8, 3, 3), 0),
     "pixel_shuffle expects a positive upscale_factor, but got 0"),
    (lambda F, m: F.channel_shuffle(_z(m, 1, 8, 3, 3), 3),
     "Number of channels must be divisible by groups. Got 8 channels and 3 groups."),
    (lambda F, m: F.channel_shuffle(_z(m, 8, 3), 2),
     "channel_shuffle expects input with > 2 dims, but got input with sizes [8, 3]"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors(k):
    fn, match = ERRORS[k]
    raises_like(lambda: fn(EF, ember), lambda: fn(TF, torch), match)


def test_unpool_errors():
    x = tensor((1, 2, 4, 4), ember.float32, grad=False)
    cases = [  # (kwargs for max_unpool2d, index transform)
        (dict(output_size=(6, 6)), lambda i: i),
        (dict(output_size=(5,)), lambda i: i),
        ({}, lambda i: i * 10),
    ]
    for kw, tr in cases:
        def call(F, m, kw=kw, tr=tr):
            xx = x if m is ember else to_torch(x)
            out, idx = F.max_pool2d(xx, 2, return_indices=True)
            return F.max_unpool2d(out, tr(idx), 2, **kw)
        raises_like(lambda: call(EF, ember), lambda: call(TF, torch))


def test_return_values_match_torch_types():
    x = tensor((1, 2, 4, 4), ember.float32)
    out = EF.max_pool2d(x, 2, return_indices=True)
    ref = TF.max_pool2d(to_torch(x), 2, return_indices=True)
    assert isinstance(out, tuple) and len(out) == 2
    assert_same(out, ref)
    assert out[1].dtype is ember.int64 and not out[1].requires_grad
