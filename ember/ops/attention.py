"""Fused attention: the op ``scaled_dot_product_attention`` runs instead of its math path where
a fused kernel takes the call, and the choice between the two.

``_fused_attention(query, key, value, attn_mask, is_causal, scale) -> (out, lse)`` is one op
with its own backward op, ``_fused_attention_backward``, which recomputes the probabilities
from the saved log-sum-exp (flash attention's backward). Their ``impl``s are the reference
(float32 math on the backend's arrays, what the CPU runs); the CUDA backend overrides both
with its Triton flash kernels (backends/cuda/attention.py).

Which path a call takes (``fused_attention_chosen``) follows ``nn.attention.sdpa_kernel`` /
``backends.cuda.enable_*_sdp`` for the calling thread, in their priority order:

- CUDA: FLASH_ATTENTION, EFFICIENT_ATTENTION and CUDNN_ATTENTION all name ember's one fused
  kernel, which takes 4-D float16/bfloat16/float32 inputs with head dims up to 128, causal
  (top-left) or a boolean/additive mask that does not require grad, GQA, any scale, and
  dropout_p == 0; the math path runs anything else.
- CPU: the math path, unless MATH is deselected; then FLASH_ATTENTION runs the reference op
  where PyTorch's CPU flash kernel would (4-D floats, E == Ev, no dropout).
- No selected backend takes the call: PyTorch's errors ("No available kernel.  Aborting
  execution." after a warning with the reasons, or "No viable backend ...").
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from ..autograd.grad_mode import state as _grad_state
from ..backends import cuda as cuda_settings
from ..backends.cuda.attention import KERNEL_LIMITS
from .registry import op

_FUSED_ON_CUDA = ("flash", "mem_efficient", "cudnn")
_FLOATS = {"cuda": frozenset(getattr(D, n) for n in KERNEL_LIMITS["dtypes"]),
           "cpu": frozenset((D.float16, D.bfloat16, D.float32, D.float64))}


# ---------------------------------------------------------------------- the reference math
def _compute_dtype(a):
    return np.float64 if a.dtype == np.float64 else np.float32


def _heads(xp, a, group: int):
    """Key/value heads repeated for the query heads that read them (h0 h0 h1 h1)."""
    return a if group == 1 else xp.repeat(a, group, axis=1)


def _group_sum(a, group: int):
    """Per-query-head gradients summed onto the key/value head each group reads."""
    if group == 1:
        return a
    B, H = a.shape[:2]
    return a.reshape((B, H // group, group) + a.shape[2:]).sum(axis=2)


def _scores(xp, q, k, attn_mask, is_causal, scale):
    ct = _compute_dtype(q)
    s = xp.matmul(q.astype(ct), xp.swapaxes(k.astype(ct), -1, -2)) * scale
    L, S = s.shape[-2:]
    if is_causal:
        s = xp.where(xp.tril(xp.ones((L, S), dtype=bool)), s, -np.inf)
    if attn_mask is not None:
        s = xp.where(attn_mask, s, -np.inf) if attn_mask.dtype == np.bool_ else \
            s + attn_mask.astype(ct)
    return s


def _scale(query, scale):
    return 1 / math.sqrt(query.shape[-1]) if scale is None else scale


@op(saves=("query", "key", "value", "attn_mask"), save_output=True, function=False,
    method=False, out=False, grad_name="ScaledDotProductFlashAttentionBackward0")
def _fused_attention(xp, query: "Tensor", key: "Tensor", value: "Tensor", attn_mask: "Tensor?",
                     is_causal=False, scale=None):
    """(softmax(q k^T * scale + mask) v, the rows' log-sum-exp in float32 (float64 for
    float64 inputs)) for query
    (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev), H a multiple of Hk; a row with no
    visible key gives zeros and log-sum-exp +inf."""
    group = query.shape[1] // key.shape[1]
    s = _scores(xp, query, _heads(xp, key, group), attn_mask, is_causal, _scale(query, scale))
    m = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.full(s.shape[:-1] + (1,), -np.inf)
    m = xp.where(xp.isneginf(m), 0, m)
    e = xp.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    empty = total == 0
    total = xp.where(empty, 1, total)
    lse = xp.where(empty, np.inf, m + xp.log(total))[..., 0]
    v = _heads(xp, value, group).astype(s.dtype)
    out = xp.matmul(e / total, v).astype(query.dtype)
    return out, lse


@_fused_attention.def_meta
def _(query, key, value, attn_mask=None, is_causal=False, scale=None):
    lse_dtype = D.float64 if query.dtype is D.float64 else D.float32
    return ((tuple(query.shape[:-1]) + (value.shape[-1],), query.dtype),
            (tuple(query.shape[:-1]), lse_dtype))


@_fused_attention.def_backward
def _(ctx, g, g_lse=None):
    if g is None:
        return None, None, None, None
    out, lse = ctx.out
    dq, dk, dv = _fused_attention_backward(g, ctx.query, ctx.key, ctx.value, ctx.attn_mask, out,
                                           lse, ctx.is_causal, ctx.scale)
    return dq, dk, dv, None


@op(function=False, method=False, out=False, differentiable=False)
def _fused_attention_backward(xp, grad_out: "Tensor", query: "Tensor", key: "Tensor",
                              value: "Tensor", attn_mask: "Tensor?", out: "Tensor",
                              lse: "Tensor", is_causal=False, scale=None):
    """(dQ, dK, dV) of ``_fused_attention`` from its output and log-sum-exp: P recomputed as
    exp(scores - lse), dS = P * (dO v^T - rowsum(dO * out))."""
    group = query.shape[1] // key.shape[1]
    sc = _scale(query, scale)
    k = _heads(xp, key, group)
    s = _scores(xp, query, k, attn_mask, is_causal, sc)
    ct = s.dtype
    p = xp.exp(s - lse.astype(ct)[..., None])
    do = grad_out.astype(ct)
    v = _heads(xp, value, group).astype(ct)
    dv = xp.matmul(xp.swapaxes(p, -1, -2), do)
    dp = xp.matmul(do, xp.swapaxes(v, -1, -2))
    delta = (do * out.astype(ct)).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta) * sc
    dq = xp.matmul(ds, k.astype(ct))
    dk = xp.matmul(xp.swapaxes(ds, -1, -2), query.astype(ct))
    return (dq.astype(query.dtype), _group_sum(dk, group).astype(key.dtype),
            _group_sum(dv, group).astype(value.dtype))


@_fused_attention_backward.def_meta
def _(grad_out, query, key, value, attn_mask, out, lse, is_causal=False, scale=None):
    return tuple((tuple(t.shape), t.dtype) for t in (query, key, value))


# ---------------------------------------------------------------------- which path
def _unsupported(device: str, query, key, value, attn_mask, dropout_p, enable_gqa) -> str | None:
    """Why the fused kernel of ``device`` ("cuda", "cpu") cannot take this call, or None."""
    if dropout_p > 0:
        return "the fused kernel does not support non-zero dropout"
    if not (query.ndim == key.ndim == value.ndim == 4):
        return (f"the fused kernel requires query, key and value to be 4 dimensional, but got "
                f"{query.ndim}, {key.ndim} and {value.ndim}")
    if query.dtype not in _FLOATS[device]:
        return f"the fused kernel does not support dtype {query.dtype}"
    (B, H, L, E), (Bk, Hk, S, _), (Bv, Hv, Sv, Ev) = query.shape, key.shape, value.shape
    if not (B == Bk == Bv and Hk == Hv and S == Sv) or Hk == 0 or \
            (H != Hk and not (enable_gqa and H % Hk == 0)):
        return (f"the fused kernel needs matching batch, key/value heads and lengths, got "
                f"query {tuple(query.shape)}, key {tuple(key.shape)}, value "
                f"{tuple(value.shape)}")
    if device == "cuda" and max(E, Ev) > KERNEL_LIMITS["max_head_dim"]:
        return f"the fused kernel takes head dims up to 128, got {E} and {Ev}"
    if device == "cpu" and E != Ev:
        return f"the fused kernel requires q, k, v to have one last dimension, got {E}, {Ev}"
    if attn_mask is not None:
        if attn_mask.ndim > 4 or any(m not in (1, n) for m, n in
                                     zip(attn_mask.shape[::-1], (S, L, H, B))):
            return f"attn_mask of shape {tuple(attn_mask.shape)} is not broadcastable to " \
                f"{(B, H, L, S)}"
        if attn_mask.requires_grad and _grad_state.enabled:
            return "the fused kernel does not compute attn_mask's gradient"
    return None


def fused_attention_chosen(query, key, value, attn_mask, dropout_p, is_causal,
                           enable_gqa) -> bool:
    """True where ``scaled_dot_product_attention`` runs ``_fused_attention``, False where it
    runs its math path; PyTorch's RuntimeError where no selected backend takes the call."""
    enabled, priority = cuda_settings.sdp_selection()
    device = query.device.type
    reasons = []
    if device == "cuda":
        for name in priority:
            if name not in enabled:
                continue
            if name == "math":
                return False
            if name in _FUSED_ON_CUDA:
                why = _unsupported("cuda", query, key, value, attn_mask, dropout_p, enable_gqa)
                if why is None:
                    return True
                reasons.append(why)
    elif "math" in enabled:
        return False
    elif device == "cpu" and "flash" in enabled:
        why = _unsupported("cpu", query, key, value, attn_mask, dropout_p, enable_gqa)
        if why is None:
            return True
        reasons.append(why)
    if not reasons:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This "
                           "is likely due to turning off both the math kernel and the fused "
                           "kernels.")
    warnings.warn(f"Flash attention kernel not used because: {reasons[0]}", stacklevel=4)
    raise RuntimeError("No available kernel.  Aborting execution.")
