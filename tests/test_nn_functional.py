"""ember.nn.functional against torch.nn.functional: forward, backward, options, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from oracle import assert_same, check, raises_like, rand, to_torch

import ember
import ember.nn.functional as EF

TF = torch.nn.functional
FLOATS = [ember.float32, ember.float64]
HALVES = [ember.float16, ember.bfloat16]


@pytest.fixture(autouse=True)
def _seeded():
    """Random ops (dropout, rrelu, gumbel) draw from ember's generator: make runs repeatable."""
    ember.manual_seed(0)


def F(m):
    """The functional module of library ``m`` (ember or torch)."""
    return EF if m is ember else TF


def fcheck(fn, *args, **kw):
    """check() on ``fn(F, *args)`` written once for both libraries."""
    return check(lambda m, *a: fn(F(m), *a), None, *args, **kw)


def same_warnings(we, wt):
    """The warnings ember gave are torch's (ember prints its Size as ember.Size)."""
    assert [str(w.message) for w in we] == [str(w.message).replace("torch.", "ember.")
                                            for w in wt]


def fraises(fn, *args, match=None):
    """Both libraries raise the same exception type on ``fn(F, *args)``."""
    targs = to_torch(args)
    return raises_like(lambda: fn(EF, *args), lambda: fn(TF, *targs), match)


def longs(*values):
    return ember.tensor(list(values), dtype=ember.int64)


def test_functional_namespace():
    for name in EF.__all__:
        assert callable(getattr(EF, name)), name
        assert hasattr(TF, name), f"ember.nn.functional.{name} is not a torch name"
    for name in ["relu", "relu_", "selu", "selu_", "celu", "celu_", "rrelu", "rrelu_", "threshold",
                 "threshold_", "hardshrink", "prelu", "softmax", "log_softmax", "logsumexp",
                 "bilinear", "embedding", "embedding_renorm_", "dropout", "dropout_",
                 "alpha_dropout", "feature_dropout", "feature_alpha_dropout", "batch_norm",
                 "layer_norm", "native_layer_norm", "group_norm", "native_group_norm",
                 "instance_norm", "rms_norm", "cosine_similarity", "pairwise_distance", "pdist",
                 "cdist"]:
        assert callable(getattr(ember, name)), f"ember.{name}"


# ====================================================================== activations
ACTS = [
    ("relu", {}), ("relu6", {}), ("hardtanh", {}), ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("elu", {}), ("elu", {"alpha": 0.7}), ("selu", {}), ("celu", {"alpha": 1.3}),
    ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("gelu", {}),
    ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}), ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 1.5}), ("hardswish", {}), ("hardsigmoid", {}),
    ("logsigmoid", {}), ("softsign", {}), ("tanhshrink", {}), ("hardshrink", {}),
    ("hardshrink", {"lambd": 1.2}), ("softshrink", {}), ("softshrink", {"lambd": 0.3}),
    ("threshold", {"threshold": 0.5, "value": -2.0}), ("sigmoid", {}), ("tanh", {}),
    ("rrelu", {}), ("rrelu", {"lower": 0.2, "upper": 0.4}),
]
INPLACE = [(n, kw) for n, kw in ACTS if n in ("relu", "relu6", "hardtanh", "elu", "selu", "celu",
                                               "leaky_relu", "silu", "mish", "hardswish",
                                               "hardsigmoid", "threshold", "rrelu")]
ACT_IDS = [f"{n}-{'-'.join(map(str, kw.values()))}" for n, kw in ACTS]


@pytest.mark.parametrize("name,kw", ACTS, ids=ACT_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(3, 5), (), (0, 4), (2, 3, 4)])
def test_activation(name, kw, dtype, shape):
    x = rand(*shape, dtype=dtype, requires_grad=True, low=-4, high=4)
    fcheck(lambda f, x: getattr(f, name)(x, **kw), x)


# every kink of the table's functions, plus NaN and +-inf (gelu, silu, mish: torch returns NaN
# at +-inf from its vectorised kernel, so they get the finite points only)
KINKS = [-6.0, -3.0, -1.3, -1.0, -0.5, -0.3, 0.0, 0.3, 0.5, 1.0, 1.2, 1.3, 1.5, 2.0, 3.0, 6.0]
SPECIAL = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("name,kw", ACTS, ids=ACT_IDS)
def test_activation_kinks_and_specials(name, kw):
    pts = KINKS + ([] if name in ("gelu", "silu", "mish") else SPECIAL)
    x = ember.tensor(pts, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x: getattr(f, name)(x, **kw), x)


@pytest.mark.parametrize("name,kw", ACTS, ids=ACT_IDS)
@pytest.mark.parametrize("dtype", HALVES)
def test_activation_half(name, kw, dtype):
    x = rand(4, 6, dtype=dtype, low=-4, high=4)
    fcheck(lambda f, x: getattr(f, name)(x, **kw), x, grad=False)


@pytest.mark.parametrize("name,kw", INPLACE)
def test_activation_inplace(name, kw):
    a = rand(4, 5, dtype=ember.float64, requires_grad=True, low=-3, high=3)

    def fn(f, a):
        x = a * 1.0
        y = getattr(f, name)(x, inplace=True, **kw)
        assert y is x
        return y
    fcheck(fn, a)


@pytest.mark.parametrize("name", ["relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_",
                                  "rrelu_"])
def test_activation_underscore(name):
    a = rand(4, 5, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, a: getattr(f, name)(a * 1.0), a)


def test_activation_noncontiguous():
    x = rand(4, 6, dtype=ember.float64, noncontig=True).requires_grad_()
    for name, kw in ACTS:
        fcheck(lambda f, x, name=name, kw=kw: getattr(f, name)(x, **kw), x)


@pytest.mark.parametrize("name,kw", [("relu", {}), ("relu6", {}), ("hardtanh", {}),
                                     ("threshold", {"threshold": 1, "value": 20})])
def test_activation_ints(name, kw):
    x = rand(3, 4, dtype=ember.int64)
    fcheck(lambda f, x: getattr(f, name)(x, **kw), x)


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "gelu", "softplus", "silu", "hardswish",
                                  "mish", "logsigmoid"])
def test_activation_float_only(name):
    fraises(lambda f, x: getattr(f, name)(x), rand(3, dtype=ember.int64),
            match="not implemented for 'Long'")


@pytest.mark.parametrize("fn,match", [
    (lambda f, x: f.gelu(x, approximate="foo"), "approximate argument must be"),
    (lambda f, x: f.hardtanh(x, 2.0, 1.0), "min_val cannot be greater than max_val"),
    (lambda f, x: f.softshrink(x, -1.0), "lambda must be in range"),
    (lambda f, x: f.rrelu(x, 0.5, 0.1), "Lower bound should be less than or equal"),
])
def test_activation_errors(fn, match):
    fraises(fn, rand(3, 5), match=match)


def test_torch_namespace_activations():
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)
    for fn in [lambda m, x: m.relu(x), lambda m, x: x.relu(), lambda m, x: m.selu(x),
               lambda m, x: m.celu(x, 0.5), lambda m, x: m.threshold(x, 0.1, 3.0),
               lambda m, x: m.hardshrink(x, 0.4), lambda m, x: x.hardshrink(),
               lambda m, x: m.rrelu(x), lambda m, x: m.relu_(x * 1),
               lambda m, x: m.selu_(x * 1), lambda m, x: m.celu_(x * 1),
               lambda m, x: m.threshold_(x * 1, 0.0, -1.0), lambda m, x: (x * 1).relu_()]:
        check(fn, None, x)


def test_rrelu_training():
    x = rand(2000, dtype=ember.float64, requires_grad=True)
    y = EF.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().numpy()
    neg = x.detach().numpy() < 0
    assert np.all(slope[~neg] == 1)
    assert 0.1 <= slope[neg].min() and slope[neg].max() <= 0.3 and slope[neg].std() > 0.03
    y.backward(ember.ones_like(y))
    np.testing.assert_allclose(x.grad.numpy(), slope)


PRELU = [((3, 5), (5,)), ((3, 5), (1,)), ((2, 4, 3, 3), (4,)), ((5,), (1,)), ((), (1,)),
         ((2, 3, 4), ())]


@pytest.mark.parametrize("xs,ws", PRELU)
@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu(xs, ws, dtype):
    x = rand(*xs, dtype=dtype, requires_grad=True)
    w = rand(*ws, dtype=dtype, requires_grad=True, seed=3)
    fcheck(lambda f, x, w: f.prelu(x, w), x, w)
    check(lambda m, x, w: x.prelu(w), None, x, w)


@pytest.mark.parametrize("xs,ws", [((3, 5), (3,)), ((5,), (5,)), ((3, 5), (1, 5))])
def test_prelu_errors(xs, ws):
    fraises(lambda f, x, w: f.prelu(x, w), rand(*xs), rand(*ws))


@pytest.mark.parametrize("shape,dim", [((3, 4), -1), ((4, 3), 0), ((2, 6, 2), 1), ((2,), 0)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_glu(shape, dim, dtype):
    fcheck(lambda f, x: f.glu(x, dim), rand(*shape, dtype=dtype, requires_grad=True))


@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((3, 4), 2), ((), -1)])
def test_glu_errors(shape, dim):
    fraises(lambda f, x: f.glu(x, dim), rand(*shape))


# ====================================================================== softmax family
SOFTMAX_SHAPES = [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((4,), 0), ((), 0), ((0, 3), 1),
                  ((3, 0), 1)]


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape,dim", SOFTMAX_SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(name, shape, dim, dtype):
    x = rand(*shape, dtype=dtype, requires_grad=True, low=-5, high=5)
    fcheck(lambda f, x: getattr(f, name)(x, dim), x)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_namespace_and_dtype(name):
    x = rand(3, 4, requires_grad=True)
    check(lambda m, x: getattr(m, name)(x, 1), None, x)
    check(lambda m, x: getattr(x, name)(-1), None, x)
    check(lambda m, x: getattr(m, name)(x, 0, dtype=m.float64), None, x)
    check(lambda m, x: getattr(F(m), name)(x, 0, dtype=m.float64), None, x)
    check(lambda m, x: getattr(m, name)(x, 0, dtype=m.float64), None, rand(3, dtype=ember.int64))
    fraises(lambda f, x: getattr(f, name)(x, 0), rand(3, dtype=ember.int64),
            match="not implemented for 'Long'")
    fraises(lambda f, x: getattr(f, name)(x, 2), x, match="Dimension out of range")


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_softmax_implicit_dim(name, ndim):
    x = rand(*(2,) * ndim, dtype=ember.float64)
    with warnings.catch_warnings(record=True) as we:
        warnings.simplefilter("always")
        out_e = getattr(EF, name)(x)
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        out_t = getattr(TF, name)(to_torch(x))
    assert_same(out_e, out_t)
    same_warnings(we, wt)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALVES)
def test_softmax_half(name, dtype):
    fcheck(lambda f, x: getattr(f, name)(x, -1), rand(3, 7, dtype=dtype), grad=False)


SPECIAL_ROWS = [[1000.0, 1001.0, -1000.0], [-math.inf, 0.0, 1.0], [math.inf, 1.0, 2.0],
                [-math.inf, -math.inf, -math.inf], [math.nan, 1.0, 2.0], [-1e30, 1e30, 0.0]]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_stable(name):
    x = ember.tensor(SPECIAL_ROWS, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x: getattr(f, name)(x, 1), x)


LSE = [((3, 5), 1, False), ((3, 5), 0, True), ((2, 3, 4), (0, 2), False),
       ((2, 3, 4), [-1, 0], True), ((4,), 0, False), ((), 0, False), ((3, 0), 1, False),
       ((0, 3), 1, True)]


@pytest.mark.parametrize("shape,dim,keepdim", LSE)
@pytest.mark.parametrize("dtype", FLOATS)
def test_logsumexp(shape, dim, keepdim, dtype):
    x = rand(*shape, dtype=dtype, requires_grad=True, low=-5, high=5)
    check(lambda m, x: m.logsumexp(x, dim, keepdim), None, x)
    check(lambda m, x: x.logsumexp(dim, keepdim=keepdim), None, x)


def test_logsumexp_special():
    x = ember.tensor(SPECIAL_ROWS + [[math.inf, -math.inf, 0.0]], dtype=ember.float64,
                     requires_grad=True)
    check(lambda m, x: m.logsumexp(x, 1), None, x)
    check(lambda m, x: m.logsumexp(x, 1), None, rand(3, 4, dtype=ember.int64))
    check(lambda m, x: m.logsumexp(x, 1), None, rand(3, 4, dtype=ember.float16), grad=False)
    raises_like(lambda: ember.logsumexp(x, 2), lambda: torch.logsumexp(to_torch(x), 2),
                "Dimension out of range")


# ====================================================================== linear layers
LINEAR = [((3, 5), (4, 5), (4,)), ((3, 5), (4, 5), None), ((2, 3, 5), (4, 5), (4,)),
          ((5,), (4, 5), (4,)), ((3, 5), (5,), None), ((5,), (5,), None),
          ((0, 5), (4, 5), (4,)), ((3, 5), (4, 5), (3, 4)), ((3, 5), (4, 5), ())]


@pytest.mark.parametrize("xs,ws,bs", LINEAR)
@pytest.mark.parametrize("dtype", FLOATS)
def test_linear(xs, ws, bs, dtype):
    x = rand(*xs, dtype=dtype, requires_grad=True)
    w = rand(*ws, dtype=dtype, requires_grad=True, seed=1)
    b = None if bs is None else rand(*bs, dtype=dtype, requires_grad=True, seed=2)
    fcheck(lambda f, x, w, b: f.linear(x, w, b), x, w, b)


def test_linear_noncontig_half_and_double_backward():
    x = rand(3, 5, dtype=ember.float64, noncontig=True).requires_grad_()
    w = rand(5, 4, dtype=ember.float64, requires_grad=True).t()
    fcheck(lambda f, x, w: f.linear(x, w), x, w)
    for dt in HALVES:
        fcheck(lambda f, x, w: f.linear(x, w, w[:, 0]), rand(3, 4, dtype=dt), rand(4, 4, dtype=dt),
               grad=False)
    # second derivative through the backward rule (itself written with linear)
    x = rand(3, 4, dtype=ember.float64, requires_grad=True)
    w = rand(2, 4, dtype=ember.float64, requires_grad=True)

    def gradsum(m, x, w):
        y = F(m).linear(x, w).tanh().sum()
        gx, = m.autograd.grad(y, x, create_graph=True)
        return (gx * gx).sum()
    check(gradsum, None, x, w)


@pytest.mark.parametrize("xs,ws,bs,xd", [
    ((3, 5), (4, 4), None, None), ((3, 5), (4,), None, None), ((3, 5), (2, 3, 5), None, None),
    ((), (3, 5), None, None), ((3, 5), (4, 5), (3,), None), ((3, 5), (4, 5), None, "f64"),
])
def test_linear_errors(xs, ws, bs, xd):
    x = rand(*xs, dtype=ember.float64 if xd else ember.float32)
    b = None if bs is None else rand(*bs)
    fraises(lambda f, x, w, b: f.linear(x, w, b), x, rand(*ws), b)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x1s,x2s,bias", [((3, 5), (3, 4), True), ((2, 3, 5), (2, 3, 4), False),
                                          ((5,), (4,), True), ((0, 5), (0, 4), True)])
def test_bilinear(dtype, x1s, x2s, bias):
    x1 = rand(*x1s, dtype=dtype, requires_grad=True)
    x2 = rand(*x2s, dtype=dtype, requires_grad=True, seed=1)
    w = rand(2, 5, 4, dtype=dtype, requires_grad=True, seed=2)
    b = rand(2, dtype=dtype, requires_grad=True, seed=3) if bias else None
    fcheck(lambda f, x1, x2, w, b: f.bilinear(x1, x2, w, b), x1, x2, w, b)
    check(lambda m, x1, x2, w, b: m.bilinear(x1, x2, w, b), None, x1, x2, w, b)


@pytest.mark.parametrize("x1s,x2s,ws,bs", [((3, 5), (3, 4), (2, 5, 3), None),
                                           ((3, 5), (4, 4), (2, 5, 4), None),
                                           ((3, 5), (3, 3, 4), (2, 5, 4), None),
                                           ((3, 5), (3, 4), (2, 5, 4), (3,)),
                                           ((3, 5), (3, 4), (2, 4, 4), None)])
def test_bilinear_errors(x1s, x2s, ws, bs):
    b = None if bs is None else rand(*bs)
    fraises(lambda f, a, c, w, b: f.bilinear(a, c, w, b), rand(*x1s), rand(*x2s), rand(*ws), b)


# ====================================================================== embedding, one_hot
EMB = [{}, {"padding_idx": 2}, {"padding_idx": -1}, {"scale_grad_by_freq": True},
       {"padding_idx": 0, "scale_grad_by_freq": True}]


@pytest.mark.parametrize("kw", EMB)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("idx", [[[0, 2, 4], [2, 2, 1]], [3, 0, 3, 3], [], 4])
@pytest.mark.parametrize("path", ["numpy", "native"])  # the weight gradient's row scatter
def test_embedding(kw, dtype, idx, path, monkeypatch):
    monkeypatch.setenv("EMBER_EAGER_KERNELS", "0" if path == "numpy" else "1")
    w = rand(6, 3, dtype=dtype, requires_grad=True)
    i = ember.tensor(idx, dtype=ember.int64)
    fcheck(lambda f, i, w: f.embedding(i, w, **kw), i, w)


def test_embedding_int32_half_and_namespace():
    w = rand(5, 4, dtype=ember.float64, requires_grad=True)
    i = ember.tensor([[1, 4], [0, 1]], dtype=ember.int32)
    fcheck(lambda f, i, w: f.embedding(i, w, padding_idx=1), i, w)
    check(lambda m, w, i: m.embedding(w, i, 1, True), None, w, i)
    fcheck(lambda f, i, w: f.embedding(i, w), i, rand(5, 4, dtype=ember.float16), grad=False)


def test_embedding_double_backward():
    w = rand(5, 4, dtype=ember.float64, requires_grad=True)
    i = longs(1, 1, 3, 0)

    def fn(m, w, i):
        y = (F(m).embedding(i, w, padding_idx=0, scale_grad_by_freq=True) ** 2).sum()
        gw, = m.autograd.grad(y, w, create_graph=True)
        return (gw ** 3).sum()
    check(fn, None, w, i)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_embedding_max_norm(norm_type):
    w = rand(6, 3, dtype=ember.float64, low=-3, high=3)
    wt = to_torch(w)
    w.requires_grad_()
    wt.requires_grad_()
    i = longs(0, 2, 2, 5)
    out_e = EF.embedding(i, w, max_norm=1.5, norm_type=norm_type)
    out_t = TF.embedding(to_torch(i), wt, max_norm=1.5, norm_type=norm_type)
    assert_same(out_e, out_t)
    assert_same(w.detach(), wt.detach())  # the rows read were renormalised in place
    out_e.sum().backward()
    out_t.sum().backward()
    assert_same(w.grad, wt.grad)


@pytest.mark.parametrize("idx,kw", [([5], {}), ([-1], {}), ([1.0], {}), ([1], {"padding_idx": 7}),
                                    ([1], {"padding_idx": -7})])
def test_embedding_errors(idx, kw):
    i = ember.tensor(idx)
    fraises(lambda f, i, w: f.embedding(i, w, **kw), i, rand(5, 3))
    fraises(lambda f, i, w: f.embedding(i, w), longs(1), rand(5))


@pytest.mark.parametrize("idx,n", [([0, 3, 1], -1), ([[0, 3], [2, 2]], 5), ([], 3), (2, 4)])
def test_one_hot(idx, n):
    fcheck(lambda f, i: f.one_hot(i, n), ember.tensor(idx, dtype=ember.int64))


@pytest.mark.parametrize("idx,n", [([0, 3], 2), ([0, -1], -1), ([0.0, 1.0], -1), ([], -1)])
def test_one_hot_errors(idx, n):
    i = ember.tensor(idx, dtype=ember.int64 if idx and isinstance(idx[0], int) or not idx
                     else ember.float32)
    fraises(lambda f, i: f.one_hot(i, n), i)


# ====================================================================== dropout
def _zero_fraction(y):
    return float((y.detach().numpy() == 0).mean())


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_statistics(p, dtype):
    x = (rand(200, 100, dtype=dtype, low=1, high=2)).requires_grad_()
    y = EF.dropout(x, p)
    assert abs(_zero_fraction(y) - p) < 0.02
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(y.detach().numpy()[kept], x.detach().numpy()[kept] / (1 - p),
                               rtol=1e-6)
    y.backward(ember.ones_like(y))
    np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p), rtol=1e-6)


@pytest.mark.parametrize("fn", [lambda f, x: f.dropout(x, 0.5, training=False),
                                lambda f, x: f.dropout(x, 0.0),
                                lambda f, x: f.alpha_dropout(x, 0.5),
                                lambda f, x: f.feature_alpha_dropout(x, 0.5),
                                lambda f, x: f.dropout2d(x, 0.3, False),
                                lambda f, x: f.dropout1d(x[0], 0.3, False),
                                lambda f, x: f.dropout3d(x, 0.3, False)])
def test_dropout_eval_identity(fn):
    x = rand(2, 3, 4, 5)
    y = fn(EF, x)
    assert y is x or y._data is x._data[0] or np.shares_memory(y._data, x._data)
    fcheck(fn, rand(2, 3, 4, 5, dtype=ember.float64, requires_grad=True))


def test_dropout_edges():
    x = rand(10, 10, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x: f.dropout(x, 1.0), x)
    fcheck(lambda f, x: f.alpha_dropout(x, 1.0, True), x)
    fcheck(lambda f, x: f.dropout(x, 0.5), rand(0, 3))
    z = x.detach().clone()
    y = EF.dropout(z, 0.5, inplace=True)
    assert y is z and 0.3 < _zero_fraction(z) < 0.7
    y = ember.dropout(x, 0.5, True)
    assert 0.3 < _zero_fraction(y) < 0.7


@pytest.mark.parametrize("p", [1.5, -0.5])
@pytest.mark.parametrize("name", ["dropout", "alpha_dropout", "dropout1d", "dropout2d",
                                  "dropout3d", "feature_alpha_dropout"])
def test_dropout_bad_p(p, name):
    fraises(lambda f, x: getattr(f, name)(x, p), rand(2, 3, 4),
            match=f"dropout probability has to be between 0 and 1, but got {p}")


@pytest.mark.parametrize("name,shape,chan", [("dropout1d", (8, 50, 7), 2),
                                             ("dropout1d", (400, 7), 1),
                                             ("dropout2d", (8, 50, 3, 3), 2),
                                             ("dropout3d", (8, 50, 2, 2, 2), 2),
                                             ("dropout3d", (400, 2, 2, 2), 1),
                                             ("feature_alpha_dropout", (8, 50, 3), 2)])
def test_feature_dropout_channels(name, shape, chan):
    x = rand(*shape, low=1, high=2)
    y = getattr(EF, name)(x, 0.4, True).numpy()
    per_chan = y.reshape(shape[:chan] + (-1,))
    first = per_chan[..., :1]
    assert np.all((per_chan == 0) == (first == 0)) if name != "feature_alpha_dropout" else \
        np.all(np.isclose(per_chan - per_chan, 0))
    if name == "feature_alpha_dropout":  # dropped channels are one constant
        dropped = np.all(np.isclose(per_chan, per_chan[..., :1]), axis=-1)
        assert 0.3 < dropped.mean() < 0.5
    else:
        assert 0.3 < float((first == 0).mean()) < 0.5


def test_alpha_dropout_statistics():
    x = ember.tensor(np.random.default_rng(0).standard_normal((400, 250)), dtype=ember.float64)
    for fn in (lambda: EF.alpha_dropout(x, 0.3, True),
               lambda: EF.alpha_dropout(x.clone(), 0.3, True, inplace=True)):
        y = fn().numpy()
        assert abs(y.mean()) < 0.03 and abs(y.std() - 1) < 0.03


def test_dropout_warnings_and_errors():
    for name, shape in [("dropout2d", (3, 4, 5)), ("dropout2d", (3, 4)), ("dropout3d", (2, 3, 4))]:
        x = rand(*shape)
        with warnings.catch_warnings(record=True) as we:
            warnings.simplefilter("always")
            getattr(EF, name)(x, 0.5, False)
        with warnings.catch_warnings(record=True) as wt:
            warnings.simplefilter("always")
            getattr(TF, name)(to_torch(x), 0.5, False)
        same_warnings(we, wt)
    fraises(lambda f, x: f.dropout1d(x), rand(3, 4, 5, 6), match="dropout1d: Expected 2D or 3D")
    fraises(lambda f, x: f.feature_alpha_dropout(x, 0.5, True), rand(3),
            match="Feature dropout requires at least 2 dimensions")
    fraises(lambda f, x: f.dropout(x, 0.5), rand(4, dtype=ember.int64))


# ====================================================================== attention
SDPA = [((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {}),
        ((2, 3, 4, 8), (2, 3, 4, 8), (2, 3, 4, 8), {"is_causal": True}),
        ((2, 3, 2, 8), (2, 3, 4, 8), (2, 3, 4, 8), {"is_causal": True}),
        ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"mask": "bool"}),
        ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"mask": "float"}),
        ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"mask": "bool_rows"}),
        ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"scale": 0.3}),
        ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"scale": 0.0}),
        ((2, 6, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), {"enable_gqa": True}),
        ((2, 4, 8), (2, 6, 8), (2, 6, 4), {}), ((4, 8), (6, 8), (6, 4), {"is_causal": True}),
        ((2, 1, 3, 4, 8), (2, 1, 3, 6, 8), (2, 1, 3, 6, 8), {"mask": "bool"}),
        ((0, 3, 4, 8), (0, 3, 6, 8), (0, 3, 6, 8), {})]


def _sdpa_mask(kind, L, S, dtype):
    rng = np.random.default_rng(3)
    if kind == "bool":
        m = rng.random((L, S)) < 0.7
        m[:, 0] = True
        return ember.tensor(m)
    if kind == "bool_rows":  # some rows fully masked: PyTorch returns zeros there
        m = rng.random((L, S)) < 0.7
        m[1] = False
        return ember.tensor(m)
    return rand(L, S, dtype=dtype, seed=6)


@pytest.mark.parametrize("qs,ks,vs,opts", SDPA)
@pytest.mark.parametrize("dtype", FLOATS)
def test_scaled_dot_product_attention(qs, ks, vs, opts, dtype):
    q, k, v = (rand(*s, dtype=dtype, requires_grad=True, seed=i)
               for i, s in enumerate((qs, ks, vs)))
    kw = dict(opts)
    mask = _sdpa_mask(kw.pop("mask"), qs[-2], ks[-2], dtype) if "mask" in kw else None
    fcheck(lambda f, q, k, v, m: f.scaled_dot_product_attention(q, k, v, m, **kw), q, k, v, mask)


def test_sdpa_half_and_dropout():
    q = rand(2, 2, 4, 8, dtype=ember.float16)
    fcheck(lambda f, q: f.scaled_dot_product_attention(q, q, q, is_causal=True), q, grad=False,
           rtol=3e-3, atol=3e-3)
    q = rand(1, 1, 64, 8, dtype=ember.float64)
    out = EF.scaled_dot_product_attention(q, q, ember.eye(64, dtype=ember.float64)[None, None],
                                          dropout_p=0.5)
    zeros = float((out.numpy() == 0).mean())  # out rows are the dropped, rescaled weights
    assert 0.4 < zeros < 0.6
    np.testing.assert_allclose(out.numpy().sum(-1).mean(), 1.0, atol=0.15)


@pytest.mark.parametrize("qs,ks,vs,kw", [
    ((2, 4, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), {}),
    ((2, 3, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), {"enable_gqa": True}),
    ((2, 3, 4, 8), (2, 3, 6, 7), (2, 3, 6, 8), {}),
])
def test_sdpa_errors(qs, ks, vs, kw):
    mask = ember.ones(qs[-2], ks[-2], dtype=ember.bool) if kw.pop("mask", False) else None
    fraises(lambda f, q, k, v, m: f.scaled_dot_product_attention(q, k, v, m, **kw),
            rand(*qs), rand(*ks), rand(*vs), mask)
    raises_like(lambda: EF.scaled_dot_product_attention(*[rand(2, 4, 8)] * 3, None, 0.0, False,
                                                         1.0),
                lambda: TF.scaled_dot_product_attention(*[torch.rand(2, 4, 8)] * 3, None, 0.0,
                                                        False, 1.0))
    # torch's CPU flash path silently ignores the mask here; its math path (the reference
    # semantics) raises, and so does ember
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        EF.scaled_dot_product_attention(rand(2, 4, 8), rand(2, 4, 8), rand(2, 4, 8),
                                        ember.ones(4, 4, dtype=ember.bool), is_causal=True)


# ---------------------------------------------------------------------- GELU's float32 fast path
def _f32_sweep() -> np.ndarray:
    """float32 inputs over erf's whole range: a dense grid, tiny and subnormal magnitudes of
    both signs, and the edge values."""
    tiny = np.geomspace(1e-44, 1.0, 20000)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 3.4e38, -3.4e38, 1e-45, 4.25,
             -4.25, 3.9, 6.0]
    return np.concatenate([np.linspace(-7, 7, 400001), tiny, -tiny, edges]).astype(np.float32)


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place (NaN against NaN counts as 0)."""
    def key(v):  # float32 bits as integers ordered like the floats
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(key(a) - key(b))
    d[np.isnan(a) & np.isnan(b)] = 0
    return d


def test_erf_float32_accuracy():
    x = _f32_sweep()
    got = ember.erf(ember.from_numpy(x)).numpy()
    assert got.dtype == np.float32
    exact = torch.erf(torch.from_numpy(x.astype(np.float64))).numpy().astype(np.float32)
    for ref in (exact, torch.erf(torch.from_numpy(x)).numpy()):
        u = _ulps(got, ref)
        assert u.max() <= 3, x[u.argmax()]
        assert (u > 1).mean() < 2e-3
    # the edge values exactly, signed zeros included (+-1 at +-inf and past |x| ~ 3.92)
    np.testing.assert_array_equal(got[-14:], exact[-14:])
    assert np.array_equal(np.signbit(got[-14:-12]), [False, True])
    # in place on a non-contiguous view and on 0-d input
    base = ember.from_numpy(np.linspace(-3, 3, 20, dtype=np.float32).reshape(4, 5))
    assert_same(base.t().erf(), torch.from_numpy(base.numpy()).t().erf())
    assert_same(ember.tensor(-0.5).erf(), torch.tensor(-0.5).erf())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_sweep(approximate):
    x = _f32_sweep()
    # torch's vectorised kernel gives NaN at +inf and overflows near float32's max, where the
    # formula is finite: those inputs are left out (the activation tests cover the specials)
    x = x[~(np.abs(x) > 1e30)]
    got = EF.gelu(ember.from_numpy(x), approximate=approximate).numpy()
    want = TF.gelu(torch.from_numpy(x), approximate=approximate).numpy()
    # torch's own float32 GELU differs from the exact one by a few ulp of max(|x|, 1)
    scale = np.maximum(np.abs(x), 1)
    err = np.abs(got.astype(np.float64) - want) / scale
    assert np.nanmax(err) < 2e-6
    assert np.array_equal(np.isnan(got), np.isnan(want))
    # GELU(x) = x * Phi(x) with Phi > 0: a zero result carries x's sign (gelu(-0.) is -0., an
    # underflowing negative result is -0.). Checked against the math, not against torch's own
    # zeros: its vectorised kernel flushes tiny negative results to +0 on some CPUs (AVX2) and
    # not on others
    zero = got == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(x[zero]))


def _gelu64(x: np.ndarray, approximate: str) -> tuple[np.ndarray, np.ndarray]:
    """GELU and its derivative in float64 without cancellation (torch's float64 formulas lose
    the tail below x = -8 too): Phi through erfc, tanh-GELU as x / (1 + exp(-2 u))."""
    x = x.astype(np.float64)
    if approximate == "none":
        cdf = np.frompyfunc(lambda v: 0.5 * math.erfc(-v / math.sqrt(2)), 1, 1)(x).astype(float)
        return x * cdf, cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    k = math.sqrt(2 / math.pi)
    e = np.exp(-2 * k * (x + 0.044715 * x ** 3))
    s = 1 / (1 + e)
    return x * s, s + x * 2 * k * (1 + 3 * 0.044715 * x * x) * s * (e * s)


@pytest.mark.parametrize("path", ["numpy", "native", "compiled"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_accuracy(approximate, path, monkeypatch):
    """float32 GELU and its derivative against float64, on each of ember's three paths
    (numpy, the native kernel, compiled): neither cancels below zero, where torch's float32
    1 + erf(x / sqrt 2) and 1 - tanh^2 lose every digit by x = -5."""
    monkeypatch.setenv("EMBER_EAGER_KERNELS", "0" if path == "numpy" else "1")
    x = np.concatenate([np.linspace(-14, 8, 300001), [-0.0, 0.0]]).astype(np.float32)
    w, gw = _gelu64(x, approximate)
    fn = lambda t: EF.gelu(t, approximate=approximate)
    fn = ember.compile(fn) if path == "compiled" else fn
    xe = ember.from_numpy(x).requires_grad_()
    got = fn(xe)
    got.backward(ember.ones_like(got))
    y = got.detach().numpy().astype(np.float64)
    ok = np.abs(w) >= np.finfo(np.float32).tiny  # results in float32's normal range
    if approximate == "none":
        # x ncdf(x): below x = -13.04 Phi(x) is subnormal in float32 before x multiplies it
        # in, so there the result keeps Phi's absolute precision (|x| 2^-148), not 8 ulp
        sub = x.astype(np.float64) < -13.04
        rel = np.abs(y - w)[ok & ~sub] / np.abs(w[ok & ~sub])
        assert rel.max() < 6e-7  # ~8 ulp
        assert (np.abs(y - w)[sub] <= np.abs(x[sub]) * 2.0 ** -148).all()
    else:
        # u = k (x + c x^3) rounded to float32 moves exp(-2 u) by 2 |u| ulp: no better; and
        # below x = -8.8 exp(-2 u) overflows float32 (the result, -0, is within 1e-37)
        u = math.sqrt(2 / math.pi) * np.abs(x * (1 + 0.044715 * x.astype(np.float64) ** 2))
        ok &= 2 * u < 88
        rel = np.abs(y - w)[ok] / np.abs(w[ok])
        assert (rel / (1 + 2 * u[ok])).max() < 6e-7
        assert np.abs(y[~ok]).max() < 1e-37
    assert np.array_equal(np.signbit(y[w == 0]), np.signbit(w[w == 0]))
    # the derivative Phi + x phi (s + x (2 u') s (1 - s)) cancels near x = -0.75 by nature:
    # its error is measured against max(|x|, 1)
    g = xe.grad.numpy().astype(np.float64)
    assert (np.abs(g - gw) / np.maximum(np.abs(x), 1)).max() < 4e-7


def _gelu_backward_op():
    from ember.ops.activations import gelu_backward
    return gelu_backward


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_backward_op(approximate, dtype):
    x = rand(6, 7, dtype=dtype, low=-6, high=6)
    x._data[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    g = rand(6, 7, dtype=dtype, seed=3)
    got = _gelu_backward_op()(g, x, approximate)
    want = torch.ops.aten.gelu_backward(to_torch(g), to_torch(x), approximate=approximate)
    assert_same(got, want)
    assert got.dtype is dtype


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_double_backward(approximate):
    x = rand(3, 4, dtype=ember.float64, low=-4, high=4, requires_grad=True)
    gelu = lambda t: EF.gelu(t, approximate=approximate)
    assert ember.autograd.gradcheck(gelu, (x,))
    assert ember.autograd.gradgradcheck(gelu, (x,))
    # gelu_backward's own backward (both inputs), third order included
    g = rand(3, 4, dtype=ember.float64, seed=5, requires_grad=True)
    op = _gelu_backward_op()
    assert ember.autograd.gradcheck(lambda g, x: op(g, x, approximate), (g, x))
    assert ember.autograd.gradgradcheck(lambda g, x: op(g, x, approximate), (g, x))

    # second derivatives against torch's
    def gradsum(m, x):
        y = F(m).gelu(x, approximate=approximate).sin().sum()
        gx, = m.autograd.grad(y, x, create_graph=True)
        return (gx * gx).sum()
    check(gradsum, None, x)


def test_gelu_backward_op_errors():
    x = rand(3, dtype=ember.float32)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        _gelu_backward_op()(x, x, "foo")


def test_norm_live_grad_while_tracing():
    # a traced value has no data: the compiler's capture must see a present gradient as live
    from ember._dispatch import STATE
    from ember.ops.normalization import _live
    z = ember.zeros(3)
    assert _live(None) is None and _live(z) is None and _live(ember.ones(3)) is not None
    STATE.tracing += 1
    try:
        assert _live(z) is z
    finally:
        STATE.tracing -= 1


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((4, 3, 2), 1), ((), 0), ((2, 0, 3), -1)])
def test_softmax_double_backward(name, shape, dim):
    # the fused backward kernels (_softmax_backward_data, _log_softmax_backward_data) have their
    # own backward: second derivatives against torch's, and gradcheck of the kernels themselves
    x = rand(*shape, dtype=ember.float64, requires_grad=True)

    def gradsum(m, x):
        y = getattr(F(m), name)(x, dim)
        gx, = m.autograd.grad((y * y.detach().cos()).sum(), x, create_graph=True)
        return (gx * gx.sin()).sum()
    check(gradsum, None, x)
    from ember.ops import activations as A
    op = A._softmax_backward_data if name == "softmax" else A._log_softmax_backward_data
    y = getattr(EF, name)(x.detach(), dim).requires_grad_()
    g = rand(*shape, dtype=ember.float64, seed=7, requires_grad=True)
    assert ember.autograd.gradcheck(lambda g, y: op(g, y, dim), (g, y))
