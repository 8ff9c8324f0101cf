"""MultiheadAttention (every mask kind and option) and the Transformer modules against torch
with the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_compare import pair, randn, run_both
from oracle import assert_same, to_torch

import ember

E, HEADS, L, S, N = 8, 2, 3, 4, 2


def _bool(*shape, seed=0, p=0.3):
    m = np.random.default_rng(seed).uniform(size=shape) < p
    m[..., 0] = False  # every query keeps one key: no fully masked row (NaN in both)
    return ember.tensor(m)


def _float(*shape, seed=0):
    return randn(*shape, seed=seed, requires_grad=False)


MASKS = {  # name -> (key_padding_mask, attn_mask) makers
    "none": (None, None),
    "attn_bool_2d": (None, lambda: _bool(L, S)),
    "attn_float_2d": (None, lambda: _float(L, S)),
    "attn_bool_3d": (None, lambda: _bool(N * HEADS, L, S)),
    "attn_float_3d": (None, lambda: _float(N * HEADS, L, S)),
    "kpm_bool": (lambda: _bool(N, S, seed=1), None),
    "kpm_float": (lambda: _float(N, S, seed=1), None),
    "both_bool": (lambda: _bool(N, S, seed=1), lambda: _bool(L, S)),
    "both_float": (lambda: _float(N, S, seed=1), lambda: _float(N * HEADS, L, S)),
}


def _mha_call(kpm, am, **kw):
    def call(m, q, k, v):
        lib = ember if isinstance(m, ember.nn.Module) else torch
        conv = (lambda t: t) if lib is ember else to_torch
        return m(q, k, v, key_padding_mask=None if kpm is None else conv(kpm),
                 attn_mask=None if am is None else conv(am), **kw)
    return call


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha_masks(mask, need_weights, average):
    kpm_f, am_f = MASKS[mask]
    kpm, am = kpm_f and kpm_f(), am_f and am_f()
    em, tm = pair("MultiheadAttention", E, HEADS)
    q, k, v = randn(L, N, E), randn(S, N, E, seed=1), randn(S, N, E, seed=2)
    run_both(em, tm, [q, k, v], call=_mha_call(kpm, am, need_weights=need_weights,
                                               average_attn_weights=average))


MHA_OPTIONS = [
    {"batch_first": True},
    {"bias": False},
    {"add_bias_kv": True},
    {"add_zero_attn": True},
    {"add_bias_kv": True, "add_zero_attn": True, "kdim": 5, "vdim": 3},
    {"kdim": 5, "vdim": 3, "batch_first": True},
    {"dropout": 0.0, "batch_first": True, "bias": False},
]


@pytest.mark.parametrize("opts", MHA_OPTIONS, ids=[str(o) for o in MHA_OPTIONS])
@pytest.mark.parametrize("mask", ["none", "both_bool", "both_float"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_options(opts, mask, need_weights):
    kpm_f, am_f = MASKS[mask]
    kpm, am = kpm_f and kpm_f(), am_f and am_f()
    em, tm = pair("MultiheadAttention", E, HEADS, **opts)
    kd, vd = opts.get("kdim", E), opts.get("vdim", E)
    bf = opts.get("batch_first", False)
    shp = (lambda n, d: (N, n, d)) if bf else (lambda n, d: (n, N, d))
    q, k, v = randn(*shp(L, E)), randn(*shp(S, kd), seed=1), randn(*shp(S, vd), seed=2)
    run_both(em, tm, [q, k, v], call=_mha_call(kpm, am, need_weights=need_weights))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_self_attention_and_causal(batch_first, need_weights):
    em, tm = pair("MultiheadAttention", E, HEADS, batch_first=batch_first)
    x = randn(N, L, E) if batch_first else randn(L, N, E)
    causal = ember.nn.Transformer.generate_square_subsequent_mask(L, dtype=ember.float64)
    tcausal = to_torch(causal)

    def call(m, x):
        mask = causal if isinstance(m, ember.nn.Module) else tcausal
        return m(x, x, x, attn_mask=mask, is_causal=True, need_weights=need_weights)
    run_both(em, tm, [x], call=call)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        em(x, x, x, is_causal=True)


@pytest.mark.parametrize("mask", ["none", "attn_bool_3d_unbatched", "kpm"])
def test_mha_unbatched(mask):
    em, tm = pair("MultiheadAttention", E, HEADS, kdim=5, vdim=3)
    kpm = _bool(S, seed=1) if mask == "kpm" else None
    am = _bool(HEADS, L, S) if mask == "attn_bool_3d_unbatched" else None
    run_both(em, tm, [randn(L, E), randn(S, 5, seed=1), randn(S, 3, seed=2)],
             call=_mha_call(kpm, am))


def test_mha_dropout_only_in_training():
    em, tm = pair("MultiheadAttention", E, HEADS, dropout=0.5)
    q = randn(L, N, E)
    run_both(em, tm, [q], call=lambda m, x: m(x, x, x), train=False)
    em.train()
    w1 = em(q, q, q)[1]
    w2 = em(q, q, q)[1]
    assert not bool((w1 == w2).all())


BAD_MHA = [
    ("4-D query", lambda: [randn(1, L, N, E), randn(S, N, E), randn(S, N, E)], {}),
    ("2-D key for 3-D query", lambda: [randn(L, N, E), randn(S, E), randn(S, N, E)], {}),
    ("1-D padding mask", lambda: [randn(L, N, E)] * 3, {"key_padding_mask": _bool(S)}),
    ("bad 2-D attn_mask", lambda: [randn(L, N, E)] * 3, {"attn_mask": _bool(L, L + 1)}),
    ("bad 3-D attn_mask", lambda: [randn(L, N, E)] * 3, {"attn_mask": _bool(N, L, L)}),
    ("4-D attn_mask", lambda: [randn(L, N, E)] * 3, {"attn_mask": _bool(1, 1, L, L)}),
    ("int mask", lambda: [randn(L, N, E)] * 3,
     {"attn_mask": ember.zeros(L, L, dtype=ember.int64)}),
    ("wrong embed dim", lambda: [randn(L, N, E + 2)] * 3, {}),
    ("key/value shapes", lambda: [randn(L, N, E), randn(S, N, E), randn(S + 1, N, E)], {}),
    ("padding mask shape", lambda: [randn(L, N, E)] * 3, {"key_padding_mask": _bool(N, L + 1)}),
]


@pytest.mark.parametrize("case", BAD_MHA, ids=[c[0] for c in BAD_MHA])
def test_mha_bad_inputs(case):
    _, make, kw = case
    em, tm = pair("MultiheadAttention", E, HEADS)
    args = make()
    with pytest.raises(Exception) as te:
        tm(*to_torch(args), **to_torch(kw))
    with pytest.raises(type(te.value)):
        em(*args, **kw)


def test_mha_bad_constructor():
    for args in [(0, 2), (8, 0), (8, 3)]:
        with pytest.raises(Exception) as te:
            torch.nn.MultiheadAttention(*args)
        with pytest.raises(type(te.value)):
            ember.nn.MultiheadAttention(*args)


# ---------------------------------------------------------------------- transformer
LAYER_OPTS = [
    {},
    {"norm_first": True, "activation": "gelu"},
    {"batch_first": True, "bias": False},
    {"activation": "GELU-module", "layer_norm_eps": 1e-3},
    {"activation": "callable", "norm_first": True, "batch_first": True},
]


def _layer_kwargs(opts):
    kw = dict(opts)
    act = kw.get("activation")
    if act == "GELU-module":
        return {**kw, "activation": ember.nn.GELU()}, {**kw, "activation": torch.nn.GELU()}
    if act == "callable":
        return {**kw, "activation": lambda x: x.tanh()}, {**kw, "activation": torch.tanh}
    return kw, kw


def _pair_layer(name, opts, *args):
    ekw, tkw = _layer_kwargs(opts)
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, dropout=0.0, **tkw).double()
    em = getattr(ember.nn, name)(*args, dropout=0.0, **ekw).double()
    assert list(em.state_dict()) == list(tm.state_dict())
    assert repr(em) == repr(tm)
    from nn_compare import copy_state
    copy_state(tm, em)
    return em, tm


def _masks(kind, tgt_len, src_len):
    if kind == "none":
        return None, None
    if kind == "causal":
        return ember.nn.Transformer.generate_square_subsequent_mask(
            tgt_len, dtype=ember.float64), None
    return _bool(tgt_len, src_len), _bool(N, src_len, seed=2)


def _conv(x, lib):
    return x if lib is ember or x is None else to_torch(x)


@pytest.mark.parametrize("opts", LAYER_OPTS, ids=[str(o) for o in LAYER_OPTS])
@pytest.mark.parametrize("masks", ["none", "causal", "bool"])
def test_encoder_layer_and_encoder(opts, masks):
    bf = opts.get("batch_first", False)
    x = randn(N, S, E) if bf else randn(S, N, E)
    am, kpm = _masks(masks, S, S)
    em, tm = _pair_layer("TransformerEncoderLayer", opts, E, HEADS, 16)

    def call_layer(m, x):
        lib = ember if isinstance(m, ember.nn.Module) else torch
        return m(x, src_mask=_conv(am, lib), src_key_padding_mask=_conv(kpm, lib),
                 is_causal=masks == "causal")
    run_both(em, tm, [x], call=call_layer)
    enc_e = ember.nn.TransformerEncoder(em, 2, norm=ember.nn.LayerNorm(E).double())
    enc_t = torch.nn.TransformerEncoder(tm, 2, norm=torch.nn.LayerNorm(E).double(),
                                        enable_nested_tensor=False)
    from nn_compare import copy_state
    copy_state(enc_t, enc_e)

    def call_enc(m, x):
        lib = ember if isinstance(m, ember.nn.Module) else torch
        return m(x, mask=_conv(am, lib), src_key_padding_mask=_conv(kpm, lib))
    for train in (True, False):
        run_both(enc_e, enc_t, [x], call=call_enc, train=train)


@pytest.mark.parametrize("opts", LAYER_OPTS[:3], ids=[str(o) for o in LAYER_OPTS[:3]])
@pytest.mark.parametrize("masks", ["none", "causal", "bool"])
def test_decoder_layer_and_decoder(opts, masks):
    bf = opts.get("batch_first", False)
    tgt = randn(N, L, E) if bf else randn(L, N, E)
    mem = randn(N, S, E, seed=3) if bf else randn(S, N, E, seed=3)
    tm_mask, tkpm = _masks(masks, L, L)
    mm, mkpm = (None, None) if masks != "bool" else (_bool(L, S, seed=4), _bool(N, S, seed=5))
    em, tm = _pair_layer("TransformerDecoderLayer", opts, E, HEADS, 16)

    def call(m, tgt, mem):
        lib = ember if isinstance(m, ember.nn.Module) else torch
        return m(tgt, mem, tgt_mask=_conv(tm_mask, lib), memory_mask=_conv(mm, lib),
                 tgt_key_padding_mask=_conv(tkpm, lib),
                 memory_key_padding_mask=_conv(mkpm, lib))
    run_both(em, tm, [tgt, mem], call=call)
    dec_e, dec_t = ember.nn.TransformerDecoder(em, 2), torch.nn.TransformerDecoder(tm, 2)
    run_both(dec_e, dec_t, [tgt, mem], call=call)


@pytest.mark.parametrize("batch_first", [False, True])
def test_full_transformer(batch_first):
    em, tm = pair("Transformer", E, HEADS, 2, 1, 16, 0.0, batch_first=batch_first)
    src = randn(N, S, E) if batch_first else randn(S, N, E)
    tgt = randn(N, L, E, seed=1) if batch_first else randn(L, N, E, seed=1)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(L, dtype=ember.float64)

    def call(m, src, tgt):
        lib = ember if isinstance(m, ember.nn.Module) else torch
        return m(src, tgt, tgt_mask=_conv(mask, lib))
    run_both(em, tm, [src, tgt], call=call)
    run_both(em, tm, [src[0] if batch_first else src[:, 0], tgt[0] if batch_first
                      else tgt[:, 0]], call=call, train=False)  # unbatched
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        em(src, randn(N + 1, L, E) if batch_first else randn(L, N + 1, E))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt"):
        em(src, tgt[..., :4])


def test_square_subsequent_mask_and_bad_activation():
    assert_same(ember.nn.Transformer.generate_square_subsequent_mask(4),
                torch.nn.Transformer.generate_square_subsequent_mask(4))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        ember.nn.TransformerEncoderLayer(E, HEADS, activation="tanh")


def test_encoder_layer_repr_and_flags():
    e = ember.nn.TransformerEncoderLayer(E, HEADS, 16, activation="gelu")
    t = torch.nn.TransformerEncoderLayer(E, HEADS, 16, activation="gelu")
    assert repr(e) == repr(t)
    assert e.activation_relu_or_gelu == t.activation_relu_or_gelu == 2
    assert ember.nn.TransformerEncoderLayer(E, HEADS).activation_relu_or_gelu == 1
