"""Convolutions on the CUDA backend as ember's own implicit-GEMM Triton kernels
(``conv_kernels.py``), registered as "kernel" overrides (ops/registry.py) of the three
internal ops of ops/conv.py: ``_conv_nd`` (forward), ``_conv_transpose_nd`` (the transposed
convolution, which is also the forward's data gradient) and ``_conv_weight_grad``. The public
ops (``conv2d``, ``conv_transpose1d``, ...) run these after their own argument checks.

Each wrapper takes the op's arrays (CuPy's on the GPU, numpy's under Triton's interpreter)
and returns the result, or None so the generic impl (im2col and a matmul) runs. Covered:
1-D (as 2-D with height 1) and 2-D convolutions of float32, float16 or bfloat16 (input,
weight and bias of one dtype), any stride, padding, dilation and groups, inputs of any
strides (read in place). The fallback set, explicitly:

- 3-D convolutions (and any other number of spatial dims);
- other dtypes: float64 (no float64 tensor-core path worth having), complex, integers;
  mixed dtypes (the impl raises or promotes as it does everywhere);
- anything empty (a zero batch, channel count or spatial size: zeros or an empty result,
  which the impl makes without a kernel);
- one sample (or the weight) spanning 2**31 elements or more (32-bit offsets in-sample);
- depthwise convolutions at stride 1 (one input and one output channel per group): the
  impl's own shifted multiply-adds, forward and data gradient (no GEMM to tile).

Float32 products use TF32 when ``ember.backends.cudnn.allow_tf32`` (default True, as
PyTorch's) is set at the call, IEEE float32 otherwise. Accumulation is float32; each result
element is rounded once (the weight gradient's split-K partials are float32 and are added in
a fixed order: deterministic).

The weight is the small operand: it is copied once per call into the layout whose reduction
dim is contiguous (channel-last for the forward, output-channel-last for the data gradient),
which tensor cores read best; it is used as it is when it is laid out that way already.

Block sizes (no autotuning at run time; ``CONFIGS`` is the table, ``EMBER_CONV_BLOCKS``
overrides entries for tuning, see ``_overrides``) were chosen for H100/H200 by problem size,
not measured yet: BLOCK_M 128 (64 when the grid would not fill the GPU once), BLOCK_N 64 or
128 by the channel count, BLOCK_K 32 for float32 and 64 for half (16 or 32 for the flat
forward's short K, 16 for a data gradient over at most 16 channels), 4 warps for 64-wide
tiles and 8 for 128-wide, 3 stages. The weight gradient's columns are 32 wide when there
are at most 32 (the flat stem), and its reduction is split only while its tiles fill less
than one wave (``SPLIT_WAVES``, ``SPLIT_MIN_STEPS``).
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from ... import _dtype as D
from .. import cudnn
from . import triton_adapter as adapter
from .runtime import cupy

_F32 = np.dtype(np.float32)
_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, D.bfloat16.np))
_I32 = 2 ** 31
STATS = {"launches": 0}

# (kernel, float32?, wide?) -> (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); "wide": more than
# 64 channels per group along the GEMM's columns (output channels for fwd, input channels
# for dgrad) or, for wgrad, along its rows (output channels; its BLOCK_N, over input
# channels, drops to 64 where there are at most 64 of those)
CONFIGS = {
    ("fwd", True, False): (128, 64, 32, 4, 3), ("fwd", True, True): (128, 128, 32, 8, 3),
    ("fwd", False, False): (128, 64, 64, 4, 3), ("fwd", False, True): (128, 128, 64, 8, 3),
    ("dgrad", True, False): (128, 64, 32, 4, 3), ("dgrad", True, True): (128, 128, 32, 8, 3),
    ("dgrad", False, False): (128, 64, 64, 4, 3), ("dgrad", False, True): (128, 128, 64, 8, 3),
    ("wgrad", True, False): (64, 64, 32, 4, 3), ("wgrad", True, True): (128, 128, 32, 8, 3),
    ("wgrad", False, False): (64, 64, 64, 4, 3), ("wgrad", False, True): (128, 128, 64, 8, 3),
}
# under the interpreter: 16-wide blocks, so small tests cross every block edge
INTERPRETED = (16, 16, 16, None, None)
# the weight gradient splits its reduction when its tiles fill less than one wave of
# programs, into about this many waves
SPLIT_WAVES = 2
SPLIT_MIN_STEPS = 4  # ... keeping at least this many BLOCK_K steps per split
# input channels per group below which the forward's K (and the weight gradient's N) runs
# flat over (c, kh, kw) rather than tap by tap over channel blocks
FLAT_BELOW = 16


def kernels():
    """The Triton kernel module (conv_kernels.py), imported at its first use."""
    return adapter.kernel_module("conv_kernels")


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy()


def _strides(a) -> list:
    return [s // a.itemsize for s in a.strides]


@functools.cache
def _sm_count(device: int) -> int:
    return cupy().cuda.Device(device).attributes["MultiProcessorCount"]


def _sms() -> int:
    return 8 if adapter.interpreting() else _sm_count(cupy().cuda.runtime.getDevice())


@functools.cache
def _overrides() -> dict:
    """Entries of ``CONFIGS`` from ``EMBER_CONV_BLOCKS``, e.g. ``fwd,1,0=128,64,32,4,3;
    wgrad,0,1=128,128,64,8,4``: kernel, float32 (1/0), wide (1/0) = BLOCK_M, BLOCK_N,
    BLOCK_K, warps, stages."""
    out = {}
    for item in filter(None, os.environ.get("EMBER_CONV_BLOCKS", "").split(";")):
        key, value = item.split("=")
        kind, f32, wide = key.split(",")
        out[(kind, f32 == "1", wide == "1")] = tuple(int(v) for v in value.split(","))
    return out


def _config(kind: str, dtype, wide: bool, tiles=None) -> tuple:
    """(BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); ``tiles(bm, bn)``: the grid's program
    count, which halves BLOCK_M (then BLOCK_N) while it would not fill the GPU once."""
    if adapter.interpreting():
        return INTERPRETED
    key = (kind, dtype == _F32, wide)
    bm, bn, bk, warps, stages = _overrides().get(key, CONFIGS[key])
    if tiles is not None and key not in _overrides():
        sms = _sms()
        if tiles(bm, bn) < sms and bm > 64:
            bm = 64
        if tiles(bm, bn) < sms and bn > 64:
            bn, warps = 64, 4
    return bm, bn, bk, warps, stages


def _precision(dtype) -> str:
    if dtype != _F32:
        return "tf32"  # unused: half operands multiply exactly either way
    return "tf32" if cudnn.allow_tf32 else "ieee"


def _site(kernel, grid, numbers, warps, stages, **constexprs) -> adapter.Site:
    return adapter.Site(kernel, grid, numbers, num_warps=warps, num_stages=stages,
                        **constexprs)


def _run(site: adapter.Site, operands) -> None:
    STATS["launches"] += 1
    site(operands)


def _covered(arrays, nd) -> bool:
    """Whether the kernels take these operands (see the module doc for the rest)."""
    if nd not in (1, 2):
        return False
    dt = arrays[0].dtype
    for a in arrays:
        if a is None:
            continue
        if a.dtype != dt or a.size == 0:
            return False
        per_sample = a.size // a.shape[0] if a.ndim == nd + 2 else a.size
        if per_sample >= _I32 or any(abs(s) >= _I32 for s in _strides(a)):
            return False
    return dt in _DTYPES


def _depthwise(w, groups, stride) -> bool:
    """A depthwise convolution at stride 1, which the generic impl runs as shifted
    multiply-adds (one input and one output channel per group: no GEMM to speak of)."""
    return w.shape[1] == 1 and w.shape[0] == groups and all(s == 1 for s in stride)


def _as2d(a, nd):
    """A (N, C, L) array as (N, C, 1, L), a view; 2-D arrays as they are."""
    return a if nd == 2 else a[:, :, None, :]


def _pair(t, nd, one):
    return tuple(t) if nd == 2 else (one,) + tuple(t)


def _contiguous_strides(shape) -> list:
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= s
    return out[::-1]


def _packing(w, dim):
    """How ``w`` (O, CG, KH, KW) reaches the kernels with axis ``dim`` contiguous: ``(None,
    None, strides of w)`` where it is laid out so, else ``(pack Site, packed shape, strides
    of the packed copy in (O, CG, KH, KW) order)`` (``pack4``: one launch of ember's, cheaper
    on the host than a CuPy copy)."""
    if w.strides[dim] == w.itemsize or w.shape[dim] == 1:
        return None, None, _strides(w)
    order = [a for a in range(4) if a != dim] + [dim]
    src = w.transpose(order)
    packed = _contiguous_strides(src.shape)
    site = _site(kernels().pack4, (-(-w.size // 1024),),
                 [*src.shape[1:], *_strides(src), w.size], 4, None, BLOCK=1024)
    return site, src.shape, [packed[order.index(a)] for a in range(4)]


def _weight(xp, w, site, shape):
    """The weight as the plan's kernels read it (``_packing``)."""
    if site is None:
        return w
    packed = xp.empty(shape, w.dtype)
    _run(site, [w, packed])
    return packed


def _geometry(input, weight, bias, stride, padding, dilation, groups, out_size):
    """A 1-D / 2-D convolution's operands and geometry as 2-D: ``(input, weight, stride,
    padding, dilation, out_size)`` (pairs), or None where these kernels do not take it."""
    nd = len(out_size)
    if not _covered([input, weight, bias], nd) or 0 in out_size or \
            _depthwise(weight, groups, stride):
        return None
    return (_as2d(input, nd), _as2d(weight, nd), _pair(stride, nd, 1), _pair(padding, nd, 0),
            _pair(dilation, nd, 1), _pair(out_size, nd, 1))


# Plans: what a call launches, by everything but the arrays' addresses (shapes, strides,
# dtypes, geometry, cudnn.allow_tf32), so a repeated call allocates its result and makes
# its launches (adapter.Site) without recomputing any of it. None: not ours.
_PLANS: dict = {}
_MISSING = object()


def _layout(a):
    return None if a is None else (type(a), a.shape, a.strides, a.dtype)


def _planned(make, *args):
    """The plan ``make(*args)`` builds, cached by the arrays' layouts and the other args."""
    try:
        key = (make, cudnn.allow_tf32, *(_layout(a) if hasattr(a, "strides") else
                                           tuple(a) if type(a) is list else a for a in args))
        plan = _PLANS.get(key, _MISSING)
    except TypeError:  # unhashable geometry: the impl's to check
        return None
    if plan is _MISSING:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        plan = _PLANS[key] = make(*args)
    return plan


def _product(make, input, weight, bias, *geometry):
    """A forward or data-gradient call: its plan (``make``'s), the weight as the plan's
    kernel reads it, the result; None where the plan is None."""
    plan = _planned(make, input, weight, bias, *geometry)
    if plan is None:
        return None
    pack, packed_shape, site, shape = plan
    xp = _xp(input)
    w = _weight(xp, weight, pack, packed_shape)
    out = xp.empty(shape, input.dtype)
    _run(site, [input, w, input if bias is None else bias, out])
    return out


# ---------------------------------------------------------------------- forward
def _conv_nd(input, weight, bias, stride, padding, dilation, groups, out_size):
    """``_conv_nd``: (N, C, *S) x (O, C/groups, *K) -> (N, O, *out_size)."""
    return _product(_forward_plan, input, weight, bias, stride, padding, dilation, groups,
                    out_size)


def _forward_plan(input, weight, bias, stride, padding, dilation, groups, out_size):
    g = _geometry(input, weight, bias, stride, padding, dilation, groups, out_size)
    if g is None:
        return None
    x, w, (sth, stw), (ph, pw), (dh, dw), (oh, ow) = g
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    m = n * oh * ow
    flat = cg < FLAT_BELOW and kh * kw > 1
    pack, packed_shape, w_strides = (None, None, _strides(w)) if flat else _packing(w, 1)
    bm, bn, bk, warps, stages = _config(
        "fwd", x.dtype, og > 64, lambda bm, bn: -(-m // bm) * -(-og // bn) * groups)
    if flat and not adapter.interpreting():
        bk = 16 if cg * kh * kw <= 16 else 32
    site = _site(kernels().conv_fwd, (-(-m // bm), -(-og // bn), groups),
                 [h, wd, oh, ow, m, cg, og, *_strides(x), *w_strides,
                  _strides(bias)[0] if bias is not None else 0,
                  *_contiguous_strides((n, o, oh, ow)), sth, stw, ph, pw, dh, dw],
                 warps, stages, KH=kh, KW=kw, FLAT=flat, HAS_BIAS=bias is not None,
                 PRECISION=_precision(x.dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return pack, packed_shape, site, (n, o) + tuple(out_size)


# ---------------------------------------------------------------------- data gradient
def _conv_transpose_nd(input, weight, bias, stride, padding, dilation, groups, out_size):
    """``_conv_transpose_nd``: (N, O, *Y) x (O, C/groups, *K) -> (N, C, *out_size), the
    adjoint of ``_conv_nd`` in its input."""
    return _product(_transpose_plan, input, weight, bias, stride, padding, dilation, groups,
                    out_size)


def _transpose_plan(input, weight, bias, stride, padding, dilation, groups, out_size):
    g = _geometry(input, weight, bias, stride, padding, dilation, groups, out_size)
    if g is None:
        return None
    yv, w, (sth, stw), (ph, pw), (dh, dw), (h, wd) = g
    n, o, oh, ow = yv.shape
    cg, kh, kw = w.shape[1:]
    og = o // groups
    c = cg * groups
    hq, wq = -(-h // sth), -(-wd // stw)
    mq = n * hq * wq
    pack, packed_shape, w_strides = _packing(w, 0)
    phases = sth * stw
    bm, bn, bk, warps, stages = _config(
        "dgrad", yv.dtype, cg > 64, lambda bm, bn: -(-mq // bm) * -(-cg // bn) * groups * phases)
    if og <= 16 and not adapter.interpreting():
        bk = 16
    site = _site(kernels().conv_dgrad, (-(-mq // bm), -(-cg // bn), groups * phases),
                 [h, wd, oh, ow, hq, wq, mq, cg, og, *_strides(yv), *w_strides,
                  _strides(bias)[0] if bias is not None else 0,
                  *_contiguous_strides((n, c, h, wd)), sth, stw, ph, pw, dh, dw,
                  sth // math.gcd(sth, dh), stw // math.gcd(stw, dw)],
                 warps, stages, KH=kh, KW=kw, HAS_BIAS=bias is not None,
                 PRECISION=_precision(yv.dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return pack, packed_shape, site, (n, c) + tuple(out_size)


# ---------------------------------------------------------------------- weight gradient
def _split(programs: int, ktot: int, bk: int) -> int:
    """How many chunks the weight gradient's reduction of length ``ktot`` runs in."""
    if adapter.interpreting():
        return max(1, min(3, -(-ktot // (2 * bk))))
    sms = _sms()
    if programs >= sms:  # a wave already: partials would only add their traffic
        return 1
    want = -(-SPLIT_WAVES * sms // programs)
    return max(1, min(want, ktot // (SPLIT_MIN_STEPS * bk)))


def _conv_weight_grad(input, grad_output, kernel_size, stride, padding, dilation, groups):
    """``_conv_weight_grad``: the adjoint of ``_conv_nd`` in its weight,
    (N, C, *S) x (N, O, *Y) -> (O, C/groups, *kernel_size)."""
    plan = _planned(_weight_grad_plan, input, grad_output, kernel_size, stride, padding,
                    dilation, groups)
    if plan is None:
        return None
    shape, split, site, total = plan
    xp = _xp(input)
    out = xp.empty(shape, input.dtype)
    if total is None:
        _run(site, [input, grad_output, out])
        return out
    part = xp.empty(split * out.size, np.float32)
    _run(site, [input, grad_output, part])
    _run(total, [part, out])
    return out


def _weight_grad_plan(input, grad_output, kernel_size, stride, padding, dilation, groups):
    """``(weight shape, split, kernel Site, summing Site or None)``."""
    nd = len(kernel_size)
    if not _covered([input, grad_output], nd) or 0 in kernel_size:
        return None
    x, gy = _as2d(input, nd), _as2d(grad_output, nd)
    (sth, stw), (ph, pw) = _pair(stride, nd, 1), _pair(padding, nd, 0)
    (dh, dw), (kh, kw) = _pair(dilation, nd, 1), _pair(kernel_size, nd, 1)
    n, c, h, wd = x.shape
    o, oh, ow = gy.shape[1:]
    cg, og = c // groups, o // groups
    ktot = n * oh * ow
    if ktot >= _I32:
        return None
    bm, bn, bk, warps, stages = _config("wgrad", x.dtype, og > 64)
    flat = cg < FLAT_BELOW and kh * kw > 1
    cols = cg * kh * kw if flat else cg
    if cols <= 64 and bn > 64:  # a 128-wide block of output channels, 64 columns
        bn = 64
    if cols <= 32 and bn > 32:
        bn = 32
    grid_n = -(-cols // bn) if flat else kh * kw * -(-cg // bn)
    programs = -(-og // bm) * grid_n * groups
    split = min(_split(programs, ktot, bk), max(1, (_I32 - 1) // (o * cg * kh * kw)))
    chunk = -(-ktot // split)
    chunk = -(-chunk // bk) * bk
    split = -(-ktot // chunk)
    site = _site(kernels().conv_wgrad, (-(-og // bm), grid_n, groups * split),
                 [h, wd, oh, ow, ktot, cg, og, o, chunk, split,
                  *_strides(x), *_strides(gy), sth, stw, ph, pw, dh, dw],
                 warps, stages, KH=kh, KW=kw, FLAT=flat, PRECISION=_precision(x.dtype),
                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    total = None
    if split > 1:
        size = o * cg * kh * kw
        total = _site(kernels().sum_splits, (-(-size // 1024),), [size, split], 4, None,
                      BLOCK=1024)
    return (o, cg) + tuple(kernel_size), split, site, total


OVERRIDES = {
    "_conv_nd": _conv_nd,
    "_conv_transpose_nd": _conv_transpose_nd,
    "_conv_weight_grad": _conv_weight_grad,
}


def register(backend) -> None:
    """Register the convolution kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
