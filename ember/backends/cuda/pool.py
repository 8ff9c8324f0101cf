"""2-D pooling on the CUDA backend as ember's own Triton kernels (``pool_kernels.py``),
registered as "kernel" overrides (ops/registry.py): ``max_pool2d_with_indices``, the scatter
of its gradient (``_max_pool_scatter``, any number of spatial dims: the indices are flat per
plane), ``avg_pool2d`` and its gradient (``_avg_pool_adjoint`` for two spatial dims), and
``adaptive_avg_pool2d``.

Each wrapper takes the op's arrays (CuPy's on the GPU, numpy's under Triton's interpreter)
and returns the results, or None where it does not apply so the impl runs and raises
PyTorch's errors: arguments that are not ints of valid values (sizes, strides, padding over
half the window, an output smaller than 1, divisor 0), inputs that are not 3-D or 4-D,
empty, or not floating point. Non-contiguous inputs are copied first; results are contiguous,
as the impl's. float16 / bfloat16 compute in float32.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _pow2, _xp

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_HALF = frozenset(np.dtype(t) for t in (np.float16, D.bfloat16.np))
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
BLOCK = 256  # outputs per program
STATS = {"launches": 0}


def kernels():
    """The Triton kernel module (pool_kernels.py), imported at its first use."""
    return adapter.kernel_module("pool_kernels")


def _acc(dt):
    tl = kernels().tl
    return tl.float64 if dt == _F64 else tl.float32


def _launch(kernel, grid: int, arrays, scalars, num_warps: int = 4, **constexprs) -> None:
    STATS["launches"] += 1
    ptrs = adapter.pointers(arrays)
    adapter.launch(kernel, (grid,), ptrs + list(scalars), num_warps=num_warps, **constexprs)


def _int(v):
    if isinstance(v, (bool, np.bool_)):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def _pair(v, default=None):
    """An int or a sequence of 1 or 2 ints as a pair; ``default`` for None / an empty
    sequence where given; else None."""
    if default is not None and (v is None or (isinstance(v, (tuple, list)) and not v)):
        return default
    if isinstance(v, (tuple, list)):
        vals = [_int(x) for x in v]
        if any(x is None for x in vals) or len(vals) not in (1, 2):
            return None
        return (vals[0], vals[0]) if len(vals) == 1 else tuple(vals)
    x = _int(v)
    return None if x is None else (x, x)


def _out_size(n, k, s, p, d, ceil_mode) -> int:
    """PyTorch's pooling output length (ceil mode drops a last window starting in the
    right padding)."""
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(planes, H, W, kernel, stride, padding, dilation, (OH, OW)) of valid 2-D pooling
    arguments over a float 3-D or 4-D input with no empty dim, else None."""
    if x.ndim not in (3, 4) or x.dtype not in _FLOATS or not x.size or \
            not isinstance(ceil_mode, (bool, np.bool_, int)):
        return None
    k = _pair(kernel_size)
    s = _pair(stride, k) if k is not None else None
    p, d = _pair(padding), _pair(dilation)
    if None in (k, s, p, d) or min(k + s + d) <= 0 or min(p) < 0 or \
            any(pp > ((kk - 1) * dd + 1) // 2 for pp, kk, dd in zip(p, k, d)):
        return None
    h, w = x.shape[-2:]
    out = tuple(_out_size(n, kk, ss, pp, dd, bool(ceil_mode))
                for n, kk, ss, pp, dd in zip((h, w), k, s, p, d))
    if min(out) < 1:
        return None
    return math.prod(x.shape[:-2]), h, w, k, s, p, d, out


def _contiguous(a):
    return a if a.flags.c_contiguous else _xp(a).ascontiguousarray(a)


def _grid(total: int) -> int:
    return -(-total // BLOCK)


# ---------------------------------------------------------------------- max pooling
def _max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    """max_pool2d_with_indices -> (values, flat indices within each (H, W) plane)."""
    geo = _geometry(input, kernel_size, stride, padding, dilation, ceil_mode)
    if geo is None:
        return None
    planes, h, w, k, s, p, d, (oh, ow) = geo
    x = _contiguous(input)
    xp = _xp(x)
    shape = x.shape[:-2] + (oh, ow)
    y = xp.empty(shape, x.dtype)
    idx = xp.empty(shape, np.int64)
    total = planes * oh * ow
    _launch(kernels().max_pool2d_fwd, _grid(total), [x, y, idx],
            [h, w, oh, ow, total, *s, *p, *d], KH=k[0], KW=k[1], ACC=_acc(x.dtype),
            BLOCK=BLOCK)
    return y, idx


def _max_pool_scatter(grad, indices, plane, unique=False):
    """``_max_pool_scatter``: ``grad`` summed into zeros of shape (*lead, *plane) at the
    flat plane ``indices`` (atomic adds unless ``unique``)."""
    try:
        plane = tuple(operator.index(n) for n in plane)
    except TypeError:
        return None
    nd = len(plane)
    if grad.dtype not in _FLOATS or indices.dtype != np.int64 or \
            indices.shape != grad.shape or grad.ndim < nd or not grad.size or \
            not all(plane):
        return None
    xp = _xp(grad)
    lead = grad.shape[:grad.ndim - nd]
    rows = math.prod(lead)
    size = math.prod(plane)
    acc_dt = _F32 if grad.dtype in _HALF else grad.dtype
    out = xp.zeros(lead + plane, acc_dt)
    g, i = _contiguous(grad), _contiguous(indices)
    total = g.size
    _launch(kernels().max_pool_scatter, _grid(total), [g, i, out],
            [total // max(rows, 1), size, total], UNIQUE=bool(unique), BLOCK=BLOCK)
    return out if acc_dt == grad.dtype else out.astype(grad.dtype)


# ---------------------------------------------------------------------- average pooling
def _avg_args(ceil_mode, count_include_pad, divisor_override):
    if divisor_override is not None:
        divisor_override = _int(divisor_override)
        if not divisor_override:
            return None  # not an int, or zero: the impl's error
    if not isinstance(count_include_pad, (bool, np.bool_, int)):
        return None
    return bool(count_include_pad), divisor_override


def _avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    """avg_pool2d over float input."""
    geo = _geometry(input, kernel_size, stride, padding, 1, ceil_mode)
    args = _avg_args(ceil_mode, count_include_pad, divisor_override)
    if geo is None or args is None:
        return None
    planes, h, w, k, s, p, _, (oh, ow) = geo
    count_pad, div = args
    x = _contiguous(input)
    y = _xp(x).empty(x.shape[:-2] + (oh, ow), x.dtype)
    total = planes * oh * ow
    _launch(kernels().avg_pool2d_fwd, _grid(total), [x, y],
            [h, w, oh, ow, total, *s, *p, div or 1], KH=k[0], KW=k[1],
            COUNT_PAD=count_pad, HAS_DIV=div is not None, ACC=_acc(x.dtype), BLOCK=BLOCK)
    return y


def _avg_pool_adjoint(grad, input_size, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override):
    """``_avg_pool_adjoint`` for two spatial dims: the gradient of avg_pool2d."""
    try:
        size = tuple(operator.index(n) for n in input_size)
    except TypeError:
        return None
    k = _pair(kernel_size)
    s = _pair(stride, k) if k is not None else None
    p = _pair(padding)
    args = _avg_args(ceil_mode, count_include_pad, divisor_override)
    if len(size) != 2 or None in (k, s, p) or args is None or grad.ndim < 2 or \
            grad.dtype not in _FLOATS or not grad.size or min(k + s) <= 0 or min(p) < 0 or \
            min(size) <= 0:
        return None
    count_pad, div = args
    g = _contiguous(grad)
    oh, ow = g.shape[-2:]
    h, w = size
    dx = _xp(g).empty(g.shape[:-2] + size, g.dtype)
    total = math.prod(g.shape[:-2]) * h * w
    _launch(kernels().avg_pool2d_bwd, _grid(total), [g, dx],
            [h, w, oh, ow, total, *s, *p, div or 1], KH=k[0], KW=k[1],
            MH=-(-k[0] // s[0]), MW=-(-k[1] // s[1]), COUNT_PAD=count_pad,
            HAS_DIV=div is not None, ACC=_acc(g.dtype), BLOCK=BLOCK)
    return dx


# ---------------------------------------------------------------------- adaptive average
def _adaptive_avg_pool2d(input, output_size):
    """adaptive_avg_pool2d over a float 3-D or 4-D input."""
    if input.ndim not in (3, 4) or input.dtype not in _FLOATS or not input.size:
        return None
    h, w = input.shape[-2:]
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2:
        return None
    out = tuple(n if o is None else _int(o) for o, n in zip(sizes, (h, w)))
    if any(o is None or o <= 0 for o in out):
        return None
    oh, ow = out
    kh = max(-(-((i + 1) * h) // oh) - (i * h) // oh for i in range(oh))
    kw = max(-(-((i + 1) * w) // ow) - (i * w) // ow for i in range(ow))
    x = _contiguous(input)
    y = _xp(x).empty(x.shape[:-2] + (oh, ow), x.dtype)
    total = math.prod(x.shape[:-2]) * oh * ow
    ksize = kh * kw
    block_k = min(_pow2(ksize), 1024)
    block_o = max(1, min(_pow2(total), 4096 // block_k))
    _launch(kernels().adaptive_avg2d, -(-total // block_o), [x, y],
            [h, w, oh, ow, total, kw, ksize], 8 if block_o * block_k > 1024 else 4,
            ACC=_acc(x.dtype), BLOCK_O=block_o, BLOCK_K=block_k)
    return y


OVERRIDES = {
    "max_pool2d_with_indices": _max_pool2d,
    "_max_pool_scatter": _max_pool_scatter,
    "avg_pool2d": _avg_pool2d,
    "_avg_pool_adjoint": _avg_pool_adjoint,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
}


def register(backend) -> None:
    """Register the pooling kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
