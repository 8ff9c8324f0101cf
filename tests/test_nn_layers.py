"""Layer modules against torch: same weights, same inputs, train and eval mode; outputs,
input gradients, parameter gradients and buffers must match (float64 unless noted)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_compare import pair, randint, randn, run_both
from oracle import assert_same, to_torch

import ember

F64, F32 = ember.float64, ember.float32


def _x(*shape, seed=0, scale=1.0):
    return lambda dt: [randn(*shape, dtype=dt, seed=seed, scale=scale)]


def _xs(*shapes):
    return lambda dt: [randn(*s, dtype=dt, seed=k) for k, s in enumerate(shapes)]


# (name, args, kwargs, inputs(dtype) -> list, modes); every case runs in each listed mode
LAYERS = [
    ("Identity", (3,), {"unused": 1}, _x(2, 3), "te"),
    ("Linear", (3, 4), {}, _x(2, 5, 3), "t"),
    ("Linear", (3, 4), {"bias": False}, _x(3), "t"),
    ("Linear", (3, 4), {}, _x(0, 3), "t"),
    ("Bilinear", (3, 4, 5), {}, _xs((6, 3), (6, 4)), "t"),
    ("Bilinear", (3, 4, 5), {"bias": False}, _xs((2, 6, 3), (2, 6, 4)), "t"),
    ("Conv1d", (4, 6, 3), {}, _x(2, 4, 9), "t"),
    ("Conv1d", (4, 6, 3), {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}, _x(2, 4, 11),
     "t"),
    ("Conv1d", (4, 6, 4), {"padding": "same", "padding_mode": "circular"}, _x(2, 4, 9), "t"),
    ("Conv1d", (4, 6, 3), {"padding": 2, "padding_mode": "reflect", "bias": False}, _x(4, 7),
     "t"),
    ("Conv2d", (3, 4, 3), {}, _x(2, 3, 7, 6), "t"),
    ("Conv2d", (4, 4, (3, 2)), {"stride": (2, 1), "padding": (1, 0), "groups": 4},
     _x(2, 4, 7, 6), "t"),
    ("Conv2d", (3, 4, 3), {"padding": "same", "dilation": 2, "padding_mode": "replicate"},
     _x(2, 3, 7, 6), "t"),
    ("Conv2d", (3, 4, 3), {"padding": "valid"}, _x(3, 5, 5), "t"),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "circular"}, _x(2, 3, 5, 5), "t"),
    ("Conv3d", (2, 4, 3), {"padding": 1, "stride": 2}, _x(2, 2, 5, 6, 5), "t"),
    ("ConvTranspose1d", (4, 6, 3), {"stride": 2, "output_padding": 1}, _x(2, 4, 5), "t"),
    ("ConvTranspose1d", (4, 6, 3), {"groups": 2, "dilation": 2, "padding": 1}, _x(4, 5), "t"),
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1},
     _x(2, 3, 4, 5), "t"),
    ("ConvTranspose2d", (4, 2, (2, 3)), {"groups": 2, "bias": False}, _x(2, 4, 3, 3), "t"),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, _x(1, 2, 3, 2, 3), "t"),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, _x(2, 3, 9), "t"),
    ("MaxPool1d", (2,), {"return_indices": True, "ceil_mode": True}, _x(2, 3, 9), "t"),
    ("MaxPool2d", (3,), {"stride": 2, "dilation": 1, "ceil_mode": True}, _x(2, 3, 8, 7), "t"),
    ("MaxPool2d", ((2, 3),), {"return_indices": True, "padding": 1}, _x(3, 6, 7), "t"),
    ("MaxPool3d", (2,), {}, _x(1, 2, 4, 4, 5), "t"),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, _x(2, 3, 9),
     "t"),
    ("AvgPool2d", (3,), {"stride": 2, "ceil_mode": True}, _x(2, 3, 8, 7), "t"),
    ("AvgPool2d", (2,), {"divisor_override": 3}, _x(3, 6, 6), "t"),
    ("AvgPool3d", (2,), {"padding": 1}, _x(1, 2, 4, 4, 5), "t"),
    ("AdaptiveAvgPool1d", (4,), {}, _x(2, 3, 9), "t"),
    ("AdaptiveAvgPool2d", ((3, None),), {}, _x(2, 3, 7, 5), "t"),
    ("AdaptiveAvgPool3d", (2,), {}, _x(1, 2, 5, 4, 3), "t"),
    ("AdaptiveMaxPool1d", (4, True), {}, _x(2, 3, 9), "t"),
    ("AdaptiveMaxPool2d", (3,), {}, _x(2, 3, 7, 5), "t"),
    ("LPPool1d", (2, 3), {"stride": 2}, _x(2, 3, 9), "t"),
    ("LPPool2d", (3, 2), {}, _x(2, 3, 6, 4), "t"),
    ("BatchNorm1d", (3,), {}, _x(5, 3), "te"),
    ("BatchNorm1d", (3,), {"momentum": None}, _x(4, 3, 6), "te"),
    ("BatchNorm1d", (3,), {"affine": False, "track_running_stats": False}, _x(4, 3, 6), "te"),
    ("BatchNorm2d", (3,), {"momentum": 0.3, "bias": False}, _x(2, 3, 4, 5), "te"),
    ("BatchNorm3d", (2,), {"eps": 1e-3}, _x(2, 2, 3, 4, 3), "te"),
    ("InstanceNorm1d", (3,), {}, _x(2, 3, 6), "te"),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, _x(2, 3, 6), "te"),
    ("InstanceNorm2d", (3,), {"affine": True}, _x(3, 4, 5), "te"),
    ("InstanceNorm3d", (2,), {"track_running_stats": True}, _x(2, 2, 3, 4, 3), "te"),
    ("LayerNorm", (5,), {}, _x(2, 3, 5), "t"),
    ("LayerNorm", ((3, 5),), {"bias": False, "eps": 1e-3}, _x(2, 3, 5), "t"),
    ("LayerNorm", ([5],), {"elementwise_affine": False}, _x(2, 5), "t"),
    ("RMSNorm", (5,), {}, _x(2, 3, 5), "t"),
    ("RMSNorm", ((3, 5),), {"eps": 1e-3, "elementwise_affine": False}, _x(2, 3, 5), "t"),
    ("GroupNorm", (2, 4), {}, _x(3, 4, 5), "t"),
    ("GroupNorm", (3, 6), {"affine": False}, _x(2, 6, 2, 3), "t"),
    ("LocalResponseNorm", (3,), {"alpha": 0.1, "k": 2.0}, _x(2, 5, 4), "t"),
    ("Dropout", (0.0,), {}, _x(3, 4), "t"),
    ("Dropout", (0.5,), {}, _x(3, 4), "e"),
    ("Dropout1d", (0.3,), {}, _x(2, 3, 4), "e"),
    ("Dropout2d", (0.0,), {}, _x(2, 3, 4, 4), "te"),
    ("Dropout3d", (0.5,), {}, _x(2, 3, 2, 2, 2), "e"),
    ("AlphaDropout", (0.5,), {}, _x(3, 4), "e"),
    ("FeatureAlphaDropout", (0.0,), {}, _x(2, 3, 4), "t"),
    ("Flatten", (), {}, _x(2, 3, 4, 5), "t"),
    ("Flatten", (0, 2), {}, _x(2, 3, 4, 5), "t"),
    ("Unflatten", (1, (2, -1)), {}, _x(2, 6, 5), "t"),
    ("Upsample", (), {"scale_factor": 2}, _x(2, 3, 4, 5), "t"),
    ("Upsample", ((5, 7),), {"mode": "bilinear", "align_corners": False}, _x(2, 3, 4, 5), "t"),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "linear", "align_corners": True},
     _x(2, 3, 4), "t"),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, _x(1, 2, 3, 2), "t"),
    ("UpsamplingBilinear2d", ((5, 6),), {}, _x(1, 2, 3, 4), "t"),
    ("PixelShuffle", (2,), {}, _x(2, 8, 3, 4), "t"),
    ("PixelUnshuffle", (2,), {}, _x(2, 2, 4, 6), "t"),
    ("ChannelShuffle", (2,), {}, _x(2, 6, 3), "t"),
    ("ZeroPad1d", ((1, 2),), {}, _x(2, 3, 4), "t"),
    ("ZeroPad2d", (1,), {}, _x(2, 3, 4), "t"),
    ("ZeroPad3d", ((1, 0, 2, 1, 0, 1),), {}, _x(1, 2, 3, 4, 2), "t"),
    ("ConstantPad1d", (2, 3.5), {}, _x(2, 3, 4), "t"),
    ("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, _x(2, 3, 4), "t"),
    ("ConstantPad3d", (1, 0.5), {}, _x(1, 2, 3, 2, 2), "t"),
    ("ReflectionPad1d", ((2, 1),), {}, _x(2, 3, 4), "t"),
    ("ReflectionPad2d", (1,), {}, _x(2, 3, 4, 4), "t"),
    ("ReflectionPad3d", (1,), {}, _x(1, 2, 3, 3, 3), "t"),
    ("ReplicationPad1d", (2,), {}, _x(2, 3, 4), "t"),
    ("ReplicationPad2d", ((1, 2, 0, 1),), {}, _x(3, 4, 4), "t"),
    ("ReplicationPad3d", (1,), {}, _x(1, 2, 3, 3, 3), "t"),
    ("CircularPad1d", (2,), {}, _x(2, 3, 4), "t"),
    ("CircularPad2d", ((1, 2, 0, 1),), {}, _x(1, 3, 4, 4), "t"),
    ("CircularPad3d", (1,), {}, _x(1, 2, 3, 3, 3), "t"),
    ("Fold", ((4, 5), 2), {}, _x(2, 12, 12), "t"),
    ("Unfold", (2,), {"padding": 1, "stride": 2}, _x(2, 3, 4, 5), "t"),
    ("PairwiseDistance", (), {"p": 1.0, "keepdim": True}, _xs((4, 5), (4, 5)), "t"),
    ("CosineSimilarity", (), {"dim": 0}, _xs((4, 5), (4, 5)), "t"),
]

ACTIVATIONS = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("SiLU", (), {}), ("Mish", (), {}), ("SELU", (), {}),
    ("Sigmoid", (), {}), ("Tanh", (), {}), ("LogSigmoid", (), {}), ("Softsign", (), {}),
    ("Tanhshrink", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}),
    ("GELU", (), {}), ("GELU", ("tanh",), {}), ("ELU", (0.7,), {}), ("CELU", (1.3,), {}),
    ("LeakyReLU", (0.2,), {}), ("Hardtanh", (-0.5, 1.5), {}), ("Threshold", (0.3, -2.0), {}),
    ("Softplus", (2.0, 3.0), {}), ("Hardshrink", (0.7,), {}), ("Softshrink", (0.4,), {}),
    ("PReLU", (), {}), ("PReLU", (3,), {"init": 0.1}), ("GLU", (2,), {}), ("GLU", (), {}),
    ("Softmax", (1,), {}), ("Softmin", (-1,), {}), ("LogSoftmax", (0,), {}),
    ("Softmax2d", (), {}), ("RReLU", (0.1, 0.3), {}),
]
INPLACE = ["ReLU", "ReLU6", "SiLU", "Mish", "SELU", "Hardswish", "Hardsigmoid", "ELU", "CELU",
           "LeakyReLU", "Hardtanh", "Threshold"]


def _ids(table):
    return [f"{c[0]}-{k}" for k, c in enumerate(table)]


@pytest.mark.parametrize("case", LAYERS, ids=_ids(LAYERS))
def test_layer_matches_torch(case):
    name, args, kwargs, inputs, modes = case
    for mode in modes:
        em, tm = pair(name, *args, **kwargs)
        assert repr(em) == repr(tm)
        run_both(em, tm, inputs(F64), train=mode == "t")


@pytest.mark.parametrize("case", ACTIVATIONS, ids=_ids(ACTIVATIONS))
def test_activation_matches_torch(case):
    name, args, kwargs = case
    em, tm = pair(name, *args, **kwargs)
    assert repr(em) == repr(tm)
    x = randn(2, 3, 4, 2, scale=2.0)
    # RReLU samples its slopes while training; compare it in eval mode
    run_both(em, tm, [x], train=name != "RReLU")


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_activation(name):
    args = {"Threshold": (0.1, 0.0), "Hardtanh": (-1.0, 1.0)}.get(name, ())
    em, tm = pair(name, *args, inplace=True)
    assert repr(em) == repr(tm)
    x = randn(3, 4, scale=2.0)
    def call(m, x):
        y = x * 1.0  # a non-leaf input is overwritten and returned; gradients flow through it
        return m(y), y
    out_e, _ = run_both(em, tm, [x], call=call)
    assert out_e[0] is out_e[1]


@pytest.mark.parametrize("name,args,inputs", [
    ("Conv2d", (3, 4, 3), _x(2, 3, 6, 6)),
    ("BatchNorm2d", (3,), _x(2, 3, 4, 4)),
    ("LayerNorm", (6,), _x(2, 6)),
    ("Linear", (6, 3), _x(4, 6)),
    ("GroupNorm", (3, 6), _x(2, 6, 3)),
])
def test_float32(name, args, inputs):
    em, tm = pair(name, *args, dtype=F32)
    run_both(em, tm, inputs(F32), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,args,shape", [
    ("Linear", (6, 3), (4, 6)), ("LayerNorm", (6,), (2, 6)), ("Conv1d", (2, 3, 3), (2, 2, 5)),
])
@pytest.mark.parametrize("dt", [ember.float16, ember.bfloat16], ids=str)
def test_half_forward(name, args, shape, dt):
    em, tm = pair(name, *args, dtype=dt)
    x = randn(*shape, dtype=dt, requires_grad=False)
    tol = 2e-2 if dt is ember.bfloat16 else 2e-3
    assert_same(em(x), tm(to_torch(x)), rtol=tol, atol=tol)


# ---------------------------------------------------------------------- specific behaviour
def test_conv_transpose_output_size():
    for nd, shape, size in [(1, (2, 3, 5), [10]), (2, (2, 3, 4, 5), [2, 2, 8, 10]),
                            (2, (3, 4, 5), [7, 9])]:
        name = f"ConvTranspose{nd}d"
        em, tm = pair(name, 3, 2, 3, stride=2, padding=1)
        run_both(em, tm, [randn(*shape), size], call=lambda m, x, s: m(x, output_size=s))
        with pytest.raises(ValueError, match="requested an output size"):
            em(randn(*shape), output_size=[s + 9 for s in size[-nd:]])


def _pool_unpool(lib, nd):
    class PoolUnpool(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = getattr(lib.nn, f"MaxPool{nd}d")(2, return_indices=True)
            self.unpool = getattr(lib.nn, f"MaxUnpool{nd}d")(2)

        def forward(self, x):
            return self.unpool(*self.pool(x))
    return PoolUnpool()


@pytest.mark.parametrize("nd,shape", [(1, (2, 3, 8)), (2, (2, 3, 6, 4)), (3, (1, 2, 4, 4, 4))])
def test_max_unpool_roundtrip(nd, shape):
    em, tm = _pool_unpool(ember, nd), _pool_unpool(torch, nd)
    assert repr(em) == repr(tm)
    run_both(em, tm, [randn(*shape)])


def test_batchnorm_running_stats_over_steps():
    for kwargs in [{}, {"momentum": None}, {"momentum": 0.5, "affine": False}]:
        em, tm = pair("BatchNorm2d", 3, **kwargs)
        for step in range(4):
            run_both(em, tm, [randn(4, 3, 2, 3, seed=step, scale=step + 1.0)])
        assert int(em.num_batches_tracked) == 4
        run_both(em, tm, [randn(2, 3, 2, 3, seed=9)], train=False)
        assert int(em.num_batches_tracked) == 4  # eval leaves the buffers alone


def test_batchnorm_one_value_per_channel():
    em, tm = pair("BatchNorm1d", 3)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        tm(torch.ones(1, 3))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        em(ember.ones(1, 3))
    run_both(em, tm, [randn(1, 3)], train=False)


def test_batchnorm_reset_and_legacy_state_dict():
    em, tm = pair("BatchNorm1d", 3)
    em(randn(4, 3))
    em.reset_running_stats()
    assert em.running_mean.tolist() == [0, 0, 0] and em.running_var.tolist() == [1, 1, 1]
    assert int(em.num_batches_tracked) == 0
    sd = {k: v for k, v in em.state_dict().items() if k != "num_batches_tracked"}
    # checkpoints from before num_batches_tracked existed load in both libraries
    assert repr(em.load_state_dict(sd)) == repr(tm.load_state_dict(
        {k: v for k, v in tm.state_dict().items() if k != "num_batches_tracked"}))


def test_instancenorm_rejects_running_stats_when_untracked():
    em, _ = pair("InstanceNorm1d", 3)
    from ember import ones, zeros
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        em.load_state_dict({"running_mean": zeros(3), "running_var": ones(3)})


def test_embedding():
    idx = randint(10, 3, 4)
    em, tm = pair("Embedding", 10, 5)
    run_both(em, tm, [idx])
    em, tm = pair("Embedding", 10, 5, padding_idx=-3)
    assert em.padding_idx == 7
    idx = ember.tensor([[7, 1, 7], [2, 7, 3]])
    run_both(em, tm, [idx])
    em, tm = pair("Embedding", 10, 5, scale_grad_by_freq=True)
    run_both(em, tm, [ember.tensor([1, 1, 2, 1])])
    em, tm = pair("Embedding", 10, 5, max_norm=0.5, norm_type=1.0)
    run_both(em, tm, [ember.tensor([[1, 3], [3, 4]])])
    assert_same(em.weight, tm.weight)  # the rows read were renormalised in place


def test_embedding_init_and_from_pretrained():
    e = ember.nn.Embedding(100, 4, padding_idx=3)
    assert e.weight[3].tolist() == [0.0] * 4
    w = randn(6, 3, requires_grad=False)
    emb = ember.nn.Embedding.from_pretrained(w, padding_idx=1)
    assert not emb.weight.requires_grad and emb.padding_idx == 1
    assert emb.weight.tolist() == w.tolist()  # the padding row is not zeroed
    emb = ember.nn.Embedding.from_pretrained(w, freeze=False)
    assert emb.weight.requires_grad
    with pytest.raises(AssertionError, match="2-dimensional"):
        ember.nn.Embedding.from_pretrained(randn(6))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        ember.nn.Embedding(5, 2, padding_idx=5)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    em, tm = pair("EmbeddingBag", 10, 4, mode=mode)
    run_both(em, tm, [randint(10, 3, 5)])
    idx, off = ember.tensor([1, 2, 4, 5, 4, 3, 2, 9]), ember.tensor([0, 3, 3, 6])
    run_both(em, tm, [idx, off])  # one empty bag
    em, tm = pair("EmbeddingBag", 10, 4, mode=mode, include_last_offset=True, padding_idx=2)
    run_both(em, tm, [idx, ember.tensor([0, 3, 5, 8])])
    if mode == "sum":
        w = randn(8)
        run_both(em, tm, [idx, ember.tensor([0, 3, 5, 8]), w])
    else:
        with pytest.raises(NotImplementedError, match="per_sample_weights"):
            em(idx, ember.tensor([0, 3, 5, 8]), randn(8))


def test_dropout_statistics_in_training():
    ember.manual_seed(0)
    x = ember.ones(400, 50)
    for name, p in [("Dropout", 0.3), ("Dropout", 0.8)]:
        y = getattr(ember.nn, name)(p)(x)
        zero = float((y == 0).double().mean())
        assert abs(zero - p) < 0.02
        assert np.allclose(y.numpy()[y.numpy() != 0], 1 / (1 - p))
    y = ember.nn.Dropout2d(0.5)(ember.ones(30, 40, 3, 3)).numpy()
    per_channel = y.reshape(30, 40, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))  # whole channels
    assert abs((per_channel[..., 0] == 0).mean() - 0.5) < 0.06
    assert ember.nn.Dropout(1.0)(x).abs().sum().item() == 0
    z = ember.randn(200, 200)  # alpha dropout keeps zero mean and unit variance
    a = ember.nn.AlphaDropout(0.4)(z).numpy()
    assert abs(a.mean()) < 0.03 and abs(a.std() - 1) < 0.03
    dropped = np.unique(a, return_counts=True)[1].max() / a.size  # all at one value
    assert abs(dropped - 0.4) < 0.02
    d = ember.nn.Dropout(0.5).eval()
    assert d(x) is x or bool((d(x) == x).all())


def test_prelu_per_channel_gradient():
    em, tm = pair("PReLU", 4, init=0.3)
    run_both(em, tm, [randn(2, 4, 3)])
    with pytest.raises(RuntimeError):
        em(randn(2, 3, 3))


def test_upsample_and_softmax_module_defaults():
    up = ember.nn.Upsample(scale_factor=(2, 3))
    assert up.scale_factor == (2.0, 3.0)
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        ember.nn.Softmax()(randn(2, 3))


# ---------------------------------------------------------------------- bad arguments
BAD_CTORS = [
    ("Conv2d", (3, 4, 3), {"groups": 2}),
    ("Conv2d", (4, 3, 3), {"groups": 2}),
    ("Conv2d", (4, 4, 3), {"groups": 0}),
    ("Conv2d", (3, 4, 3), {"padding": "full"}),
    ("Conv2d", (3, 4, 3), {"padding": "same", "stride": 2}),
    ("Conv1d", (3, 4, 3), {"padding_mode": "mirror"}),
    ("ConvTranspose2d", (3, 4, 3), {"padding_mode": "reflect"}),
    ("GroupNorm", (3, 4), {}),
    ("Dropout", (1.5,), {}),
    ("Dropout2d", (-0.1,), {}),
    ("Unflatten", (1, 6), {}),
    ("Unflatten", (1, (2, 3.0)), {}),
    ("Hardtanh", (1.0, -1.0), {}),
    ("Embedding", (5, 2), {"padding_idx": -6}),
    ("EmbeddingBag", (5, 2), {"padding_idx": 7}),
]


@pytest.mark.parametrize("case", BAD_CTORS, ids=_ids(BAD_CTORS))
def test_bad_constructor_arguments(case):
    name, args, kwargs = case
    with pytest.raises(Exception) as te:
        getattr(torch.nn, name)(*args, **kwargs)
    with pytest.raises(type(te.value)) as ee:
        getattr(ember.nn, name)(*args, **kwargs)
    assert _canon(str(ee.value)) == _canon(str(te.value))


def _canon(msg: str) -> str:
    """A message with its set literals sorted: both libraries print Python sets, whose order
    depends on the process's hash seed."""
    import re
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", ")))
                  + "}", msg)


BAD_INPUTS = [
    ("Conv2d", (3, 4, 3), (2, 5, 6, 6)),       # wrong channel count
    ("Conv2d", (3, 4, 3), (2, 3, 6)),           # wrong ndim... unbatched needs (C, H, W)
    ("Conv1d", (3, 4, 3), (2, 3, 4, 5, 6)),
    ("Linear", (3, 4), (2, 5)),
    ("BatchNorm1d", (3,), (2, 3, 4, 5)),
    ("BatchNorm2d", (3,), (2, 3, 4)),
    ("BatchNorm3d", (3,), (2, 3, 4, 5)),
    ("BatchNorm2d", (3,), (2, 4, 4, 5)),
    ("InstanceNorm1d", (3,), (3,)),
    ("InstanceNorm2d", (3,), (2, 3, 4, 5, 6)),
    ("InstanceNorm1d", (3,), {"affine": True, "_shape": (2, 4, 5)}),
    ("LayerNorm", (5,), (2, 4)),
    ("GroupNorm", (2, 4), (2, 6, 3)),
    ("Softmax2d", (), (3, 4)),
    ("CircularPad2d", (1,), (3, 4)),
    ("MaxPool2d", (5,), (1, 3, 3)),
    ("ConvTranspose2d", (3, 4, 3), (2, 3)),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=_ids(BAD_INPUTS))
def test_bad_inputs(case):
    name, args, shape = case
    kwargs = {}
    if isinstance(shape, dict):
        kwargs = {k: v for k, v in shape.items() if k != "_shape"}
        shape = shape["_shape"]
    em, tm = pair(name, *args, **kwargs)
    x = randn(*shape)
    with pytest.raises(Exception) as te:
        tm(to_torch(x))
    with pytest.raises(type(te.value)):
        em(x)


# ---------------------------------------------------------------------- default initialisation
INIT = [  # (name, args, kwargs, parameter, expected bound or std, distribution)
    ("Linear", (400, 300), {}, "weight", 1 / 400 ** 0.5, "uniform"),
    ("Linear", (400, 300), {}, "bias", 1 / 400 ** 0.5, "uniform"),
    ("Conv2d", (16, 64, 5), {}, "weight", 1 / (16 * 25) ** 0.5, "uniform"),
    ("Conv2d", (16, 64, 5), {}, "bias", 1 / (16 * 25) ** 0.5, "uniform"),
    ("ConvTranspose2d", (32, 16, 4), {"groups": 2}, "weight", 1 / (8 * 16) ** 0.5, "uniform"),
    ("Conv1d", (8, 300, 3), {"groups": 4}, "bias", 1 / (2 * 3) ** 0.5, "uniform"),
    ("Bilinear", (40, 30, 50), {}, "weight", 1 / 40 ** 0.5, "uniform"),
    ("Embedding", (300, 200), {}, "weight", 1.0, "normal"),
    ("LSTM", (50, 64), {}, "weight_ih_l0", 1 / 8, "uniform"),
    ("GRU", (50, 64), {}, "bias_hh_l0", 1 / 8, "uniform"),
    ("RNNCell", (50, 100), {}, "weight_hh", 0.1, "uniform"),
    ("MultiheadAttention", (64, 4), {}, "in_proj_weight", (6 / (192 + 64)) ** 0.5, "uniform"),
    ("MultiheadAttention", (64, 4), {"add_bias_kv": True}, "bias_k", (2 / 65) ** 0.5, "normal"),
]


@pytest.mark.parametrize("case", INIT, ids=_ids(INIT))
def test_default_initialisation(case):
    name, args, kwargs, pname, scale, dist = case
    ember.manual_seed(0)
    w = getattr(ember.nn, name)(*args, **kwargs).get_parameter(pname).detach().numpy().ravel()
    n = w.size
    if dist == "uniform":
        assert w.min() >= -scale and w.max() <= scale
        assert w.max() > scale * (1 - 20 / n) and w.min() < -scale * (1 - 20 / n)
        std = scale / 3 ** 0.5
    else:
        std = scale
    assert abs(w.mean()) < 5 * std / n ** 0.5
    assert abs(w.std() - std) < 0.05 * std + 5 * std / n ** 0.5


def test_zero_init_of_attention_biases_and_norms():
    mha = ember.nn.MultiheadAttention(8, 2)
    assert not mha.in_proj_bias.detach().numpy().any()
    assert not mha.out_proj.bias.detach().numpy().any()
    for m in (ember.nn.LayerNorm(4), ember.nn.BatchNorm1d(4), ember.nn.GroupNorm(2, 4)):
        assert m.weight.tolist() == [1.0] * 4 and m.bias.tolist() == [0.0] * 4
    t = ember.nn.Transformer(8, 2, 1, 1, 16)
    for p in t.parameters():  # Transformer re-initialises every matrix Xavier-uniform
        if p.dim() > 1:
            bound = (6 / (p.shape[0] + p.shape[1])) ** 0.5
            assert float(p.abs().max()) <= bound


def test_factory_kwargs():
    for m in (ember.nn.Linear(3, 4, dtype=F64), ember.nn.Conv2d(2, 3, 3, dtype=F64),
              ember.nn.BatchNorm1d(3, dtype=F64, device="cpu"), ember.nn.LSTM(2, 3, dtype=F64),
              ember.nn.Embedding(4, 2, dtype=F64), ember.nn.LayerNorm(3, dtype=F64)):
        assert all(p.dtype is F64 for p in m.parameters())
    assert ember.nn.BatchNorm1d(3, dtype=F64).num_batches_tracked.dtype is ember.int64
