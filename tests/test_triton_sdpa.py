"""Fused attention: the Triton flash kernels (backends/cuda/attention.py) through Triton's
interpreter on small shapes, against torch's math SDPA on CPU; the reference ops
(ops/attention.py) on CPU; the ``nn.attention.sdpa_kernel`` selection.

The kernels are called on numpy arrays (the wrappers' interpreter mode) and, through ember,
as the CPU backend's overrides of the fused ops (``through_kernels``), so ``F.sdpa`` with
FLASH_ATTENTION selected runs them forward and backward with autograd.
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from ember.backends import cpu
from ember.backends.cuda import attention as kernels
from ember.backends.cuda import triton_adapter
from ember.nn.attention import SDPBackend, sdpa_kernel
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")
TF = torch.nn.functional
TA = torch.nn.attention

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}

# the interpreter's loop bounds from tl.minimum are 1-element arrays it converts with int()
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

interpreted = pytest.mark.skipif(not triton_adapter.interpreting(),
                                 reason="runs where Triton interprets (TRITON_INTERPRET=1)")


def inputs(B, H, Hk, L, S, E, Ev, dtype, seed=0):
    """query, key, value, grad_out as float32 arrays holding ``dtype``'s values."""
    rng = np.random.default_rng(seed)
    shapes = ((B, H, L, E), (B, Hk, S, E), (B, Hk, S, Ev), (B, H, L, Ev))
    return [rng.standard_normal(s).astype(NP[dtype]).astype(np.float32) for s in shapes]


def make_mask(kind, shape, seed=1):
    rng = np.random.default_rng(seed)
    if kind is None:
        return None
    keep = rng.random(shape) < 0.7
    if kind == "bool_rows":  # some rows see no key: zeros out, zero gradients
        keep[..., 2, :] = False
        return keep
    if kind == "bool":
        return keep
    return np.where(keep, rng.standard_normal(shape), -np.inf).astype(np.float32)


def torch_reference(q, k, v, g, mask, causal, scale):
    """torch's math SDPA in float32 on CPU: (out, dq, dk, dv)."""
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    with TA.sdpa_kernel(TA.SDPBackend.MATH):
        out = TF.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask),
            is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
    out.backward(torch.tensor(g))
    return [t.detach().numpy() for t in (out, tq.grad, tk.grad, tv.grad)]


def close(got, want, dtype):
    tol = TOL[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=tol, atol=tol)


#            B  H  Hk  L   S   E   Ev causal mask       scale
CASES = [(1, 2, 2, 32, 32, 16, 16, False, None, None),
         (1, 2, 2, 70, 45, 32, 32, True, None, None),       # L > S, ragged blocks
         (1, 2, 2, 33, 64, 16, 16, True, None, 0.3),        # L < S: top-left causal
         (2, 4, 2, 40, 37, 16, 16, False, None, None),      # GQA
         (1, 2, 1, 45, 50, 16, 32, True, None, None),       # GQA, Ev != E
         (1, 2, 2, 40, 48, 24, 24, False, "bool", None),    # head dim padded to 32
         (2, 2, 2, 36, 40, 16, 16, False, "float", 0.5),
         (1, 2, 2, 32, 32, 16, 16, False, "bool_rows", None)]


@interpreted
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("B,H,Hk,L,S,E,Ev,causal,mask_kind,scale", CASES)
def test_kernels_match_torch(B, H, Hk, L, S, E, Ev, causal, mask_kind, scale, dtype):
    q, k, v, g = inputs(B, H, Hk, L, S, E, Ev, dtype)
    mshape = (B, 1, L, S) if mask_kind == "float" else (L, S)  # broadcast over heads
    mask = make_mask(mask_kind, mshape)
    want = torch_reference(q, k, v, g, mask, causal, scale)
    cast = [a.astype(NP[dtype]) for a in (q, k, v, g)]
    m = mask if mask is None or mask.dtype == bool else mask.astype(NP[dtype])
    out, lse = kernels.forward(*cast[:3], m, causal, scale)
    assert out.dtype == NP[dtype] and lse.dtype == np.float32 and lse.shape == (B, H, L)
    close(out, want[0], dtype)
    grads = kernels.backward(cast[3], *cast[:3], m, out, lse, causal, scale)
    for got, w, a in zip(grads, want[1:], cast[:3]):
        assert got.shape == a.shape and got.dtype == a.dtype
        close(got, w, dtype)
    if mask_kind == "bool_rows":
        assert np.all(np.asarray(out, np.float32)[..., 2, :] == 0)
        assert np.all(lse[..., 2] == np.inf)


@interpreted
def test_float16_and_strided_layouts():
    """float16, and (B, L, H, E) memory behind (B, H, L, E) views: outputs and gradients keep
    their input's layout."""
    B, H, L, E = 1, 2, 34, 16
    q, k, v, g = inputs(B, H, H, L, L, E, E, "float16")
    want = torch_reference(q, k, v, g, None, True, None)
    lay = [np.ascontiguousarray(a.astype(np.float16).transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
           for a in (q, k, v, g)]
    out, lse = kernels.forward(*lay[:3], None, True, None)
    assert out.strides == lay[0].strides
    close(out, want[0], "float16")
    for got, w, a in zip(kernels.backward(lay[3], *lay[:3], None, out, lse, True, None),
                         want[1:], lay[:3]):
        assert got.strides == a.strides
        close(got, w, "float16")


def ember_pair(a, dtype, requires_grad=True):
    return ember.tensor(a).to(getattr(ember, dtype)).requires_grad_(requires_grad)


def through_ember(q, k, v, g, mask, dtype, **kw):
    """F.scaled_dot_product_attention on CPU with only FLASH_ATTENTION selected: out, grads."""
    eq, ek, ev = (ember_pair(a, dtype) for a in (q, k, v))
    em = None if mask is None else ember.tensor(mask) if mask.dtype == bool else \
        ember_pair(mask, dtype, False)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = EF.scaled_dot_product_attention(eq, ek, ev, em, **kw)
    assert out.grad_fn.name() == "ScaledDotProductFlashAttentionBackward0"
    out.backward(ember_pair(g, dtype, False))
    wide = ember.float64 if dtype == "float64" else ember.float32
    return [t.detach().to(wide).numpy() for t in (out, eq.grad, ek.grad, ev.grad)]


@pytest.fixture
def through_kernels(monkeypatch):
    """The CPU backend runs the fused ops with the Triton kernels (interpreted)."""
    if not triton_adapter.interpreting():
        pytest.skip("runs where Triton interprets (TRITON_INTERPRET=1)")
    monkeypatch.setitem(OPS["_fused_attention"]._kernel_overrides, cpu.BACKEND, kernels.forward)
    monkeypatch.setitem(OPS["_fused_attention_backward"]._kernel_overrides, cpu.BACKEND,
                        kernels.backward)


@pytest.mark.parametrize("impl", ["reference", "kernels"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["causal", "gqa_mask"])
def test_sdpa_fused_path_with_autograd(case, dtype, impl, request):
    """ember's F.sdpa through the fused op (its reference impl, or the kernels) and its
    backward op equals torch's math SDPA, values and gradients."""
    if impl == "kernels":
        request.getfixturevalue("through_kernels")
    if case == "causal":
        q, k, v, g = inputs(2, 2, 2, 48, 40, 16, 16, dtype, seed=3)
        kw, mask = {"is_causal": True, "scale": 0.4}, None
    else:
        q, k, v, g = inputs(1, 4, 2, 33, 41, 32, 32, dtype, seed=4)
        kw, mask = {"enable_gqa": True}, make_mask("float", (1, 4, 33, 41))
        mask = mask.astype(NP[dtype]).astype(np.float32)
    want = torch_reference(q, k, v, g, mask, kw.get("is_causal", False), kw.get("scale"))
    for got, w in zip(through_ember(q, k, v, g, mask, dtype, **kw), want):
        close(got, w, dtype)


def test_reference_ops_float64_and_empty():
    """The reference ops in float64, and an empty key sequence (zeros, +inf log-sum-exp)."""
    q, k, v, g = (a.astype(np.float64) for a in inputs(1, 2, 2, 5, 7, 8, 8, "float32"))
    want = torch_reference(q, k, v, g, None, True, None)
    got = through_ember(q, k, v, g, None, "float64", is_causal=True)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-12)
    out, lse = OPS["_fused_attention"](ember.ones(1, 1, 3, 4), ember.ones(1, 1, 0, 4),
                                       ember.ones(1, 1, 0, 4), None)
    assert out.numpy().tolist() == np.zeros((1, 1, 3, 4)).tolist()
    assert np.all(lse.numpy() == np.inf)


# ---------------------------------------------------------------------- selection
def test_sdpa_backend_enum_and_context_like_torch():
    for e, t in zip(SDPBackend, TA.SDPBackend.__members__.values()):
        assert (e.name, int(e), str(e), repr(e)) == (t.name, int(t), str(t), repr(t))
    cuda = ember.backends.cuda
    with sdpa_kernel([SDPBackend.MATH]):
        assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled()
        assert not cuda.mem_efficient_sdp_enabled() and not cuda.cudnn_sdp_enabled()
        cuda.enable_flash_sdp(True)  # inside a context: changes the context's selection
        assert cuda.flash_sdp_enabled()
    assert all(getattr(cuda, f"{n}_sdp_enabled")() for n in ("flash", "math", "cudnn",
                                                                "mem_efficient"))
    for m in (ember, torch):
        with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
            with m.nn.attention.sdpa_kernel("math"):
                pass
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION], set_priority=True):
        order = ember.nn.attention._cur_sdpa_kernel_backends(with_priority=True)
        assert order == [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]


def test_selection_is_per_thread():
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["flash"] = ember.backends.cuda.flash_sdp_enabled()
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with sdpa_kernel(SDPBackend.MATH):
        inside.set()
        done.wait(10)
        assert not ember.backends.cuda.flash_sdp_enabled()
    t.join()
    assert seen["flash"] is True


def _both(backends, fn):
    """fn(F) under each library's sdpa_kernel(backends): (outcome, outcome)."""
    out = []
    for lib, F, A in ((ember, EF, ember.nn.attention), (torch, TF, TA)):
        sel = [getattr(A.SDPBackend, b) for b in backends]
        try:
            with A.sdpa_kernel(sel):
                out.append(("ok", tuple(fn(lib, F).shape)))
        except RuntimeError as e:
            out.append(("error", str(e)))
    return out


@pytest.mark.parametrize("backends,kw", [
    (["MATH"], {}), (["MATH"], {"dropout_p": 0.5}),
    (["FLASH_ATTENTION"], {"is_causal": True}),
    (["FLASH_ATTENTION"], {"dropout_p": 0.5}),        # torch's CPU flash: no dropout
    (["FLASH_ATTENTION"], {"three_d": True}),
    (["EFFICIENT_ATTENTION"], {}), ([], {}), (["ERROR"], {}),
    (["FLASH_ATTENTION", "MATH"], {"dropout_p": 0.5}),
])
def test_cpu_selection_like_torch(backends, kw):
    kw = dict(kw)
    shape = (2, 8, 16) if kw.pop("three_d", False) else (1, 2, 8, 16)

    def call(lib, F):
        q = lib.ones(shape)
        return F.scaled_dot_product_attention(q, q, q, **kw)
    with pytest.warns(UserWarning) if backends == ["FLASH_ATTENTION"] and \
            ("dropout_p" in kw or len(shape) == 3) else _nothing():
        e, t = _both(backends, call)
    assert e == t


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
