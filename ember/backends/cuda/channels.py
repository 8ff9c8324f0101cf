"""Batch norm on the CUDA backend as ember's own Triton kernels (``channel_kernels.py``),
registered as "kernel" overrides (ops/registry.py): ``native_batch_norm`` (training: batch
statistics and the running statistics' update; evaluation: the running statistics) and the
first-order ``_norm_backward`` in batch norm's layout (statistics and parameters over every
dim but 1), chained after the row kernels' override of the same op (layer norm's layout).

Each wrapper takes the op's arrays (CuPy's on the GPU, numpy's under Triton's interpreter)
and returns the results, or None where it does not apply so the impl runs and raises its own
errors: inputs that are not C-contiguous (channels-last keeps its layout through the impl),
fewer than 2 dims, empty, non-float; parameters of the wrong size or of another dtype than
the input's (float32 parameters with a float16 / bfloat16 input are taken, as PyTorch
does). float16 / bfloat16 compute in float32, float64 in float64; the results have the
impl's dtypes (the saved mean and invstd in the input's dtype).

Training forward: three launches (per-chunk statistics, per-channel combine with the running
update, normalise); evaluation: two; backward: three (per-chunk sums, per-channel factors and
parameter gradients, the input gradient).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _dtype as D
from . import triton_adapter as adapter
from .rows import _eps_halves, _pow2, _xp

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, D.bfloat16.np))
_HALF = frozenset(np.dtype(t) for t in (np.float16, D.bfloat16.np))
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
TILE = 4096  # elements of one program's tile (2048 in float64)
BLOCK_P = 1024  # chunks one step of a per-channel combine reads
STATS = {"launches": 0}


def kernels():
    """The Triton kernel module (channel_kernels.py), imported at its first use."""
    return adapter.kernel_module("channel_kernels")


def _acc(f64: bool):
    tl = kernels().tl
    return tl.float64 if f64 else tl.float32


def _launch(kernel, grid: int, arrays, scalars, num_warps: int = 4, **constexprs) -> None:
    STATS["launches"] += 1
    ptrs = adapter.pointers(arrays)
    adapter.launch(kernel, (grid,), ptrs + list(scalars), num_warps=num_warps, **constexprs)


def _warps(tile: int) -> int:
    return 4 if tile <= 1024 else 8


def _halves(v: float):
    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi)) if math.isfinite(hi) else 0.0


def _chunk_plan(n: int, hw: int, f64: bool):
    """(BLOCK_N, BLOCK_HW, chunks per channel, chunks along hw) of the per-chunk kernels."""
    tile = TILE // 2 if f64 else TILE
    block_hw = min(_pow2(hw), tile)
    block_n = min(_pow2(n), tile // block_hw)
    hw_chunks = -(-hw // block_hw)
    return block_n, block_hw, -(-n // block_n) * hw_chunks, hw_chunks


def _rows_plan(rows: int, hw: int, f64: bool):
    """(BLOCK_R, BLOCK_HW, programs, blocks along hw) of the pointwise kernels."""
    tile = TILE // 2 if f64 else TILE
    block_hw = min(_pow2(hw), tile)
    block_r = min(_pow2(rows), tile // block_hw)
    hw_blocks = -(-hw // block_hw)
    return block_r, block_hw, -(-rows // block_r) * hw_blocks, hw_blocks


def _param_ok(p, c: int, dt) -> bool:
    """None, or ``c`` contiguous elements of the input's dtype (float32 for a half input)."""
    if p is None:
        return True
    return p.size == c and p.dtype in _FLOATS and p.flags.c_contiguous and \
        (p.dtype == dt or (dt in _HALF and p.dtype == _F32))


def _channel(p):
    return None if p is None else p.reshape(-1)


def _native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                       eps):
    """native_batch_norm -> (output, save_mean, save_invstd)."""
    if input.ndim < 2 or input.dtype not in _FLOATS or not input.size or \
            not input.flags.c_contiguous or not isinstance(training, (bool, np.bool_)):
        return None
    try:
        eps = float(eps)
        momentum = float(momentum) if training else 0.0
    except (TypeError, ValueError):
        return None
    n, c = input.shape[:2]
    hw = input.size // (n * c)
    count = n * hw
    if not all(_param_ok(p, c, input.dtype) for p in (weight, bias, running_mean, running_var)):
        return None
    if training and count < 2 or not training and (running_mean is None or
                                                   running_var is None):
        return None  # the impl's inf / NaN variance, or its error
    xp = _xp(input)
    f64 = input.dtype == _F64
    acc_dt = _F64 if f64 else _F32
    K = kernels()
    w, b, rm, rv = (_channel(p) for p in (weight, bias, running_mean, running_var))
    save_mean = xp.empty(c, input.dtype)
    save_inv = xp.empty(c, input.dtype)
    factors = xp.empty((2, c), acc_dt)
    chunks = 1
    if training:
        block_n, block_hw, chunks, hw_chunks = _chunk_plan(n, hw, f64)
        part = xp.empty((3, c, chunks), acc_dt)
        _launch(K.bn_partial, c * chunks, [input, part[0], part[1], part[2]],
                [c, hw, n, chunks, hw_chunks], _warps(block_n * block_hw), ACC=_acc(f64),
                BLOCK_N=block_n, BLOCK_HW=block_hw)
    else:
        part = (factors[0],) * 3  # unread
    dummy = save_mean  # unread (an alias of another argument at another shape would
    # confuse the interpreter, which keys host buffers by address)
    block_p = min(_pow2(chunks), BLOCK_P)
    _launch(K.bn_stats, c,
            [part[0], part[1], part[2], dummy if w is None else w, dummy if b is None else b,
             dummy if rm is None else rm, dummy if rv is None else rv, save_mean, save_inv,
             factors[0], factors[1]],
            [chunks, *_eps_halves(eps, f64), *_halves(momentum),
             *_halves(count / (count - 1) if count > 1 else 1.0)],
            4, TRAINING=bool(training), HAS_W=w is not None, HAS_B=b is not None,
            HAS_RM=rm is not None, HAS_RV=rv is not None, ACC=_acc(f64), BLOCK_P=block_p)
    y = xp.empty(input.shape, input.dtype)
    rows = n * c
    block_r, block_hw, progs, hw_blocks = _rows_plan(rows, hw, f64)
    _launch(K.bn_apply, progs, [input, y, factors[0], factors[1]], [c, hw, rows, hw_blocks],
            _warps(block_r * block_hw), ACC=_acc(f64), BLOCK_R=block_r, BLOCK_HW=block_hw)
    return y, save_mean, save_inv


def _batch_norm_backward(grad, input, mean, rstd, weight, stat_dims, param_dims, needs):
    """``_norm_backward`` in batch norm's layout -> (grad_input, grad_weight, grad_bias),
    each None where not needed; None for other layouts."""
    nd = input.ndim
    axes = (0,) + tuple(range(2, nd))
    if mean is None or nd < 2 or tuple(stat_dims) != axes or tuple(param_dims) != axes or \
            input.dtype not in _FLOATS or not input.size or grad.shape != input.shape or \
            not input.flags.c_contiguous:
        return None
    dt = input.dtype
    n, c = input.shape[:2]
    if any(a is not None and (a.dtype != dt or a.size != c) for a in (mean, rstd, weight)) or \
            grad.dtype != dt:
        return None
    xp = _xp(input)
    if not grad.flags.c_contiguous:
        grad = xp.ascontiguousarray(grad)
    mean, rstd, weight = (None if a is None else xp.ascontiguousarray(a.reshape(-1))
                          for a in (mean, rstd, weight))
    hw = input.size // (n * c)
    f64 = dt == _F64
    acc_dt = _F64 if f64 else _F32
    need_x, need_w, need_b = (bool(v) for v in needs)
    K = kernels()
    block_n, block_hw, chunks, hw_chunks = _chunk_plan(n, hw, f64)
    part = xp.empty((2, c, chunks), acc_dt)
    _launch(K.bn_grad_partial, c * chunks, [grad, input, mean, rstd, part[0], part[1]],
            [c, hw, n, chunks, hw_chunks], _warps(block_n * block_hw), ACC=_acc(f64),
            BLOCK_N=block_n, BLOCK_HW=block_hw)
    dw = xp.empty(c, dt) if need_w else rstd  # rstd: unwritten stand-ins
    db = xp.empty(c, dt) if need_b else rstd
    k = xp.empty((3, c), acc_dt) if need_x else (rstd,) * 3
    _launch(K.bn_grad_stats, c,
            [part[0], part[1], rstd if weight is None else weight, rstd, dw, db, k[0], k[1],
             k[2]],
            [chunks, n * hw], 4, HAS_W=weight is not None, NEED_X=need_x,
            NEED_W=need_w, NEED_B=need_b, ACC=_acc(f64),
            BLOCK_P=min(_pow2(chunks), BLOCK_P))
    dx = None
    if need_x:
        dx = xp.empty(input.shape, dt)
        rows = n * c
        block_r, block_hw, progs, hw_blocks = _rows_plan(rows, hw, f64)
        _launch(K.bn_dx, progs, [grad, input, mean, k[0], k[1], k[2], dx],
                [c, hw, rows, hw_blocks], _warps(block_r * block_hw), ACC=_acc(f64),
                BLOCK_R=block_r, BLOCK_HW=block_hw)
    return dx, (dw if need_w else None), (db if need_b else None)


def chain(first, second):
    """An override trying ``first``, then ``second`` where ``first`` declines."""
    def kernel(*args, **kwargs):
        res = first(*args, **kwargs)
        return second(*args, **kwargs) if res is None else res
    return kernel


OVERRIDES = {
    "native_batch_norm": _native_batch_norm,
    "_norm_backward": _batch_norm_backward,
}


def register(backend) -> None:
    """Register the batch-norm kernels as ``backend``'s "kernel" overrides; an override of
    the same op already there (the row kernels' ``_norm_backward``) is tried first."""
    for name, fn in OVERRIDES.items():
        prev = backend.overrides.get(name, {}).pop("kernel", None)
        backend.override(name, "kernel", fn if prev is None else chain(prev, fn))
