"""Fused attention on CUDA: the overrides of ``_fused_attention`` and its backward op
(ops/attention.py) that launch the Triton flash kernels of ``attention_kernels.py``.

``forward`` and ``backward`` take the op's arrays: CuPy arrays on a GPU, or numpy arrays under
Triton's interpreter (how CI runs the kernels without a GPU: a test installs them as the CPU
backend's overrides). The kernel module imports Triton, so it is imported on the first call.

What the kernels take (``KERNEL_LIMITS``; ops/attention.py routes anything else to the math
path): 4-D query (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev) of one dtype among
float16, bfloat16, float32; E and Ev at most 128 (padded to a power of two, at least 16);
H a multiple of Hk; a boolean or additive mask broadcastable to (B, H, L, S).
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from .settings import allow_tf32
from . import triton_adapter as adapter

KERNEL_LIMITS = {"dtypes": ("float16", "bfloat16", "float32"), "max_head_dim": 128}

# block sizes and launch options per (kernel, head-dim block, element bytes), chosen for
# H100/H200 (the benchmark is bench/cuda.py's SDPA cases). The forward and dQ kernels need
# BLOCK_M % BLOCK_N == 0 (their causal split is on a key-block boundary).
#                     BLOCK_M BLOCK_N warps stages
_GPU = {("fwd", 2, 64): (128, 64, 4, 3), ("fwd", 2, 128): (128, 64, 8, 3),
        ("fwd", 4, 64): (64, 32, 4, 2), ("fwd", 4, 128): (64, 32, 4, 2),
        ("dkdv", 2, 64): (32, 128, 4, 4), ("dkdv", 2, 128): (32, 64, 8, 3),
        ("dkdv", 4, 64): (32, 64, 4, 2), ("dkdv", 4, 128): (32, 64, 8, 2),
        ("dq", 2, 64): (128, 32, 4, 4), ("dq", 2, 128): (128, 32, 8, 3),
        ("dq", 4, 64): (64, 32, 4, 2), ("dq", 4, 128): (64, 32, 8, 2)}
# under the interpreter: small blocks, unequal, so small tests cross block edges both ways
_INTERPRETED = {"fwd": (32, 16, None, None), "dkdv": (16, 32, None, None),
                "dq": (32, 16, None, None)}


@functools.cache
def _kernels():
    from . import attention_kernels
    return attention_kernels


def _config(kind: str, block_e: int, itemsize: int) -> tuple:
    if adapter.interpreting():
        return _INTERPRETED[kind]
    key = (kind, min(itemsize, 4), max(64, block_e))
    config = _overrides().get(key, _GPU[key])
    if kind != "dkdv" and config[0] % config[1]:
        raise ValueError(f"EMBER_SDPA_BLOCKS: {kind} needs BLOCK_M % BLOCK_N == 0, got {config}")
    return config


@functools.cache
def _overrides() -> dict:
    """Block configurations from ``EMBER_SDPA_BLOCKS`` (for tuning on a new GPU), e.g.
    ``fwd,2,64=128,64,4,3;dq,2,64=128,32,4,4``: kind, element bytes, head-dim block =
    BLOCK_M, BLOCK_N, warps, stages."""
    out = {}
    for item in filter(None, os.environ.get("EMBER_SDPA_BLOCKS", "").split(";")):
        key, value = item.split("=")
        kind, size, block = key.split(",")
        out[(kind, int(size), int(block))] = tuple(int(x) for x in value.split(","))
    return out


def _xp(a):
    if isinstance(a, np.ndarray):
        return np
    from .runtime import cupy
    return cupy()


def _ptr(a):
    return a if isinstance(a, np.ndarray) else adapter.Pointer(a.data.ptr, a.dtype)


def _strides(a) -> list:
    return [s // a.itemsize for s in a.strides]


def _rows(a):
    """``a`` with its last dimension contiguous (the kernels' one layout requirement)."""
    if a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        return _xp(a).ascontiguousarray(a)
    return a


def _empty_as(a, shape, dtype):
    """An empty array of ``shape`` whose dimensions lie in memory in the order of ``a``'s
    (a gradient or output keeps its input's layout, e.g. (B, L, H, E) behind (B, H, L, E))."""
    order = sorted(range(a.ndim), key=lambda d: -a.strides[d])
    out = _xp(a).empty([shape[d] for d in order], dtype)
    return out.transpose([order.index(d) for d in range(a.ndim)])


def _block(n: int) -> int:
    return max(16, 1 << (n - 1).bit_length())


def _mask_args(mask, q, B, H, L, S):
    """(pointer, 4 strides, kind) of an optional mask broadcast to (B, H, L, S)."""
    if mask is None:
        return _ptr(q), [0, 0, 0, 0], 0
    m = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
    m = _xp(mask).broadcast_to(m, (B, H, L, S))
    strides = [0 if n == 1 else s for n, s in zip(m.shape, _strides(m))]
    return _ptr(m), strides, 1 if mask.dtype == np.bool_ else 2


def _precision(dtype) -> str:
    """float32 products follow ``ember.backends.cuda.matmul.allow_tf32``."""
    if dtype != np.float32:
        return "tf32"  # unused: half-precision operands multiply exactly either way
    return "tf32" if allow_tf32() else "ieee"


def forward(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """(out (B, H, L, Ev) in query's dtype, lse (B, H, L) float32) of flash attention."""
    q, k, v = _rows(query), _rows(key), _rows(value)
    B, H, L, E = q.shape
    Hk, S, Ev = k.shape[1], k.shape[2], v.shape[3]
    xp = _xp(q)
    out = _empty_as(q, (B, H, L, Ev), q.dtype)
    lse = xp.empty((B, H, L), np.float32)
    if out.size == 0:
        return out, lse
    if S == 0:  # nothing to attend to: zeros, and an empty row's log-sum-exp
        out[...] = 0
        lse[...] = np.inf
        return out, lse
    scale = 1 / math.sqrt(E) if scale is None else float(scale)
    mptr, mst, kind = _mask_args(attn_mask, q, B, H, L, S)
    be, bev = _block(E), _block(Ev)
    bm, bn, warps, stages = _config("fwd", max(be, bev), q.itemsize)
    adapter.launch(
        _kernels().attn_fwd, (-(-L // bm), B * H),
        [_ptr(q), _ptr(k), _ptr(v), mptr, _ptr(out), _ptr(lse),
         *_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *mst, *_strides(out)[:3],
         H, H // Hk, L, S, scale * 1.4426950408889634],
        num_warps=warps, num_stages=stages,
        HEAD_E=E, HEAD_EV=Ev, BLOCK_E=be, BLOCK_EV=bev, BLOCK_M=bm, BLOCK_N=bn,
        CAUSAL=bool(is_causal), MASK_KIND=kind, EVEN_M=L % bm == 0, EVEN_N=S % bn == 0,
        PRECISION=_precision(q.dtype))
    return out, lse


def backward(grad_out, query, key, value, attn_mask, out, lse, is_causal=False, scale=None):
    """(dQ, dK, dV) of flash attention, from the forward's output and log-sum-exp."""
    q, k, v, do, o = _rows(query), _rows(key), _rows(value), _rows(grad_out), _rows(out)
    B, H, L, E = q.shape
    Hk, S, Ev = k.shape[1], k.shape[2], v.shape[3]
    xp = _xp(q)
    dq = _empty_as(q, q.shape, q.dtype)
    dk = _empty_as(k, k.shape, k.dtype)
    dv = _empty_as(v, v.shape, v.dtype)
    if L == 0 or S == 0 or B * H == 0:
        for g in (dq, dk, dv):
            g[...] = 0
        return dq, dk, dv
    scale = 1 / math.sqrt(E) if scale is None else float(scale)
    mptr, mst, kind = _mask_args(attn_mask, q, B, H, L, S)
    be, bev = _block(E), _block(Ev)
    kernels = _kernels()
    lse = xp.ascontiguousarray(lse, dtype=np.float32)
    delta = xp.empty((B, H, L), np.float32)
    adapter.launch(kernels.attn_bwd_delta, (-(-L // 64), B * H),
                   [_ptr(o), _ptr(do), _ptr(delta), *_strides(o)[:3], *_strides(do)[:3], H, L],
                   HEAD_EV=Ev, BLOCK_EV=bev, BLOCK_M=64)
    common = [*_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *mst, *_strides(do)[:3]]
    tail = [H, H // Hk, L, S, scale * 1.4426950408889634, scale]
    flags = dict(HEAD_E=E, HEAD_EV=Ev, BLOCK_E=be, BLOCK_EV=bev, CAUSAL=bool(is_causal),
                 MASK_KIND=kind, PRECISION=_precision(q.dtype))
    bm, bn, warps, stages = _config("dkdv", max(be, bev), q.itemsize)
    adapter.launch(
        kernels.attn_bwd_dkdv, (-(-S // bn), B * Hk),
        [_ptr(q), _ptr(k), _ptr(v), mptr, _ptr(do), _ptr(lse), _ptr(delta), _ptr(dk), _ptr(dv),
         *common, *_strides(dk)[:3], *_strides(dv)[:3], *tail],
        num_warps=warps, num_stages=stages, **flags, BLOCK_M=bm, BLOCK_N=bn,
        EVEN_M=L % bm == 0, EVEN_N=S % bn == 0)
    bm, bn, warps, stages = _config("dq", max(be, bev), q.itemsize)
    adapter.launch(
        kernels.attn_bwd_dq, (-(-L // bm), B * H),
        [_ptr(q), _ptr(k), _ptr(v), mptr, _ptr(do), _ptr(lse), _ptr(delta), _ptr(dq),
         *common, *_strides(dq)[:3], *tail],
        num_warps=warps, num_stages=stages, **flags, BLOCK_M=bm, BLOCK_N=bn,
        EVEN_M=L % bm == 0, EVEN_N=S % bn == 0)
    return dq, dk, dv


def _register() -> None:
    """The CUDA backend's overrides of the fused attention ops (without Triton, their
    reference impls run on CuPy)."""
    from .backend import BACKEND, triton_installed
    if BACKEND is not None and triton_installed():
        BACKEND.override("_fused_attention", "kernel", forward)
        BACKEND.override("_fused_attention_backward", "kernel", backward)


_register()
