"""The CUDA backend's row ops as ember's own Triton kernels (``row_kernels.py``), registered as
"kernel" overrides (ops/registry.py): softmax, log_softmax, _safe_softmax and their backward
ops (``_softmax_backward_data``, ``_log_softmax_backward_data``), layer norm forward
(``native_layer_norm``) and first-order backward (``_norm_backward`` in layer norm's layout),
RMS norm forward (``_fused_rms_norm``).

Each wrapper takes the op's arrays (CuPy's on the GPU; numpy's under Triton's interpreter,
which is how CI runs them) and returns the result arrays, or None where it does not apply, so
the impl runs and raises its own errors: bad dims or shapes, non-float dtypes, empty inputs,
mixed dtypes. float16 / bfloat16 compute in float32 and round once; float64 in float64.

Softmax over any dim without a transpose: the array is seen as (outer, n, inner) with one
stride per axis (the dims before and after the reduced one merged where their strides allow;
a layout that does not merge is copied first). The last dim of a contiguous array is read in
place. Results are contiguous.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .runtime import cupy

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_F64 = np.dtype(np.float64)
TILE = 8192  # elements of one program's block (4096 in float64)
PARTIAL_ROWS, PARTIAL_COLUMNS = 64, 64  # the tile of the norm backward's partial sums
STATS = {"launches": 0}


def kernels():
    """The Triton kernel module (row_kernels.py), imported at its first use."""
    return adapter.kernel_module("row_kernels")


def _acc(f64: bool):
    """The kernels' compute type: float64 for float64 data, else float32."""
    tl = kernels().tl
    return tl.float64 if f64 else tl.float32


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy()


def _launch(kernel, grid: int, arrays, scalars, num_warps: int, **constexprs) -> None:
    """``kernel`` over ``grid`` programs with pointer arguments ``arrays`` then ``scalars``."""
    STATS["launches"] += 1
    ptrs = adapter.pointers(arrays)
    adapter.launch(kernel, (grid,), ptrs + list(scalars), num_warps=num_warps, **constexprs)


def _warps(tile: int) -> int:
    return 4 if tile <= 2048 else 8 if tile <= 4096 else 16


def _axis(dim, ndim: int):
    """``dim`` as an axis of an ``ndim``-d array (0-d counts as 1-d), or None where the impl
    raises."""
    try:
        dim = operator.index(dim)
    except TypeError:
        return None
    n = max(ndim, 1)
    return dim % n if -n <= dim < n else None


def _merged(sizes, strides):
    """(size, element stride) of dims that step as one index, or None where they do not."""
    size, step = 1, 0
    for n, s in zip(reversed(sizes), reversed(strides)):
        if n == 1:
            continue
        if size == 1:
            size, step = n, s
        elif s == step * size:
            size *= n
        else:
            return None
    return size, step


def _three(a, axis: int):
    """(outer, n, inner) of ``a`` around ``axis`` and its element strides, or None."""
    st = [s // a.itemsize for s in a.strides]
    before = _merged(a.shape[:axis], st[:axis])
    after = _merged(a.shape[axis + 1:], st[axis + 1:])
    if before is None or after is None:
        return None
    return (before[0], a.shape[axis], after[0]), (before[1], st[axis], after[1])


def _row_plan(n: int, inner: int, f64: bool):
    """(BLOCK_I, BLOCK_N, programs per outer index, one block per row, warps)."""
    tile = TILE // 2 if f64 else TILE
    block_i = 1 if inner == 1 else min(_pow2(inner), 32)
    block_n = min(_pow2(n), tile // block_i)
    return block_i, block_n, -(-inner // block_i), block_n >= n, _warps(block_i * block_n)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _rows_of(arrays, axis: int):
    """The arrays (copied where their layout does not merge) and each one's strides around
    ``axis``, with the (outer, n, inner) sizes."""
    out, strides, sizes = [], [], None
    for a in arrays:
        found = _three(a, axis)
        if found is None:
            a = _xp(a).ascontiguousarray(a)
            found = _three(a, axis)
        sizes, st = found
        out.append(a)
        strides.extend(st)
    return out, strides, sizes


# ---------------------------------------------------------------------- softmax family
def _softmax(kind: int):
    """softmax (0), log_softmax (1) or _safe_softmax (2) of float arrays, into ``dtype``."""
    def kernel(input, dim, dtype=None):
        out_dt = input.dtype if dtype is None else getattr(dtype, "np", None)
        if out_dt is None or input.dtype not in _FLOATS or np.dtype(out_dt) not in _FLOATS \
                or not input.size or (axis := _axis(dim, input.ndim)) is None:
            return None
        shape = input.shape
        if input.ndim == 0:
            input = input.reshape(1)
        xp = _xp(input)
        (x,), xst, (outer, n, inner) = _rows_of([input], axis)
        y = xp.empty(x.shape, out_dt)
        f64 = y.dtype == _F64
        block_i, block_n, iblocks, one, warps = _row_plan(n, inner, f64)
        _launch(kernels().softmax_fwd, outer * iblocks, [x, y],
                [n, inner, iblocks, *xst, n * inner, inner, 1], warps, KIND=kind,
                ACC=_acc(f64), BLOCK_I=block_i, BLOCK_N=block_n, ONE=one)
        return y.reshape(shape)
    return kernel


def _softmax_backward(log: bool):
    """``_softmax_backward_data`` / ``_log_softmax_backward_data`` for float arrays of one
    shape and dtype (the op hands half arrays over widened to float32)."""
    def kernel(grad_output, output, dim):
        if output.dtype not in _FLOATS or grad_output.dtype != output.dtype or \
                grad_output.shape != output.shape or not output.size or \
                (axis := _axis(dim, output.ndim)) is None:
            return None
        shape = output.shape
        if output.ndim == 0:
            grad_output, output = grad_output.reshape(1), output.reshape(1)
        xp = _xp(output)
        (g, y), st, (outer, n, inner) = _rows_of([grad_output, output], axis)
        r = xp.empty(y.shape, y.dtype)
        f64 = y.dtype == _F64
        block_i, block_n, iblocks, one, warps = _row_plan(n, inner, f64)
        _launch(kernels().softmax_bwd, outer * iblocks, [g, y, r],
                [n, inner, iblocks, *st, n * inner, inner, 1], warps, LOG=log,
                ACC=_acc(f64), BLOCK_I=block_i, BLOCK_N=block_n, ONE=one)
        return r.reshape(shape)
    return kernel


# ---------------------------------------------------------------------- norms
def _eps_halves(eps, f64: bool):
    """eps as float32 high and low parts (Triton passes Python floats as float32)."""
    hi = float(np.float32(eps))
    return hi, float(np.float32(eps - hi)) if f64 else 0.0


def _norm_args(input, normalized_shape, params, eps):
    """(rows, n, input as rows) for a norm over the trailing ``normalized_shape`` of a float
    input with parameters of that shape and dtype (or None), else None."""
    try:
        ns = tuple(operator.index(s) for s in normalized_shape)
        eps = float(eps)
    except TypeError:
        return None
    k = len(ns)
    if not k or input.dtype not in _FLOATS or not input.size or input.ndim < k or \
            input.shape[input.ndim - k:] != ns or \
            any(p is not None and (p.shape != ns or p.dtype != input.dtype) for p in params):
        return None
    n = math.prod(ns)
    rows = input.size // n
    x = input.reshape(rows, n)
    if x.strides[1] != x.itemsize:
        x = _xp(x).ascontiguousarray(x)
    return rows, n, x, eps


def _norm_forward(center: bool, input, normalized_shape, weight, bias, eps):
    """(y, mean or None, rstd) of layer norm (``center``) or RMS norm."""
    found = _norm_args(input, normalized_shape, (weight, bias), eps)
    if found is None:
        return None
    rows, n, x, eps = found
    xp = _xp(x)
    f64 = x.dtype == _F64
    stat_dt = _F64 if f64 else np.dtype(np.float32)
    y = xp.empty((rows, n), x.dtype)
    rstd = xp.empty(rows, stat_dt)
    mean = xp.empty(rows, stat_dt) if center else rstd
    tile = TILE // 2 if f64 else TILE
    block = min(_pow2(n), tile)
    w = x if weight is None else weight if weight.ndim == 1 else weight.reshape(n)
    b = x if bias is None else bias if bias.ndim == 1 else bias.reshape(n)
    _launch(kernels().norm_fwd, rows, [x, w, b, y, mean, rstd],
            [n, x.strides[0] // x.itemsize, *_eps_halves(eps, f64)], _warps(block),
            CENTER=center, HAS_W=weight is not None, HAS_B=bias is not None, ACC=_acc(f64),
            BLOCK_N=block, ONE=block >= n)
    k = len(normalized_shape)
    stat_shape = input.shape[:input.ndim - k] + (1,) * k
    return y.reshape(input.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


def _layer_norm(input, normalized_shape, weight, bias, eps):
    """native_layer_norm -> (output, mean, rstd)."""
    return _norm_forward(True, input, normalized_shape, weight, bias, eps)


def _rms_norm(input, normalized_shape, weight, eps):
    """_fused_rms_norm -> (output, rstd)."""
    res = _norm_forward(False, input, normalized_shape, weight, None, eps)
    return None if res is None else (res[0], res[2])


def _programs(rows: int) -> int:
    """How many programs share the rows of a norm's backward."""
    if adapter.interpreting():
        return min(rows, 3)
    return min(rows, 2 * _sm_count(cupy().cuda.runtime.getDevice()))


@functools.cache
def _sm_count(device: int) -> int:
    return cupy().cuda.Device(device).attributes["MultiProcessorCount"]


def _norm_backward(grad, input, mean, rstd, weight, stat_dims, param_dims, needs):
    """``_norm_backward`` in layer norm's layout (statistics over the trailing dims, the
    parameters over the rest) -> (grad_input, grad_weight, grad_bias), each None where not
    needed; None for the other norms' layouts."""
    nd = input.ndim
    k = len(stat_dims)
    if mean is None or not k or tuple(stat_dims) != tuple(range(nd - k, nd)) or \
            tuple(param_dims) != tuple(range(nd - k)) or grad.shape != input.shape or \
            grad.dtype != input.dtype:
        return None
    pshape = input.shape[nd - k:]
    found = _norm_args(input, pshape, (weight,), 0.0)
    if found is None or mean.dtype != input.dtype or rstd.dtype != input.dtype:
        return None
    rows, n, x, _ = found
    xp = _xp(x)
    g = grad.reshape(rows, n)
    if g.strides[1] != g.itemsize:
        g = xp.ascontiguousarray(g)
    mean = xp.ascontiguousarray(mean.reshape(rows))
    rstd = xp.ascontiguousarray(rstd.reshape(rows))
    f64 = x.dtype == _F64
    acc_dt = _F64 if f64 else np.dtype(np.float32)
    need_x, need_w, need_b = (bool(v) for v in needs)
    progs = _programs(rows)
    block = min(_pow2(n), TILE // 2 if f64 else TILE)
    one = block >= n
    # each program's row of partial sums: written whole in one pass (one block per row),
    # else accumulated over the blocks from zero
    partials = xp.empty if one else xp.zeros
    dx = xp.empty((rows, n), x.dtype) if need_x else x
    dw = partials((progs, n), acc_dt) if need_w else x
    db = partials((progs, n), acc_dt) if need_b else x
    w = x if weight is None else weight if weight.ndim == 1 else weight.reshape(n)
    _launch(kernels().layer_norm_bwd, progs, [g, x, w, mean, rstd, dx, dw, db],
            [rows, n, g.strides[0] // g.itemsize, x.strides[0] // x.itemsize, progs,
             -(-rows // progs)],
            _warps(block), HAS_W=weight is not None, NEED_X=need_x, NEED_W=need_w,
            NEED_B=need_b, ACC=_acc(f64), BLOCK_N=block, ONE=one)
    gw = gb = None
    if need_w or need_b:  # the partials' column sums, in one launch
        gw = xp.empty(pshape, x.dtype) if need_w else x
        gb = xp.empty(pshape, x.dtype) if need_b else x
        _launch(kernels().partial_sums, -(-n // PARTIAL_COLUMNS), [dw, db, gw, gb],
                [progs, n], 4, NEED_W=need_w, NEED_B=need_b, BLOCK_R=PARTIAL_ROWS,
                BLOCK_C=PARTIAL_COLUMNS)
    return (dx.reshape(input.shape) if need_x else None, gw if need_w else None,
            gb if need_b else None)


OVERRIDES = {
    "softmax": _softmax(0),
    "log_softmax": _softmax(1),
    "_safe_softmax": _softmax(2),
    "_softmax_backward_data": _softmax_backward(False),
    "_log_softmax_backward_data": _softmax_backward(True),
    "native_layer_norm": _layer_norm,
    "_fused_rms_norm": _rms_norm,
    "_norm_backward": _norm_backward,
}


def register(backend) -> None:
    """Register the row kernels as ``backend``'s "kernel" overrides."""
    for name, fn in OVERRIDES.items():
        backend.override(name, "kernel", fn)
