"""FlexAttention (``ember.nn.attention.flex_attention``) on CPU against PyTorch 2.13's.

Forward values and log-sum-exp against torch's CPU ``flex_attention`` (eager; it has no
backward on CPU); gradients of query, key, value and captured tensors against the same
attention written densely in torch ops (scores, score_mod, mask, softmax, product), which the
forward test ties to torch's flex_attention. The mods are written once against a module ``m``
(torch or ember) so both libraries run the same user code. Then the BlockMask API against
torch's, bad inputs (exception types and messages), and ``ember.compile``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.attention.flex_attention as TF
from compile_util import fresh_compiler  # noqa: F401 (autouse fixture)

import ember
import ember.nn.attention.flex_attention as EF

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


# ---------------------------------------------------------------------- the attention variants
def causal(b, h, q, kv):
    return q >= kv


def sliding(window):
    def sliding_window(b, h, q, kv):
        return (q >= kv) & (q - kv <= window)
    return sliding_window


def prefix_lm(prefix):
    def prefix_mask(b, h, q, kv):
        return (q >= kv) | (kv < prefix)
    return prefix_mask


def documents(doc):
    def document_mask(b, h, q, kv):
        return (doc[b, q] == doc[b, kv]) & (q >= kv)
    return document_mask


def alibi(slopes):
    def alibi_bias(s, b, h, q, kv):
        return s + slopes[h] * (kv - q)
    return alibi_bias


def softcap(m, cap=4.0):
    def tanh_softcap(s, b, h, q, kv):
        return cap * m.tanh(s / cap)
    return tanh_softcap


def rel_bias(table):
    """A bias per relative position q - kv, from a table of 2 * S - 1 entries (L == S)."""
    centre = (table.shape[0] - 1) // 2

    def relative_bias(s, b, h, q, kv):
        return s + table[q - kv + centre]
    return relative_bias


B, H, L, S, E = 2, 2, 72, 72, 16   # lengths not multiples of the 32-wide blocks
BLOCK = 32


def captured(rng):
    """Captured tensors as numpy: per-head slopes, a relative-position table, document ids."""
    doc = np.sort(rng.integers(0, 3, (B, L)), axis=1).astype(np.int64)
    return {"slopes": (rng.random(4) * 0.5 + 0.1).astype(np.float32),
            "table": rng.standard_normal(L + S - 1).astype(np.float32), "doc": doc}


def variant(name, m, cap):
    """(mask_mod or None, score_mod or None) of a named variant over captured tensors ``cap``
    (tensors of library ``m``)."""
    table = {
        "none": lambda: (None, None),
        "causal": lambda: (causal, None),
        "sliding_window": lambda: (sliding(20), None),
        "prefix_lm": lambda: (prefix_lm(24), None),
        "document": lambda: (documents(cap["doc"]), None),
        "alibi": lambda: (causal, alibi(cap["slopes"])),
        "softcap": lambda: (None, softcap(m)),
        "rel_bias": lambda: (causal, rel_bias(cap["table"])),
    }
    return table[name]()


VARIANTS = ["none", "causal", "sliding_window", "prefix_lm", "document", "alibi", "softcap",
            "rel_bias"]


def arrays(seed=0, B=B, Hq=H, Hk=H, L=L, S=S, E=E, Ev=None):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32)
            for s in ((B, Hq, L, E), (B, Hk, S, E), (B, Hk, S, Ev or E))]


def lib_tensors(m, arrs, grad=False, dtype="float32"):
    out = []
    for a in arrs:
        t = m.tensor(a)
        if t.dtype.is_floating_point:
            t = t.to(getattr(m, dtype))
            if grad:
                t.requires_grad_(True)
        out.append(t)
    return out


def run_torch_flex(arrs, cap, name, dtype="float32", Bm=B, Hm=H, gqa=False, scale=None):
    q, k, v = lib_tensors(torch, arrs, dtype=dtype)
    c = {key: torch.tensor(val) for key, val in cap.items()}
    mask_mod, score_mod = variant(name, torch, c)
    bm = None if mask_mod is None else TF.create_block_mask(
        mask_mod, Bm, Hm, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=BLOCK)
    return TF.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=gqa,
                             scale=scale, return_aux=TF.AuxRequest(lse=True))


def run_ember_flex(arrs, cap, name, dtype="float32", Bm=B, Hm=H, gqa=False, scale=None,
                   grad=False):
    q, k, v = lib_tensors(ember, arrs, grad=grad, dtype=dtype)
    c = {key: ember.tensor(val) for key, val in cap.items()}
    if grad:
        for key in ("slopes", "table"):
            c[key].requires_grad_(True)
    mask_mod, score_mod = variant(name, ember, c)
    bm = None if mask_mod is None else EF.create_block_mask(
        mask_mod, Bm, Hm, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=BLOCK)
    out, aux = EF.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, enable_gqa=gqa,
                                 scale=scale, return_aux=EF.AuxRequest(lse=True))
    return out, aux, (q, k, v), c


def dense_torch(arrs, cap, name, gqa=False, scale=None):
    """The attention written out in torch ops (differentiable): out, lse and the leaves."""
    q, k, v = lib_tensors(torch, arrs, grad=True)
    c = {key: torch.tensor(val) for key, val in cap.items()}
    for key in ("slopes", "table"):
        if key in c:
            c[key].requires_grad_(True)
    mask_mod, score_mod = variant(name, torch, c)
    G = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ kk.transpose(-2, -1) * scale
    Bq, Hq, Lq, Sk = s.shape
    b = torch.arange(Bq, dtype=torch.int32).view(-1, 1, 1, 1)
    h = torch.arange(Hq, dtype=torch.int32).view(1, -1, 1, 1)
    qi = torch.arange(Lq, dtype=torch.int32).view(1, 1, -1, 1)
    ki = torch.arange(Sk, dtype=torch.int32).view(1, 1, 1, -1)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, ki)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, qi, ki).expand(s.shape), float("-inf"))
    lse = s.logsumexp(-1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
    return p @ vv, lse, (q, k, v), c


def host(x):
    return x.detach().double().numpy() if isinstance(x, (ember.Tensor, torch.Tensor)) else x


def close(e, t, rtol=1e-5, atol=2e-5):
    e, t = host(e), host(t)
    assert e.shape == t.shape
    np.testing.assert_allclose(e, t, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------- forward vs torch flex
@pytest.mark.parametrize("name", VARIANTS)
def test_forward_and_lse_match_torch_flex_attention(name):
    arrs, cap = arrays(), captured(np.random.default_rng(1))
    t_out, t_aux = run_torch_flex(arrs, cap, name)
    e_out, e_aux, _, _ = run_ember_flex(arrs, cap, name)
    assert e_out.dtype == ember.float32 and e_aux.lse.dtype == ember.float32
    assert e_aux.max_scores is None
    close(e_out, t_out)
    close(e_aux.lse, t_aux.lse)


@pytest.mark.parametrize("name", VARIANTS)
def test_gradients_match_dense_torch(name):
    arrs, cap = arrays(seed=2), captured(np.random.default_rng(3))
    e_out, e_aux, e_leaves, e_cap = run_ember_flex(arrs, cap, name, grad=True)
    t_out, t_lse, t_leaves, t_cap = dense_torch(arrs, cap, name)
    close(e_out, t_out)
    g = np.random.default_rng(4).standard_normal(t_out.shape).astype(np.float32)
    (e_out * ember.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    for e, t in zip(e_leaves, t_leaves):
        close(e.grad, t.grad, atol=1e-4, rtol=1e-4)
    for key in ("slopes", "table"):
        if e_cap[key].grad is not None or t_cap[key].grad is not None:
            close(e_cap[key].grad, t_cap[key].grad, atol=1e-4, rtol=1e-4)


def test_lse_gradient_matches_dense_torch():
    arrs, cap = arrays(seed=5), captured(np.random.default_rng(6))
    e_out, e_aux, e_leaves, _ = run_ember_flex(arrs, cap, "sliding_window", grad=True)
    t_out, t_lse, t_leaves, _ = dense_torch(arrs, cap, "sliding_window")
    close(e_aux.lse, t_lse)
    (e_aux.lse.sum() + e_out.sum()).backward()
    (t_lse.sum() + t_out.sum()).backward()
    for e, t in zip(e_leaves, t_leaves):
        close(e.grad, t.grad, atol=1e-4, rtol=1e-4)


def test_gqa_with_value_dim_and_scale():
    arrs = arrays(seed=7, Hq=4, Hk=2, Ev=24)
    cap = captured(np.random.default_rng(8))
    t_out, t_aux = run_torch_flex(arrs, cap, "alibi", Hm=4, gqa=True, scale=0.3)
    e_out, e_aux, leaves, c = run_ember_flex(arrs, cap, "alibi", Hm=4, gqa=True, scale=0.3,
                                             grad=True)
    assert tuple(e_out.shape) == (B, 4, L, 24)
    close(e_out, t_out)
    close(e_aux.lse, t_aux.lse)
    d_out, _, d_leaves, d_cap = dense_torch(arrs, cap, "alibi", gqa=True, scale=0.3)
    e_out.sum().backward()
    d_out.sum().backward()
    for e, t in zip([*leaves, c["slopes"]], [*d_leaves, d_cap["slopes"]]):
        close(e.grad, t.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("head_dim", [64, 80, 128])
def test_head_dims(head_dim):
    arrs = arrays(seed=9, B=1, L=40, S=56, E=head_dim)
    t_out, t_aux = run_torch_flex(arrs, {}, "causal", Bm=1)
    e_out, e_aux, _, _ = run_ember_flex(arrs, {}, "causal", Bm=1)
    close(e_out, t_out)
    close(e_aux.lse, t_aux.lse)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_inputs_compute_in_float32(dtype):
    arrs, cap = arrays(seed=10, E=64), captured(np.random.default_rng(11))
    t_out, t_aux = run_torch_flex(arrs, cap, "rel_bias", dtype=dtype)
    e_out, e_aux, _, _ = run_ember_flex(arrs, cap, "rel_bias", dtype=dtype)
    assert e_out.dtype == getattr(ember, dtype) and e_aux.lse.dtype == ember.float32
    tol = 2e-2 if dtype == "bfloat16" else 2e-3
    close(e_out, t_out, rtol=tol, atol=tol)
    close(e_aux.lse, t_aux.lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("first", [8, 16])  # 16: a whole row of blocks is skipped
def test_rows_with_no_allowed_key_give_zeros_and_minus_inf(first):
    arrs = arrays(seed=12, L=40, S=40)

    def late(b, h, q, kv):  # rows below `first` see nothing
        return (q >= first) & (kv <= q)
    qt, kt, vt = lib_tensors(torch, arrs)
    tb = TF.create_block_mask(late, None, None, 40, 40, device="cpu", BLOCK_SIZE=16)
    t_out, t_lse = TF.flex_attention(qt, kt, vt, block_mask=tb,
                                     return_aux=TF.AuxRequest(lse=True))
    q, k, v = lib_tensors(ember, arrs, grad=True)
    eb = EF.create_block_mask(late, None, None, 40, 40, device="cpu", BLOCK_SIZE=16)
    e_out, e_aux = EF.flex_attention(q, k, v, block_mask=eb,
                                     return_aux=EF.AuxRequest(lse=True, max_scores=True))
    close(e_out, t_out)
    lse = e_aux.lse.detach().numpy()
    assert np.isneginf(lse[:, :, :first]).all() and np.isfinite(lse[:, :, first:]).all()
    close(e_aux.lse, t_lse.lse)
    assert np.isneginf(e_aux.max_scores.detach().numpy()[:, :, :first]).all()
    e_out.sum().backward()  # no NaN from the empty rows
    assert np.isfinite(q.grad.numpy()).all() and (q.grad.numpy()[:, :, :first] == 0).all()


def test_return_lse_and_max_scores():
    arrs = arrays(seed=13)
    q, k, v = lib_tensors(ember, arrs)
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        EF._WARNED.discard("return_lse")
        out, lse = EF.flex_attention(q, k, v, return_lse=True)
    t_out, t_lse = dense_torch(arrs, {}, "none")[:2]
    close(out, t_out)
    close(lse, t_lse)
    out2, aux = EF.flex_attention(q, k, v, return_aux=EF.AuxRequest(max_scores=True))
    assert aux.lse is None
    qt, kt = torch.tensor(arrs[0]), torch.tensor(arrs[1])
    close(aux.max_scores, (qt @ kt.transpose(-2, -1) / 4).amax(-1))
    assert isinstance(EF.flex_attention(q, k, v), ember.Tensor)


def test_blocks_skip_and_mask_mod_only_on_partial_blocks():
    calls = []

    def spy(b, h, q, kv):
        calls.append((q.shape[-2], kv.shape[-1]))
        return q >= kv
    bm = EF.create_block_mask(causal, 1, 1, 64, 64, device="cpu", BLOCK_SIZE=16)
    bm.mask_mod = spy
    q, k, v = lib_tensors(ember, arrays(seed=14, B=1, Hq=1, Hk=1, L=64, S=64))
    EF.flex_attention(q, k, v, block_mask=bm)
    assert calls == [(16, 16)] * 4  # only the 4 diagonal blocks; full blocks skip mask_mod


def test_steps_hold_a_block_row_of_scores_not_the_whole_matrix():
    """Each step's scores are (B, H, Q block, at most KV_CHUNK columns), with or without a
    BlockMask (the reference path's memory is O(block x chunk) per step, not L x S)."""
    from ember.nn.attention import _flex_eager
    shapes = []

    def spy(s, b, h, q, kv):
        shapes.append(tuple(s.shape))
        return s
    q, k, v = lib_tensors(ember, arrays(seed=17, B=1, Hq=1, Hk=1, L=300, S=2100))
    with ember.no_grad():
        EF.flex_attention(q, k, v, score_mod=spy)
    assert max(s[2] for s in shapes) == _flex_eager.Q_TILE
    assert max(s[3] for s in shapes) == _flex_eager.KV_CHUNK and len(shapes) == 3 * 3
    shapes.clear()
    bm = EF.create_block_mask(causal, 1, 1, 300, 2100, device="cpu", BLOCK_SIZE=64)
    with ember.no_grad():
        EF.flex_attention(q, k, v, score_mod=spy, block_mask=bm)
    assert max(s[2] for s in shapes) == 64 and max(s[3] for s in shapes) <= 320


@pytest.mark.parametrize("L,S", [(1, 300), (3, 130)])
def test_decoding_shapes_and_float64(L, S):
    arrs = [a.astype(np.float64) for a in arrays(seed=18, L=L, S=S)]
    t_out, t_aux = run_torch_flex(arrs, {}, "none", dtype="float64")
    e_out, e_aux, _, _ = run_ember_flex(arrs, {}, "none", dtype="float64")
    assert e_out.dtype == ember.float64
    close(e_out, t_out, rtol=1e-10, atol=1e-12)
    close(e_aux.lse, t_aux.lse, rtol=1e-10, atol=1e-12)


def test_batch_broadcast_key_value_with_block_mask():
    arrs = arrays(seed=15)
    arrs[1], arrs[2] = arrs[1][:1], arrs[2][:1]
    t_out, t_aux = run_torch_flex(arrs, {}, "causal")
    e_out, e_aux, _, _ = run_ember_flex(arrs, {}, "causal")
    close(e_out, t_out)
    close(e_aux.lse, t_aux.lse)


# ---------------------------------------------------------------------- BlockMask API
MASKS = {"causal": causal, "sliding": sliding(20), "prefix": prefix_lm(24),
         "and": EF.and_masks(causal, sliding(9)), "or": EF.or_masks(sliding(5), prefix_lm(3))}


def torch_mask(name):
    return {"and": TF.and_masks(causal, sliding(9)),
            "or": TF.or_masks(sliding(5), prefix_lm(3))}.get(name, MASKS[name])


def as_np(t):
    return t.numpy() if isinstance(t, (ember.Tensor, torch.Tensor)) else t


@pytest.mark.parametrize("name", list(MASKS))
@pytest.mark.parametrize("separate", [True, False])
def test_block_mask_matches_torch(name, separate):
    e = EF.create_block_mask(MASKS[name], 2, 1, 72, 50, device="cpu", BLOCK_SIZE=(16, 32),
                             separate_full_blocks=separate)
    t = TF.create_block_mask(torch_mask(name), 2, 1, 72, 50, device="cpu",
                             BLOCK_SIZE=(16, 32), separate_full_blocks=separate)
    np.testing.assert_array_equal(as_np(e.to_dense()), as_np(t.to_dense()))
    for attr in EF.BlockMask._TENSOR_ATTRS:
        a, b = getattr(e, attr), getattr(t, attr)
        assert (a is None) == (b is None), attr
        if a is not None:
            assert a.dtype == ember.int32
            np.testing.assert_array_equal(as_np(a), as_np(b), err_msg=attr)
    assert e.shape == t.shape and e.BLOCK_SIZE == t.BLOCK_SIZE
    assert e.sparsity() == pytest.approx(t.sparsity())
    assert repr(e) == repr(t).replace("torch.Size", "ember.Size")
    assert str(e) == str(t)
    assert e.to_string(grid_size=-1) == t.to_string(grid_size=-1)
    np.testing.assert_array_equal(as_np(EF.create_mask(MASKS[name], 2, 1, 72, 50, "cpu")),
                                  as_np(TF.create_mask(torch_mask(name), 2, 1, 72, 50, "cpu")))


def test_block_mask_indexing_adjust_and_errors():
    e = EF.create_block_mask(causal, 2, 3, 96, 96, device="cpu", BLOCK_SIZE=32)
    t = TF.create_block_mask(causal, 2, 3, 96, 96, device="cpu", BLOCK_SIZE=32)
    for index in (0, (1, 2), (slice(0, 1), slice(1, 3)), (-1,), (0, 1, slice(1, 2))):
        a, b = e[index], t[index]
        assert tuple(a.kv_num_blocks.shape) == tuple(b.kv_num_blocks.shape)
        np.testing.assert_array_equal(as_np(a.to_dense()), as_np(b.to_dense()))
    for new in ((64, 64), (40, 70)):
        np.testing.assert_array_equal(as_np(e._adjust(*new).to_dense()),
                                      as_np(t._adjust(*new).to_dense()))
        assert e._adjust(*new).shape == t._adjust(*new).shape
    s = EF.create_block_mask(causal, None, None, 300, 300, device="cpu")
    assert s.shape == (1, 1, 300, 300) and s.BLOCK_SIZE == (128, 128)
    assert "(0, 0)" in s.to_string() and "sparsity" in str(s)
    q = ember.zeros(2, 3, 96, 8)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        EF.flex_attention(q, q, q, block_mask=e[0])
    with pytest.raises(AssertionError, match="Expected 4 or 5 positional args, got 3"):
        EF.create_block_mask(lambda b, h, q: q, 1, 1, 8, 8, device="cpu")
    with pytest.raises(AssertionError, match="create-block_mask requires a mask_mod"):
        EF.create_block_mask(lambda s, b, h, q, kv: s, 1, 1, 8, 8, device="cpu")
    for m, tm in ((ember, torch),):
        for bad in (lambda b, h, q, kv: q - kv, lambda b, h, q, kv: (q >= kv).float()):
            with pytest.raises(AssertionError) as ee:
                EF.create_block_mask(bad, 1, 1, 8, 8, device="cpu")
            with pytest.raises(AssertionError) as te:
                TF.create_block_mask(bad, 1, 1, 8, 8, device="cpu")
            assert str(ee.value).split("got ")[0] == str(te.value).split("got ")[0]
    with pytest.raises(RuntimeError, match="All inputs should be callable mask_mods"):
        EF.and_masks(causal, 3)
    score_mask = EF.create_mask(lambda s, b, h, q, kv: ember.where(q >= kv, s, -math.inf),
                                1, 1, 6, 6, "cpu")
    np.testing.assert_array_equal(score_mask.numpy()[0, 0], np.tril(np.ones((6, 6), bool)))


def test_from_kv_blocks_and_noop_mask():
    num = ember.tensor([[[1, 2]]], dtype=ember.int32)
    idx = ember.tensor([[[[1, 0], [0, 1]]]], dtype=ember.int32)
    e = EF.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=16)
    t = TF.BlockMask.from_kv_blocks(torch.tensor(num.numpy()), torch.tensor(idx.numpy()),
                                    BLOCK_SIZE=16)
    assert e.shape == t.shape == (1, 1, 32, 32)
    np.testing.assert_array_equal(e.q_indices.numpy(), t.q_indices.numpy())
    np.testing.assert_array_equal(e.q_num_blocks.numpy(), t.q_num_blocks.numpy())
    assert e.mask_mod is EF.noop_mask
    # the blocks alone decide (noop mask_mod): block (0, 0) is skipped. (torch's eager CPU
    # path applies only mask_mod and ignores the block lists, so the reference is dense.)
    arrs = [a[:, :2] for a in arrays(seed=16, B=1, L=32, S=32)]
    q, k, v = lib_tensors(ember, arrs)
    out = EF.flex_attention(q, k, v, block_mask=e)
    qt, kt, vt = lib_tensors(torch, arrs)
    allowed = torch.ones(32, 32, dtype=torch.bool)
    allowed[:16, :16] = False
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed)
    close(out, ref)


# ---------------------------------------------------------------------- bad inputs
def _pair(*shapes, dtype="float32"):
    return [(ember.zeros(*s).to(getattr(ember, dtype)), torch.zeros(*s).to(getattr(torch, dtype)))
            for s in shapes]


BAD = {
    "embed_dim": (((1, 2, 8, 4), (1, 2, 8, 5), (1, 2, 8, 4)), {}),
    "not_4d": (((2, 8, 4), (2, 8, 4), (2, 8, 4)), {}),
    "heads": (((1, 2, 8, 4), (1, 1, 8, 4), (1, 1, 8, 4)), {}),
    "gqa_heads": (((1, 3, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4)), {"enable_gqa": True}),
    "batch": (((2, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4)), {}),
    "aux_and_lse": (((1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4)),
                    {"return_lse": True, "return_aux": "lse"}),
    "backend": (((1, 2, 8, 4),) * 3, {"kernel_options": {"BACKEND": "FOO"}}),
    "backend_and_force": (((1, 2, 8, 4),) * 3,
                          {"kernel_options": {"BACKEND": "AUTO",
                                              "FORCE_USE_FLEX_ATTENTION": True}}),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_inputs_raise_like_torch(name):
    shapes, kw = BAD[name]
    pairs = _pair(*shapes)
    ekw, tkw = dict(kw), dict(kw)
    if kw.get("return_aux") == "lse":
        ekw["return_aux"], tkw["return_aux"] = EF.AuxRequest(lse=True), TF.AuxRequest(lse=True)
    with pytest.raises(Exception) as te:
        TF.flex_attention(*[p[1] for p in pairs], **tkw)
    with pytest.raises(type(te.value)) as ee:
        EF.flex_attention(*[p[0] for p in pairs], **ekw)
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("lengths", [(16, 16), (4, 4), (8, 16)])
def test_block_mask_for_other_lengths(lengths):
    (q, qt), = _pair((1, 2, 8, 4))
    e = EF.create_block_mask(causal, 1, 1, *lengths, device="cpu", BLOCK_SIZE=8)
    t = TF.create_block_mask(causal, 1, 1, *lengths, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(ValueError) as te:
        TF.flex_attention(qt, qt, qt, block_mask=t)
    with pytest.raises(ValueError) as ee:
        EF.flex_attention(q, q, q, block_mask=e)
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("bad", ["int", "float"])
def test_mask_mod_returning_non_bool(bad):
    (q, qt), = _pair((1, 2, 8, 4))

    def mod(b, h, qi, kv):
        return (qi - kv) if bad == "int" else (qi >= kv).float()
    e = EF.create_block_mask(causal, 1, 1, 8, 8, device="cpu", BLOCK_SIZE=8)
    t = TF.create_block_mask(causal, 1, 1, 8, 8, device="cpu", BLOCK_SIZE=8)
    e.mask_mod = t.mask_mod = mod
    with pytest.raises(RuntimeError) as te:
        TF.flex_attention(qt, qt, qt, block_mask=t)
    with pytest.raises(RuntimeError) as ee:
        EF.flex_attention(q, q, q, block_mask=e)
    # torch's index dtype is int64 (Long) where ember's is int32 (Int)
    assert str(ee.value).rsplit(" ", 1)[0] == str(te.value).rsplit(" ", 1)[0]


def test_mismatched_devices_and_lengths():
    q = ember.zeros(1, 2, 8, 4)
    with pytest.raises(ValueError, match="same device type"):
        EF.flex_attention(q, q.to("meta"), q)
    with pytest.raises(RuntimeError):
        EF.flex_attention(q, q, ember.zeros(1, 2, 9, 4))
    bm = EF.create_block_mask(causal, 1, 1, 8, 8, device="meta", BLOCK_SIZE=8)
    with pytest.raises(RuntimeError, match="Expect q/k/v and block_mask to be on the same "
                                           "device but got cpu and meta"):
        EF.flex_attention(q, q, q, block_mask=bm)


# ---------------------------------------------------------------------- ember.compile
def test_flex_attention_under_compile_matches_eager_with_gradients():
    arrs, cap = arrays(seed=20, L=40, S=40), captured(np.random.default_rng(21))
    table = ember.tensor(cap["table"][:79]).requires_grad_(True)
    bm = EF.create_block_mask(causal, None, None, 40, 40, device="cpu", BLOCK_SIZE=16)

    def fn(q, k, v):
        return EF.flex_attention(q, k, v, score_mod=rel_bias(table), block_mask=bm)
    cf = ember.compile(fn)
    grads = []
    for run in (cf, fn):
        q, k, v = lib_tensors(ember, arrs, grad=True)
        table.grad = None
        out = run(q, k, v)
        out.sum().backward()
        grads.append([out] + [t.grad for t in (q, k, v, table)])
    entry = cf._entries[-1]
    assert entry.graph is not None, "flex_attention broke the graph"
    for a, b in zip(*grads):
        close(a, b, atol=1e-5)


@pytest.mark.xfail(strict=True, reason="issue 15/16: the fused flex_attention kernel is not "
                                       "generated yet (the dense ops compile to several kernels)")
def test_compiled_flex_attention_forward_is_one_kernel():
    q, k, v = lib_tensors(ember, arrays(seed=22, L=40, S=40))
    bm = EF.create_block_mask(causal, None, None, 40, 40, device="cpu", BLOCK_SIZE=16)
    cf = ember.compile(lambda q, k, v: EF.flex_attention(q, k, v, block_mask=bm))
    with ember.no_grad():
        cf(q, k, v)
    assert len(cf._entries[-1].run.plan.kernels) == 1
