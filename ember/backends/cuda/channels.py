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


def _site(kernel, grid: int, scalars, num_warps: int = 4, **constexprs) -> adapter.Site:
    return adapter.Site(kernel, (grid,), scalars, num_warps=num_warps, **constexprs)


def _run(site: adapter.Site, pointers) -> None:
    STATS["launches"] += 1
    site(pointers)


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
    """None, or ``c`` elements of the input's dtype (float32 for a half input)."""
    return p is None or p.size == c and p.dtype in _FLOATS and \
        (p.dtype == dt or (dt in _HALF and p.dtype == _F32))


def _contiguous(arrays) -> bool:
    return all(a is None or a.flags.c_contiguous for a in arrays)


def _meta(p):
    return None if p is None else (p.size, p.dtype)


# Plans: what a call launches, by everything but the arrays' addresses (shapes, dtypes,
# which parameters are given, the numbers), so a repeated call allocates its results and
# makes its launches (adapter.Site) without recomputing any of it. None: not ours.
_FORWARD: dict = {}
_BACKWARD: dict = {}
_MISSING = object()


def _native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                       eps):
    """native_batch_norm -> (output, save_mean, save_invstd)."""
    params = (weight, bias, running_mean, running_var)
    if not _contiguous((input,) + params):
        return None  # (channels-last keeps its layout through the impl)
    try:
        key = (type(input), input.shape, input.dtype, training, momentum, eps, TILE, BLOCK_P,
               *map(_meta, params))
        plan = _FORWARD.get(key, _MISSING)
    except TypeError:  # unhashable numbers: the impl's to take or refuse
        return None
    if plan is _MISSING:
        if len(_FORWARD) > 1024:
            _FORWARD.clear()
        plan = _FORWARD[key] = _forward_plan(input, *params, training, momentum, eps)
    if plan is None:
        return None
    c, acc_dt, sizes, partial, stats, apply = plan
    xp = _xp(input)
    save_mean = xp.empty(c, input.dtype)
    save_inv = xp.empty(c, input.dtype)
    keep, (f0, f1, *part) = adapter.scratch(xp, acc_dt, sizes)
    if partial is not None:
        _run(partial, [input, *part])
    else:
        part = (f0,) * 3  # unread
    dummy = save_mean  # unread (an alias of another argument at another shape would
    # confuse the interpreter, which keys host buffers by address)
    _run(stats, [*part, *(dummy if p is None else p for p in params), save_mean, save_inv,
                 f0, f1])
    y = xp.empty(input.shape, input.dtype)
    _run(apply, [input, y, f0, f1])
    return y, save_mean, save_inv


def _forward_plan(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``(channels, accumulator dtype, scratch sizes, partial-statistics Site or None,
    statistics Site, normalising Site)`` of a batch-norm forward, or None."""
    if input.ndim < 2 or input.dtype not in _FLOATS or not input.size or \
            not isinstance(training, (bool, np.bool_)):
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
    f64 = input.dtype == _F64
    K, acc = kernels(), _acc(f64)
    partial, chunks = None, 1
    if training:
        block_n, block_hw, chunks, hw_chunks = _chunk_plan(n, hw, f64)
        partial = _site(K.bn_partial, c * chunks, [c, hw, n, chunks, hw_chunks],
                        _warps(block_n * block_hw), ACC=acc, BLOCK_N=block_n,
                        BLOCK_HW=block_hw)
    stats = _site(K.bn_stats, c,
                  [chunks, *_eps_halves(eps, f64), *_halves(momentum),
                   *_halves(count / (count - 1) if count > 1 else 1.0)],
                  4, TRAINING=bool(training), HAS_W=weight is not None, HAS_B=bias is not None,
                  HAS_RM=running_mean is not None, HAS_RV=running_var is not None, ACC=acc,
                  BLOCK_P=min(_pow2(chunks), BLOCK_P))
    rows = n * c
    block_r, block_hw, progs, hw_blocks = _rows_plan(rows, hw, f64)
    apply = _site(K.bn_apply, progs, [c, hw, rows, hw_blocks], _warps(block_r * block_hw),
                  ACC=acc, BLOCK_R=block_r, BLOCK_HW=block_hw)
    sizes = (c, c) + ((c * chunks,) * 3 if training else ())
    return c, _F64 if f64 else _F32, sizes, partial, stats, apply


def _batch_norm_backward(grad, input, mean, rstd, weight, stat_dims, param_dims, needs):
    """``_norm_backward`` in batch norm's layout -> (grad_input, grad_weight, grad_bias),
    each None where not needed; None for other layouts."""
    if mean is None or not input.flags.c_contiguous:
        return None
    try:
        needs = tuple(bool(v) for v in needs)
        key = (type(input), input.shape, input.dtype, grad.shape, grad.dtype,
               tuple(stat_dims), tuple(param_dims), needs, TILE, BLOCK_P,
               *map(_meta, (mean, rstd, weight)))
        plan = _BACKWARD.get(key, _MISSING)
    except TypeError:
        return None
    if plan is _MISSING:
        if len(_BACKWARD) > 1024:
            _BACKWARD.clear()
        plan = _BACKWARD[key] = _backward_plan(grad, input, mean, rstd, weight, stat_dims,
                                               param_dims, needs)
    if plan is None:
        return None
    c, acc_dt, chunks, partial, stats, dx_site = plan
    xp = _xp(input)
    if not grad.flags.c_contiguous:
        grad = xp.ascontiguousarray(grad)
    mean, rstd, weight = (a if a is None or a.flags.c_contiguous else xp.ascontiguousarray(a)
                          for a in (mean, rstd, weight))
    need_x, need_w, need_b = needs
    dt = input.dtype
    keep, (p0, p1, k0, k1, k2) = adapter.scratch(
        xp, acc_dt, (c * chunks, c * chunks) + ((c,) * 3 if need_x else (0, 0, 0)))
    _run(partial, [grad, input, mean, rstd, p0, p1])
    dw = xp.empty(c, dt) if need_w else rstd  # rstd: unwritten stand-ins
    db = xp.empty(c, dt) if need_b else rstd
    if not need_x:
        k0 = k1 = k2 = rstd
    _run(stats, [p0, p1, rstd if weight is None else weight, rstd, dw, db, k0, k1, k2])
    dx = None
    if need_x:
        dx = xp.empty(input.shape, dt)
        _run(dx_site, [grad, input, mean, k0, k1, k2, dx])
    return dx, (dw if need_w else None), (db if need_b else None)


def _backward_plan(grad, input, mean, rstd, weight, stat_dims, param_dims, needs):
    """``(channels, accumulator dtype, chunks, partial-sums Site, factors Site, input-gradient
    Site)`` of a batch-norm backward, or None."""
    nd = input.ndim
    axes = (0,) + tuple(range(2, nd))
    if nd < 2 or tuple(stat_dims) != axes or tuple(param_dims) != axes or \
            input.dtype not in _FLOATS or not input.size or grad.shape != input.shape:
        return None
    dt = input.dtype
    n, c = input.shape[:2]
    if any(a is not None and (a.dtype != dt or a.size != c) for a in (mean, rstd, weight)) or \
            grad.dtype != dt:
        return None
    hw = input.size // (n * c)
    f64 = dt == _F64
    K, acc = kernels(), _acc(f64)
    block_n, block_hw, chunks, hw_chunks = _chunk_plan(n, hw, f64)
    partial = _site(K.bn_grad_partial, c * chunks, [c, hw, n, chunks, hw_chunks],
                    _warps(block_n * block_hw), ACC=acc, BLOCK_N=block_n, BLOCK_HW=block_hw)
    need_x, need_w, need_b = needs
    stats = _site(K.bn_grad_stats, c, [chunks, n * hw], 4, HAS_W=weight is not None,
                  NEED_X=need_x, NEED_W=need_w, NEED_B=need_b, ACC=acc,
                  BLOCK_P=min(_pow2(chunks), BLOCK_P))
    dx = None
    if need_x:
        rows = n * c
        block_r, block_hw, progs, hw_blocks = _rows_plan(rows, hw, f64)
        dx = _site(K.bn_dx, progs, [c, hw, rows, hw_blocks], _warps(block_r * block_hw),
                   ACC=acc, BLOCK_R=block_r, BLOCK_HW=block_hw)
    return c, _F64 if f64 else _F32, chunks, partial, stats, dx


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
