"""FlexAttention on the GPU (the GPU tier: ``-m cuda``): ember's flex_attention on CUDA tensors
against torch's CUDA flex_attention, forward (out, lse) and backward (query, key, value and
captured tensors), over the attention variants, GQA, head dims, ragged lengths and dtypes.

torch's eager CUDA flex_attention has a backward; in float64 it is the reference. Half
precision is judged as the SDPA tests judge it: ember's error against the float64 reference
within a small multiple of torch's own error in that dtype plus a floor. One case also runs
torch's compiled (Triton) flex_attention, and one ember.compile on CUDA.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_cuda import GPU_TIER
from test_flex_attention import BLOCK, VARIANTS, arrays, causal, variant

import ember
import ember.nn.attention.flex_attention as EF

torch = pytest.importorskip("torch")
TF = pytest.importorskip("torch.nn.attention.flex_attention")

pytestmark = GPU_TIER + [
    pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")]

FLOOR = {"float32": 5e-5, "float16": 3e-3, "bfloat16": 2e-2, "float64": 1e-9}


@pytest.fixture(autouse=True)
def static_torch_compiles(monkeypatch):
    """torch's CUDA flex_attention compiles itself: keep its recompiles static. Once a worker
    has compiled it for other sizes, dynamo's automatic dynamic shapes turn the softcap
    variant's Python float into an unbacked symbol and torch 2.11 fails to trace it
    (PendingUnbackedSymbolNotFound), depending on which tests ran before in the process."""
    monkeypatch.setattr(torch._dynamo.config, "automatic_dynamic_shapes", False)


def run(lib, F, arrs, cap, name, dtype, gqa=False, scale=None, compiled=False, Hm=None):
    """out, lse and the gradients (q, k, v, captured slopes/table) of lib's flex_attention
    on the GPU, as float64 host arrays (None for a captured tensor the variant ignores)."""
    dev = "cuda"
    q, k, v = (lib.tensor(a).to(dev).to(getattr(lib, dtype)).requires_grad_(True)
               for a in arrs)
    c = {}
    for key, val in cap.items():
        t = lib.tensor(val).to(dev)
        if key in ("slopes", "table"):
            t = t.to(getattr(lib, dtype if dtype == "float64" else "float32"))
            t.requires_grad_(True)
        c[key] = t
    mask_mod, score_mod = variant(name, lib, c)
    bm = None if mask_mod is None else F.create_block_mask(
        mask_mod, q.shape[0], Hm or q.shape[1], q.shape[2], k.shape[2], device=dev,
        BLOCK_SIZE=BLOCK if lib is ember else 128)
    fn = F.flex_attention
    if compiled:
        fn = torch.compile(fn) if lib is torch else ember.compile(fn)
    out, aux = fn(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=gqa, scale=scale,
                  return_aux=F.AuxRequest(lse=True))
    assert out.is_cuda and aux.lse.is_cuda
    g = np.random.default_rng(99).standard_normal(tuple(out.shape)).astype(np.float32)
    (out * lib.tensor(g).to(dev).to(out.dtype)).sum().backward()
    grads = [t.grad for t in (q, k, v)] + [c[key].grad if key in c else None
                                           for key in ("slopes", "table")]
    host = [None if t is None else t.detach().double().cpu().numpy()
            for t in (out, aux.lse, *grads)]
    return out, host


def judge(got, want, theirs, dtype):
    names = ("out", "lse", "dq", "dk", "dv", "dslopes", "dtable")
    for g, w, t, name in zip(got, want, theirs, names):
        assert (g is None) == (w is None), name
        if g is None:
            continue
        fin = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), fin), f"{name}: -inf rows differ"
        err = np.abs(g - w)[fin].max(initial=0.0)
        t_err = np.nan_to_num(np.abs(t - w)[fin], nan=0.0).max(initial=0.0)
        scale = max(1.0, np.abs(w[fin]).max(initial=0.0)) if name in ("dslopes", "dtable") \
            else 1.0
        bound = 3 * t_err + FLOOR[dtype] * scale
        assert err <= bound, f"{name}: error {err:.3g} > {bound:.3g} (torch's: {t_err:.3g})"


def compare(arrs, cap, name, dtype, **kw):
    out, got = run(ember, EF, arrs, cap, name, dtype, **kw)
    assert out.dtype == getattr(ember, dtype)
    want = run(torch, TF, arrs, cap, name, "float64", **kw)[1]
    theirs = run(torch, TF, arrs, cap, name, dtype, **kw)[1]
    judge(got, want, theirs, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", VARIANTS)
def test_variants_match_torch_cuda(name, dtype):
    compare(arrays(seed=1, L=200, S=200, E=64), captured_for(200, 200), name, dtype)


def captured_for(L, S, B=2, seed=3):
    """Captured tensors for (L, S): 8 head slopes, a relative-position table of L + S - 1
    entries (the variants index it from S - 1), document ids per batch row."""
    rng = np.random.default_rng(seed)
    return {"slopes": (rng.random(8) * 0.5 + 0.1).astype(np.float32),
            "table": rng.standard_normal(L + S - 1).astype(np.float32),
            "doc": np.sort(rng.integers(0, 4, (B, max(L, S))), axis=1).astype(np.int64)}


@pytest.mark.parametrize("head_dim", [64, 80, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_head_dims_and_ragged_lengths(head_dim, dtype):
    compare(arrays(seed=5, B=1, L=300, S=300, E=head_dim), captured_for(300, 300, B=1),
            "rel_bias", dtype)


def test_gqa_value_dim_and_scale():
    compare(arrays(seed=6, Hq=8, Hk=2, L=160, S=160, E=64, Ev=96),
            captured_for(160, 160), "alibi", "bfloat16", gqa=True, scale=0.2, Hm=8)


def test_against_torch_compiled_flex_attention():
    """torch's Triton flex kernel (what users run) as the comparison, causal bf16."""
    arrs = arrays(seed=7, B=2, Hq=4, Hk=4, L=512, S=512, E=64)
    out, got = run(ember, EF, arrs, {}, "causal", "bfloat16")
    want = run(torch, TF, arrs, {}, "causal", "float64")[1]
    theirs = run(torch, TF, arrs, {}, "causal", "bfloat16", compiled=True)[1]
    judge(got, want, theirs, "bfloat16")


def test_ember_compile_on_cuda_matches_eager():
    arrs, cap = arrays(seed=8, L=128, S=128, E=64), captured_for(128, 128)
    eager = run(ember, EF, arrs, cap, "rel_bias", "float32")[1]
    compiled = run(ember, EF, arrs, cap, "rel_bias", "float32", compiled=True)[1]
    for a, b in zip(compiled, eager):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_block_mask_on_cuda_matches_torch():
    e = EF.create_block_mask(causal, 2, 1, 300, 200, device="cuda", BLOCK_SIZE=64)
    t = TF.create_block_mask(causal, 2, 1, 300, 200, device="cuda", BLOCK_SIZE=64)
    assert e.kv_num_blocks.is_cuda
    np.testing.assert_array_equal(e.to_dense().cpu().numpy(), t.to_dense().cpu().numpy())
    assert e.sparsity() == pytest.approx(t.sparsity())
    q = ember.zeros(2, 2, 300, 16, device="cuda")
    k = ember.zeros(2, 2, 200, 16, device="cuda")
    with pytest.raises(RuntimeError, match="same device"):
        EF.flex_attention(q, k, k, block_mask=e.to("cpu"))
