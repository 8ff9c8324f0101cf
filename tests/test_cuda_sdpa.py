"""The fused attention kernels on the GPU (the GPU tier: ``-m cuda``): ember's
``F.scaled_dot_product_attention`` on CUDA against torch's on the same GPU, values and
gradients, over dtypes, head dims, causal, L != S, GQA, masks and layouts; the selection
(``sdpa_kernel``) and the math fallback.

Half-precision results are judged as flash attention tests judge them: ember's error against a
float64 reference must be within a small multiple of torch's own error (torch's fused kernel in
the same dtype) plus a floor.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER
import ember.nn.functional as EF
from ember.nn.attention import SDPBackend, sdpa_kernel

torch = pytest.importorskip("torch")
TF = torch.nn.functional

pytestmark = GPU_TIER

FLOOR = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2}


def host(B, H, Hk, L, S, E, Ev, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in
            ((B, H, L, E), (B, Hk, S, E), (B, Hk, S, Ev), (B, H, L, Ev))]


def on_gpu(lib, a, dtype, grad=True):
    t = lib.tensor(a).cuda().to(getattr(lib, dtype))
    return t.requires_grad_(grad) if grad else t


def run(lib, arrays, dtype, mask, transposed=False, **kw):
    """out and (dq, dk, dv) of lib's SDPA on the GPU, as float64 host arrays."""
    q, k, v = (on_gpu(lib, a, dtype, grad=not transposed) for a in arrays[:3])
    if transposed:  # (B, L, H, E) memory behind (B, H, L, E) views
        q, k, v = (lib.tensor(a.transpose(0, 2, 1, 3).copy()).cuda().to(getattr(lib, dtype))
                   .requires_grad_() for a in arrays[:3])
        leaves = (q, k, v)
        q, k, v = (t.transpose(1, 2) for t in leaves)
    else:
        leaves = (q, k, v)
    m = None
    if mask is not None:
        m = lib.tensor(mask).cuda()
        if mask.dtype != np.bool_:
            m = m.to(getattr(lib, dtype))
    out = lib.nn.functional.scaled_dot_product_attention(q, k, v, m, **kw)
    out.backward(on_gpu(lib, arrays[3], dtype, grad=False))
    grads = [t.grad.transpose(1, 2) if transposed else t.grad for t in leaves]
    return out, [x.detach().double().cpu().numpy() for x in (out, *grads)]


def reference(arrays, dtype, mask, **kw):
    """torch's math SDPA in float64 on the GPU, from the dtype-rounded inputs."""
    rounded = [torch.tensor(a).to(getattr(torch, dtype)).double().numpy() for a in arrays]
    if mask is not None and mask.dtype != np.bool_:
        mask = torch.tensor(mask).to(getattr(torch, dtype)).double().numpy()
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        return run(torch, rounded, "float64", mask, **kw)[1]


def torch_fused(arrays, dtype, mask, **kw):
    """torch's own result in ``dtype`` (its fused kernel where one takes the call)."""
    return run(torch, arrays, dtype, mask, **kw)[1]


def judge(got, ours_vs, dtype):
    want, theirs = ours_vs
    for g, w, t, name in zip(got, want, theirs, ("out", "dq", "dk", "dv")):
        err = np.abs(g - w).max()
        t_err = np.nan_to_num(np.abs(t - w), nan=0.0).max()  # torch's NaN rows do not count
        bound = 3 * t_err + FLOOR[dtype]
        assert err <= bound, f"{name}: error {err:.3g} > {bound:.3g} (torch's: {t_err:.3g})"


def mask_of(kind, B, H, L, S, seed=1):
    rng = np.random.default_rng(seed)
    keep = rng.random((B, 1, L, S)) < 0.8
    if kind == "bool":
        return keep
    if kind == "bool_rows":
        keep[:, :, 3] = False
        return keep
    return np.where(keep, rng.standard_normal((B, 1, L, S)), -np.inf).astype(np.float32)


#  B  H  Hk   L    S    E   Ev  causal  mask
SHAPES = [
    (2, 4, 4, 256, 256, 64, 64, True, None),
    (2, 4, 4, 256, 256, 128, 128, True, None),
    (2, 4, 4, 200, 333, 64, 64, False, None),   # ragged blocks, L < S
    (1, 4, 4, 300, 129, 64, 64, True, None),    # L > S: top-left causal
    (2, 8, 2, 128, 192, 64, 64, True, None),    # GQA
    (2, 4, 4, 160, 160, 80, 80, False, None),   # head dim padded
    (1, 4, 4, 100, 140, 32, 32, False, "bool"),
    (1, 4, 4, 128, 128, 64, 64, False, "float"),
    (1, 4, 4, 64, 96, 16, 16, False, "bool_rows"),
    (1, 4, 2, 96, 96, 64, 128, False, None),    # Ev != E
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("B,H,Hk,L,S,E,Ev,causal,mask_kind", SHAPES)
def test_sdpa_matches_torch(B, H, Hk, L, S, E, Ev, causal, mask_kind, dtype):
    arrays = host(B, H, Hk, L, S, E, Ev)
    mask = None if mask_kind is None else mask_of(mask_kind, B, H, L, S)
    kw = {"is_causal": causal, "enable_gqa": H != Hk}
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out, got = run(ember, arrays, dtype, mask, **kw)
    assert out.is_cuda and out.dtype == getattr(ember, dtype)
    assert out.grad_fn.name() == "ScaledDotProductFlashAttentionBackward0"
    judge(got, (reference(arrays, dtype, mask, **kw), torch_fused(arrays, dtype, mask, **kw)),
          dtype)
    if mask_kind == "bool_rows":
        assert np.all(got[0][:, :, 3] == 0) and np.all(got[1][:, :, 3] == 0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_transposed_layout_and_scale(dtype):
    arrays = host(2, 4, 4, 192, 192, 64, 64, seed=5)
    kw = {"is_causal": True, "scale": 0.2, "transposed": True}
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        _, got = run(ember, arrays, dtype, None, **kw)
    judge(got, (reference(arrays, dtype, None, **kw), torch_fused(arrays, dtype, None, **kw)),
          dtype)


def test_backward_is_deterministic():
    arrays = host(1, 8, 2, 257, 257, 64, 64, seed=7)
    first = run(ember, arrays, "bfloat16", None, is_causal=True, enable_gqa=True)[1]
    again = run(ember, arrays, "bfloat16", None, is_causal=True, enable_gqa=True)[1]
    for a, b in zip(first, again):
        assert np.array_equal(a, b)


def test_selection_and_fallback():
    q = ember.randn(1, 2, 64, 64, device="cuda", dtype=ember.bfloat16)
    assert EF.scaled_dot_product_attention(q, q, q).grad_fn is None  # runs fused, no grad
    name = EF.scaled_dot_product_attention(q.requires_grad_(), q, q).grad_fn.name()
    assert name == "ScaledDotProductFlashAttentionBackward0"
    with sdpa_kernel(SDPBackend.MATH):
        assert EF.scaled_dot_product_attention(q, q, q).grad_fn.name() != name
    # dropout and head dims over 128 fall back to the math path by default ...
    assert EF.scaled_dot_product_attention(q, q, q, dropout_p=0.1).grad_fn.name() != name
    big = ember.randn(1, 2, 16, 256, device="cuda", requires_grad=True)
    assert EF.scaled_dot_product_attention(big, big, big).grad_fn.name() != name
    # ... and raise with only the fused kernels selected, as torch does
    for sel in (SDPBackend.FLASH_ATTENTION, [SDPBackend.EFFICIENT_ATTENTION]):
        with sdpa_kernel(sel), pytest.warns(UserWarning):
            with pytest.raises(RuntimeError, match="No available kernel"):
                EF.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with sdpa_kernel([]), pytest.raises(RuntimeError, match="No viable backend"):
        EF.scaled_dot_product_attention(q, q, q)


def test_autocast_runs_fused_in_half():
    q = ember.randn(1, 2, 64, 64, device="cuda", requires_grad=True)
    with ember.autocast("cuda", dtype=ember.bfloat16):
        out = EF.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.dtype == ember.bfloat16
    out.float().sum().backward()
    assert q.grad.dtype == ember.float32
