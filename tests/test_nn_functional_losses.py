"""ember.nn.functional against torch.nn.functional: normalisation, distances and losses."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
from oracle import assert_same, check, rand, raises_like, to_torch
from test_nn_functional import (FLOATS, HALVES, TF, F, _seeded, fcheck, fraises,  # noqa: F401
                                longs, same_warnings)


# ====================================================================== normalisation
def _stats(c, dtype=ember.float32, seed=5):
    return rand(c, dtype=dtype, seed=seed), rand(c, dtype=dtype, low=0.5, high=2, seed=seed + 1)


BN = [((4, 3), True), ((4, 3), False), ((2, 3, 5), True), ((2, 3, 4, 4), True),
      ((2, 3, 4, 4), False), ((2, 3, 2, 2, 2), True), ((0, 3), False), ((0, 3), True)]


@pytest.mark.parametrize("shape,training", BN)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm(shape, training, affine, dtype):
    c = shape[1]
    x = rand(*shape, dtype=dtype, requires_grad=True)
    w = rand(c, dtype=dtype, requires_grad=True, seed=1) if affine else None
    b = rand(c, dtype=dtype, requires_grad=True, seed=2) if affine else None
    rm, rv = _stats(c, dtype)
    rm_t, rv_t = to_torch(rm), to_torch(rv)
    v0 = rm._version
    out_e = EF.batch_norm(x, rm, rv, w, b, training, 0.3, 1e-3)
    out_t = TF.batch_norm(to_torch(x), rm_t, rv_t, to_torch(w), to_torch(b), training, 0.3, 1e-3)
    assert_same(out_e, out_t)
    assert_same(rm, rm_t)  # running statistics updated in place (unbiased variance)
    assert_same(rv, rv_t)
    assert (rm._version > v0) == training
    rm, rv = _stats(c, dtype)
    fcheck(lambda f, x, w, b, rm, rv: f.batch_norm(x, rm, rv, w, b, training, 0.3, 1e-3),
           x, w, b, rm, rv)


def test_batch_norm_no_running_stats_and_half():
    x = rand(5, 3, 4, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x: f.batch_norm(x, None, None, training=True), x)
    check(lambda m, x, w: m.batch_norm(x, w, None, None, None, True, 0.1, 1e-5, False), None, x,
          rand(3, dtype=ember.float64, requires_grad=True))
    for dt in HALVES:
        rm, rv = _stats(3)
        fcheck(lambda f, x, rm, rv: f.batch_norm(x, rm, rv, training=True), rand(6, 3, 4, dtype=dt),
               rm, rv, grad=False)


def test_batch_norm_double_backward():
    x = rand(4, 3, 5, dtype=ember.float64, requires_grad=True)
    w = rand(3, dtype=ember.float64, requires_grad=True)

    def fn(m, x, w):
        y = (F(m).batch_norm(x, None, None, w, None, True) ** 3).sum()
        gx, = m.autograd.grad(y, x, create_graph=True)
        return (gx * gx).sum()
    check(fn, None, x, w)


@pytest.mark.parametrize("fn", [
    lambda f, x: f.batch_norm(x[:1], None, None, training=True),
    lambda f, x: f.batch_norm(x, None, None, training=False),
    lambda f, x: f.batch_norm(x, x[0, :2], x[0, :2]),
    lambda f, x: f.batch_norm(x, x[0], x[0], weight=x[0, :2]),
])
def test_batch_norm_errors(fn):
    fraises(fn, rand(2, 3))


LN = [((3, 4), (4,)), ((2, 3, 4), (3, 4)), ((2, 3, 4), [4]), ((0, 4), (4,)), ((5,), (5,))]


@pytest.mark.parametrize("shape,ns", LN)
@pytest.mark.parametrize("affine", ["both", "weight", None])
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm(shape, ns, affine, dtype):
    nshape = tuple(ns)
    x = rand(*shape, dtype=dtype, requires_grad=True)
    w = rand(*nshape, dtype=dtype, requires_grad=True, seed=1) if affine else None
    b = rand(*nshape, dtype=dtype, requires_grad=True, seed=2) if affine == "both" else None
    fcheck(lambda f, x, w, b: f.layer_norm(x, ns, w, b, 1e-4), x, w, b)
    check(lambda m, x, w, b: m.layer_norm(x, nshape, w, b), None, x, w, b)
    check(lambda m, x, w, b: m.native_layer_norm(x, nshape, w, b, 1e-5)[0], None, x, w, b)


def test_layer_norm_half_noncontig_double_backward():
    for dt in HALVES:
        fcheck(lambda f, x, w: f.layer_norm(x, (8,), w), rand(3, 8, dtype=dt), rand(8, dtype=dt),
               grad=False)
    x = rand(4, 6, dtype=ember.float64, noncontig=True).requires_grad_()
    fcheck(lambda f, x: f.layer_norm(x.t(), (4,)), x)
    w = rand(6, dtype=ember.float64, requires_grad=True)

    def fn(m, x, w):
        y = (F(m).layer_norm(x, (6,), w) ** 3).sum()
        gx, = m.autograd.grad(y, x, create_graph=True)
        return (gx * gx).sum()
    check(fn, None, x, w)


@pytest.mark.parametrize("ns,w,b", [((5,), None, None), ((4,), (5,), None), ((4,), None, (5,)),
                                    ((), None, None), ((2, 4), None, None), (4, None, None)])
def test_layer_norm_errors(ns, w, b):
    fraises(lambda f, x, w, b: f.layer_norm(x, ns, w, b), rand(3, 4),
            None if w is None else rand(*w), None if b is None else rand(*b))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 2), ((2, 6, 3), 3), ((3, 8), 2),
                                          ((2, 4, 3, 2), 1), ((0, 6, 3), 2)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm(shape, groups, affine, dtype):
    c = shape[1]
    x = rand(*shape, dtype=dtype, requires_grad=True)
    w = rand(c, dtype=dtype, requires_grad=True, seed=1) if affine else None
    b = rand(c, dtype=dtype, requires_grad=True, seed=2) if affine else None
    fcheck(lambda f, x, w, b: f.group_norm(x, groups, w, b, 1e-4), x, w, b)
    check(lambda m, x, w, b: m.group_norm(x, groups, w, b), None, x, w, b)


def test_group_norm_half_and_errors():
    for dt in HALVES:
        fcheck(lambda f, x: f.group_norm(x, 2), rand(2, 4, 5, dtype=dt), grad=False)
    for shape, g, w, b in [((2, 5, 3), 2, None, None), ((5,), 1, None, None),
                           ((2, 6, 3), 2, (4,), None), ((2, 6, 3), 2, None, (4,))]:
        fraises(lambda f, x, w, b, g=g: f.group_norm(x, g, w, b), rand(*shape),
                None if w is None else rand(*w), None if b is None else rand(*b))


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("stats,use_input", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_instance_norm(shape, stats, use_input, dtype):
    c = shape[1]
    x = rand(*shape, dtype=dtype, requires_grad=True)
    w = rand(c, dtype=dtype, requires_grad=True, seed=1)
    b = rand(c, dtype=dtype, requires_grad=True, seed=2)
    rm, rv = _stats(c, dtype) if stats else (None, None)
    rm_t, rv_t = to_torch(rm), to_torch(rv)
    out_e = EF.instance_norm(x, rm, rv, w, b, use_input, 0.2, 1e-4)
    out_t = TF.instance_norm(to_torch(x), rm_t, rv_t, to_torch(w), to_torch(b), use_input, 0.2,
                             1e-4)
    assert_same(out_e, out_t)
    if stats:
        assert_same(rm, rm_t)
        assert_same(rv, rv_t)
    fcheck(lambda f, x, w, b: f.instance_norm(x, None, None, w, b), x, w, b)


def test_instance_norm_errors():
    fraises(lambda f, x: f.instance_norm(x), rand(2, 3, 1))
    fraises(lambda f, x: f.instance_norm(x), rand(2, 3))


@pytest.mark.parametrize("shape,ns", [((3, 4), (4,)), ((2, 3, 4), (3, 4)), ((0, 4), (4,))])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("dtype", FLOATS + HALVES)
def test_rms_norm(shape, ns, weight, eps, dtype):
    grad = dtype in FLOATS
    x = rand(*shape, dtype=dtype, requires_grad=grad)
    w = rand(*ns, dtype=dtype, requires_grad=grad, seed=1) if weight else None
    fcheck(lambda f, x, w: f.rms_norm(x, ns, w, eps), x, w, grad=grad)
    check(lambda m, x, w: m.rms_norm(x, ns, w, eps), None, x, w, grad=grad)


def test_rms_norm_errors():
    fraises(lambda f, x: f.rms_norm(x, [5]), rand(3, 4), match="expected input with shape [*5]")
    fraises(lambda f, x, w: f.rms_norm(x, [4], w), rand(3, 4), rand(5))
    fraises(lambda f, x: f.rms_norm(x, 4), rand(3, 4))


@pytest.mark.parametrize("shape,size", [((2, 5, 4), 3), ((2, 6, 3, 3), 2), ((1, 4, 2, 2, 2), 5),
                                        ((2, 3, 4), 1)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_local_response_norm(shape, size, dtype):
    x = rand(*shape, dtype=dtype, requires_grad=True)
    fcheck(lambda f, x: f.local_response_norm(x, size, 1e-2, 0.6, 1.5), x)
    fraises(lambda f, x: f.local_response_norm(x, 2), rand(3, 4))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_normalize(p, dim, dtype):
    x = rand(3, 4, dtype=dtype, requires_grad=True)
    fcheck(lambda f, x: f.normalize(x, p, dim), x)
    z = ember.zeros(2, 3, dtype=dtype, requires_grad=True)  # zero vectors: eps keeps it finite
    fcheck(lambda f, x: f.normalize(x, p, dim), z)
    fraises(lambda f, x: f.normalize(x, dim=2), x)
    out = ember.empty(3, 4, dtype=dtype)
    assert EF.normalize(x.detach(), p, dim, out=out) is out
    assert_same(out, TF.normalize(to_torch(x.detach()), p, dim))


# ====================================================================== distances
@pytest.mark.parametrize("s1,s2,dim", [((3, 4), (3, 4), 1), ((3, 4), (1, 4), 1),
                                       ((4,), (4,), 0), ((2, 3, 4), (2, 3, 4), -1)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_cosine_similarity(s1, s2, dim, dtype):
    a = rand(*s1, dtype=dtype, requires_grad=True)
    b = rand(*s2, dtype=dtype, requires_grad=True, seed=1)
    fcheck(lambda f, a, b: f.cosine_similarity(a, b, dim), a, b)
    check(lambda m, a, b: m.cosine_similarity(a, b, dim, 1e-3), None, a, b)
    z = ember.zeros(*s1, dtype=dtype, requires_grad=True)
    fcheck(lambda f, a, b: f.cosine_similarity(a, b, dim), z, b)


def test_cosine_similarity_errors():
    fraises(lambda f, a, b: f.cosine_similarity(a, b), rand(3, 4), rand(3, 5))
    fraises(lambda f, a, b: f.cosine_similarity(a, b), rand(3, 4, dtype=ember.int64),
            rand(3, 4, dtype=ember.int64), match="expected common dtype to be floating point")


@pytest.mark.parametrize("s1,s2", [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (4,)), ((), ())])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(s1, s2, p, keepdim):
    a = rand(*s1, dtype=ember.float64, requires_grad=True)
    b = rand(*s2, dtype=ember.float64, requires_grad=True, seed=1)
    fcheck(lambda f, a, b: f.pairwise_distance(a, b, p, 1e-6, keepdim), a, b)


@pytest.mark.parametrize("n", [4, 1, 0])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, math.inf])
def test_pdist(n, p):
    x = rand(n, 3, dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x: f.pdist(x, p), x, grad=n > 1)  # torch 2.13 crashes in backward for n < 2


@pytest.mark.parametrize("s1,s2", [((3, 4), (5, 4)), ((2, 3, 4), (2, 5, 4)), ((2, 3, 4), (5, 4))])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
def test_cdist(s1, s2, p):
    a = rand(*s1, dtype=ember.float64, requires_grad=True)
    b = rand(*s2, dtype=ember.float64, requires_grad=True, seed=1)
    check(lambda m, a, b: m.cdist(a, b, p), None, a, b)


def test_distance_errors():
    fraises(lambda f, x: f.pdist(x), rand(3, 4, 5), match="pdist only supports 2D tensors")
    fraises(lambda f, x: f.pdist(x, -1), rand(3, 4), match="non-negative p")
    for a, b, p in [((3, 4), (3, 5), 2.0), ((3, 4), (3, 4), -1.0), ((4,), (3, 4), 2.0)]:
        x1, x2 = rand(*a), rand(*b)
        raises_like(lambda x1=x1, x2=x2, p=p: ember.cdist(x1, x2, p),
                    lambda x1=x1, x2=x2, p=p: torch.cdist(to_torch(x1), to_torch(x2), p))


# ====================================================================== classification losses
REDS = ["mean", "sum", "none"]
# (input shape, target shape, classes)
CE_SHAPES = [((3, 5), (3,)), ((5,), ()), ((2, 4, 3), (2, 3)), ((2, 4, 3, 2), (2, 3, 2)),
             ((2, 3, 2, 2, 2), (2, 2, 2, 2)), ((0, 4), (0,))]


def _targets(shape, c, seed=0, ignore=None):
    t = np.random.default_rng(seed).integers(0, c, shape)
    if ignore is not None and t.size:
        t.reshape(-1)[::3] = ignore
    return ember.tensor(t, dtype=ember.int64)


@pytest.mark.parametrize("xs,ts", CE_SHAPES)
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("opts", [
    {}, {"weight": True}, {"ignore_index": 1}, {"ignore_index": -100, "ignored": True},
    {"label_smoothing": 0.2},
    {"label_smoothing": 0.3, "weight": True, "ignore_index": 2, "ignored": True}])
@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_and_nll(xs, ts, reduction, opts, dtype):
    c = xs[1] if len(xs) > 1 else xs[0]
    kw = {k: v for k, v in opts.items() if k in ("ignore_index", "label_smoothing")}
    t = _targets(ts, c, ignore=kw.get("ignore_index") if opts.get("ignored") else None)
    x = rand(*xs, dtype=dtype, requires_grad=True)
    w = rand(c, dtype=dtype, low=0.1, high=2, seed=4) if opts.get("weight") else None
    fcheck(lambda f, x, t, w: f.cross_entropy(x, t, w, reduction=reduction, **kw), x, t, w)
    if "label_smoothing" not in kw:
        fcheck(lambda f, x, t, w: f.nll_loss(x, t, w, reduction=reduction, **kw), x, t, w)


@pytest.mark.parametrize("xs", [(3, 5), (5,), (2, 4, 3, 2), (0, 4)])
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("opts", [{}, {"weight": True}, {"label_smoothing": 0.25}])
def test_cross_entropy_probabilities(xs, reduction, opts):
    c = xs[1] if len(xs) > 1 else xs[0]
    x = rand(*xs, dtype=ember.float64, requires_grad=True)
    t = EF.softmax(rand(*xs, dtype=ember.float64, seed=9), 1 if len(xs) > 1 else 0)
    t.requires_grad_()
    w = rand(c, dtype=ember.float64, low=0.1, high=2, seed=4) if opts.get("weight") else None
    ls = opts.get("label_smoothing", 0.0)
    fcheck(lambda f, x, t, w: f.cross_entropy(x, t, w, reduction=reduction, label_smoothing=ls),
           x, t, w)


def test_cross_entropy_half_uint8_and_double_backward():
    for dt in HALVES:
        fcheck(lambda f, x, t: f.cross_entropy(x, t), rand(4, 6, dtype=dt), _targets((4,), 6),
               grad=False)
    fcheck(lambda f, x, t: f.nll_loss(x, t), rand(4, 6, requires_grad=True),
           ember.tensor([1, 0, 5, 2], dtype=ember.uint8))
    x = rand(4, 5, dtype=ember.float64, requires_grad=True)
    t = _targets((4,), 5, ignore=-100)

    def fn(m, x, t):
        y = F(m).cross_entropy(x, t, label_smoothing=0.1)
        gx, = m.autograd.grad(y, x, create_graph=True)
        return (gx * gx).sum()
    check(fn, None, x, t)


LEGACY = [(None, False), (False, None), (False, True), (True, False), (None, True)]


@pytest.mark.parametrize("size_average,reduce", LEGACY)
@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy", "mse_loss", "l1_loss",
                                  "binary_cross_entropy", "kl_div", "soft_margin_loss"])
def test_legacy_reduction_args(size_average, reduce, name):
    x = rand(3, 4, dtype=ember.float64, low=0.1, high=0.9)
    t = _targets((3,), 4) if name in ("nll_loss", "cross_entropy") else \
        rand(3, 4, dtype=ember.float64, low=0.1, high=0.9, seed=2)
    with warnings.catch_warnings(record=True) as we:
        warnings.simplefilter("always")
        out_e = getattr(EF, name)(x, t, size_average=size_average, reduce=reduce)
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        out_t = getattr(TF, name)(to_torch(x), to_torch(t), size_average=size_average,
                                  reduce=reduce)
    assert_same(out_e, out_t)
    same_warnings(we, wt)


@pytest.mark.parametrize("xs,ts,kw", [
    ((3, 5), (4,), {}), ((3, 5), (3,), {"target": [0, 1, 7]}), ((3, 5), (3,),
                                                                 {"target": [0, 1, -3]}),
    ((3, 5), (3,), {"float_target": True}), ((3, 5), (3,), {"weight": 4}),
    ((3, 5, 2), (3,), {}), ((3, 5, 2), (3, 3), {}), ((5,), (2,), {}), ((), (), {}),
    ((3, 5), (), {}), ((2, 3, 4, 5), (2, 4, 6), {}), ((3, 5), (3,), {"reduction": "bad"}),
    ((3, 5), (3,), {"int32": True}), ((3, 5), (3, 5), {"long_probs": True}),
    ((3, 5), (3, 4), {"float_target": True}), ((3, 5), (3,), {"smoothing": 1.5}),
    ((3, 5), (3, 5), {"float_target": True, "ignore_index": 2}),
    ((3, 5), (3, 5), {"float_target": True, "weight": 4}),
])
def test_cross_entropy_errors(xs, ts, kw):
    x = rand(*xs)
    if "target" in kw:
        t = longs(*kw["target"])
    elif kw.get("float_target"):
        t = rand(*ts)
    else:
        t = _targets(ts, 2).to(ember.int32 if kw.get("int32") else ember.int64)
    w = rand(kw["weight"]) if "weight" in kw else None
    red = kw.get("reduction", "mean")
    extra = {"ignore_index": kw["ignore_index"]} if "ignore_index" in kw else {}
    fraises(lambda f, x, t, w: f.cross_entropy(x, t, w, reduction=red,
                                               label_smoothing=kw.get("smoothing", 0.0), **extra),
            x, t, w)
    if not kw.get("long_probs") and "smoothing" not in kw and not (
            kw.get("float_target") and ts == xs):
        fraises(lambda f, x, t, w: f.nll_loss(x, t, w, reduction=red, **extra), x, t, w)


# ====================================================================== pointwise losses
PAIR_LOSSES = [
    ("mse_loss", {}), ("mse_loss", {"weight": True}), ("l1_loss", {}),
    ("l1_loss", {"weight": True}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
    ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}), ("huber_loss", {"delta": 0.4}),
    ("huber_loss", {"delta": 0.7, "weight": True}), ("soft_margin_loss", {}),
    ("binary_cross_entropy", {}), ("binary_cross_entropy", {"weight": True}),
    ("binary_cross_entropy_with_logits", {}), ("binary_cross_entropy_with_logits",
                                               {"weight": True, "pos_weight": True}),
    ("kl_div", {"reduction_extra": "batchmean"}), ("kl_div", {"log_target": True}),
    ("poisson_nll_loss", {}), ("poisson_nll_loss", {"log_input": False, "full": True}),
    ("poisson_nll_loss", {"full": True, "eps": 1e-3}),
    ("gaussian_nll_loss", {"var": "full"}), ("gaussian_nll_loss", {"var": "row", "full": True}),
    ("gaussian_nll_loss", {"var": 0.5}), ("hinge_embedding_loss", {"margin": 0.5}),
]
PAIR_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in PAIR_LOSSES]


def _pair_args(name, kw, shape, dtype):
    prob = name in ("binary_cross_entropy",)
    x = rand(*shape, dtype=dtype, low=0.05 if prob else -2, high=0.95 if prob else 2,
             requires_grad=True)
    if name in ("soft_margin_loss", "hinge_embedding_loss"):
        t = ember.tensor(np.where(np.random.default_rng(1).random(shape) < 0.5, -1.0, 1.0),
                         dtype=dtype)
    elif name == "poisson_nll_loss":
        t = ember.tensor(np.random.default_rng(1).integers(0, 5, shape), dtype=dtype)
    else:
        t = rand(*shape, dtype=dtype, low=0.05, high=0.95, seed=7, requires_grad=True)
    opts = {k: v for k, v in kw.items() if k not in ("weight", "pos_weight", "var",
                                                     "reduction_extra")}
    extra = []
    if kw.get("weight"):
        opts["weight"] = rand(*shape, dtype=dtype, low=0.1, high=2, seed=3)
    if kw.get("pos_weight"):
        opts["pos_weight"] = rand(*shape[-1:], dtype=dtype, low=0.5, high=3, seed=4)
    if "var" in kw:
        v = kw["var"]
        v = (rand(*shape, dtype=dtype, low=0.1, high=2, seed=5, requires_grad=True) if v == "full"
             else rand(*shape[:-1], dtype=dtype, low=0.1, high=2, seed=5, requires_grad=True)
             if v == "row" else v)
        extra = [v]
    return x, t, extra, opts


@pytest.mark.parametrize("name,kw", PAIR_LOSSES, ids=PAIR_IDS)
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("shape", [(3, 4), (5,), (0, 3)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_pair_losses(name, kw, reduction, shape, dtype):
    if not shape[0] and name == "gaussian_nll_loss" and kw["var"] == "row":
        shape = (3, 0)
    x, t, extra, opts = _pair_args(name, kw, shape, dtype)
    red = kw.get("reduction_extra", reduction) if reduction == "mean" else reduction
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fcheck(lambda f, x, t, *e: getattr(f, name)(x, t, *e, reduction=red, **{
            k: to_torch(v) if f is TF else v for k, v in opts.items()}), x, t, *extra)


@pytest.mark.parametrize("name,kw", PAIR_LOSSES, ids=PAIR_IDS)
def test_pair_losses_half(name, kw):
    x, t, extra, opts = _pair_args(name, kw, (3, 4), ember.float64)
    x, t = x.detach().to(ember.float16), t.detach().to(ember.float16)
    extra = [e.detach().to(ember.float16) if isinstance(e, ember.Tensor) else e for e in extra]
    opts = {k: v.to(ember.float16) for k, v in opts.items() if isinstance(v, ember.Tensor)} | {
        k: v for k, v in opts.items() if not isinstance(v, ember.Tensor)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fcheck(lambda f, x, t, *e: getattr(f, name)(x, t, *e, **{
            k: to_torch(v) if f is TF else v for k, v in opts.items()}), x, t, *extra, grad=False,
            rtol=5e-3, atol=5e-3)


def test_loss_kinks_and_broadcast_warning():
    # |input - target| exactly at 0, beta and delta: PyTorch's branch choice at the kinks
    x = ember.tensor([0.0, 0.5, -0.5, 1.0, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    t = ember.zeros(6, dtype=ember.float64)
    for fn in (lambda f, x, t: f.l1_loss(x, t), lambda f, x, t: f.smooth_l1_loss(x, t, beta=0.5),
               lambda f, x, t: f.huber_loss(x, t, delta=1.0),
               lambda f, x, t: f.margin_ranking_loss(x, t, t + 1, margin=1.0),
               lambda f, x, t: f.hinge_embedding_loss(x, t - 1, margin=0.5)):
        fcheck(fn, x, t)
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        a, b = rand(3, 5), rand(5)
        with warnings.catch_warnings(record=True) as we:
            warnings.simplefilter("always")
            out_e = getattr(EF, name)(a, b)
        with warnings.catch_warnings(record=True) as wt:
            warnings.simplefilter("always")
            out_t = getattr(TF, name)(to_torch(a), to_torch(b))
        assert_same(out_e, out_t)
        same_warnings(we, wt)


def test_bce_clamps_log():
    x = ember.tensor([0.0, 1.0, 1e-30, 1 - 1e-12, 0.5], dtype=ember.float64, requires_grad=True)
    t = ember.tensor([1.0, 0.0, 1.0, 0.0, 0.3], dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, x, t: f.binary_cross_entropy(x, t, reduction="none"), x, t)
    z = ember.tensor([-200.0, 200.0, 0.0], dtype=ember.float64, requires_grad=True)
    fcheck(lambda f, z: f.binary_cross_entropy_with_logits(z, ember.ones(3, dtype=ember.float64)
                                                           if f is EF else torch.ones(
                                                               3, dtype=torch.float64)), z)


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("fn", [
    lambda f, a, b: f.mse_loss(a, b[:, :4]),
    lambda f, a, b: f.mse_loss(a.long(), b.long()),
    lambda f, a, b: f.mse_loss(a, b, weight=b[0]),
    lambda f, a, b: f.binary_cross_entropy(a.sigmoid(), b[0].sigmoid()),
    lambda f, a, b: f.binary_cross_entropy(a, b.sigmoid()),
    lambda f, a, b: f.binary_cross_entropy(a.sigmoid(), b.sigmoid(), weight=b[0, :4]),
    lambda f, a, b: f.binary_cross_entropy(a.sigmoid().double(), b.sigmoid()),
    lambda f, a, b: f.binary_cross_entropy_with_logits(a, b[0]),
    lambda f, a, b: f.binary_cross_entropy_with_logits(a, b, pos_weight=b[0, :4]),
    lambda f, a, b: f.kl_div(a, b, reduction="bad"),
    lambda f, a, b: f.huber_loss(a, b, delta=0.0),
    lambda f, a, b: f.smooth_l1_loss(a, b, beta=-1.0),
    lambda f, a, b: f.margin_ranking_loss(a[0], b[:, :1], a[0]),
    lambda f, a, b: f.soft_margin_loss(a, b[:, :4]),
    lambda f, a, b: f.gaussian_nll_loss(a, b, b[:, :4].abs()),
    lambda f, a, b: f.gaussian_nll_loss(a, b, -b.abs()),
    lambda f, a, b: f.gaussian_nll_loss(a, b, -1.0),
    lambda f, a, b: f.gaussian_nll_loss(a, b, b.abs(), reduction="bad"),
    lambda f, a, b: f.poisson_nll_loss(a, b[:, :4]),
    lambda f, a, b: f.l1_loss(a, b, reduction="bad"),
])
def test_pair_loss_errors(fn):
    fraises(fn, rand(3, 5), rand(3, 5, seed=1))


# ====================================================================== embedding losses
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
@pytest.mark.parametrize("shape", [(4,), (0,), ()])
def test_margin_ranking_loss(reduction, margin, shape):
    a = rand(*shape, dtype=ember.float64, requires_grad=True)
    b = rand(*shape, dtype=ember.float64, requires_grad=True, seed=1)
    t = ember.tensor(np.sign(np.random.default_rng(2).standard_normal(shape)),
                     dtype=ember.float64)
    fcheck(lambda f, a, b, t: f.margin_ranking_loss(a, b, t, margin, reduction=reduction), a, b, t)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(4, 5), (5,), (0, 3)])
def test_cosine_embedding_loss(reduction, margin, shape):
    a = rand(*shape, dtype=ember.float64, requires_grad=True)
    b = rand(*shape, dtype=ember.float64, requires_grad=True, seed=1)
    rows = shape[:-1]
    t = ember.tensor(np.where(np.random.default_rng(2).random(rows) < 0.5, -1.0, 1.0),
                     dtype=ember.float64)
    fcheck(lambda f, a, b, t: f.cosine_embedding_loss(a, b, t, margin, reduction=reduction),
           a, b, t)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("opts", [{}, {"margin": 0.5, "p": 1.0}, {"swap": True},
                                  {"p": 3.0, "eps": 1e-3, "swap": True}])
@pytest.mark.parametrize("shape", [(4, 5), (5,)])
def test_triplet_margin_loss(reduction, opts, shape):
    a, p, n = (rand(*shape, dtype=ember.float64, requires_grad=True, seed=s) for s in (0, 1, 2))
    fcheck(lambda f, a, p, n: f.triplet_margin_loss(a, p, n, reduction=reduction, **opts), a, p, n)


@pytest.mark.parametrize("fn", [
    lambda f, a, b, t: f.cosine_embedding_loss(a, b, t[:4]),
    lambda f, a, b, t: f.cosine_embedding_loss(a, b[:, :3], t),
    lambda f, a, b, t: f.cosine_embedding_loss(a[0], b[0], t),
    lambda f, a, b, t: f.triplet_margin_loss(a, b, b[:, :3]),
    lambda f, a, b, t: f.triplet_margin_loss(a, b, b, margin=-1.0),
    lambda f, a, b, t: f.triplet_margin_loss(a, b, b[0]),
    lambda f, a, b, t: f.hinge_embedding_loss(a, b[:, :3]),
    lambda f, a, b, t: f.margin_ranking_loss(a, b, t),
])
def test_embedding_loss_errors(fn):
    fraises(fn, rand(5, 4), rand(5, 4, seed=1), ember.ones(5))


# ====================================================================== multi-class margins
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("opts", [{}, {"p": 2, "margin": 0.5}, {"weight": True}])
@pytest.mark.parametrize("xs", [(4, 5), (5,), (0, 5), ()])
def test_multi_margin_loss(reduction, opts, xs):
    if xs and not xs[0] and reduction == "mean":
        xs = (1, 5)  # torch 2.13 returns uninitialised memory for the mean over an empty batch
    kw = dict(opts)
    c = xs[-1] if xs else 1
    w = rand(c, dtype=ember.float64, low=0.1, high=2, seed=3) if kw.pop("weight", 0) else None
    x = rand(*xs, dtype=ember.float64, requires_grad=True)
    t = _targets(xs[:1] if len(xs) == 2 else () if not xs else (1,), c)
    fcheck(lambda f, x, t, w: f.multi_margin_loss(x, t, weight=w, reduction=reduction, **kw),
           x, t, w)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("xs", [(4, 5), (5,), (0, 5)])
def test_multilabel_losses(reduction, xs):
    x = rand(*xs, dtype=ember.float64, requires_grad=True)
    rows = np.full((int(np.prod(xs[:-1])), xs[-1]), -1)
    for i, row in enumerate(rows):  # row i lists i % 4 classes (repeats allowed), -1, junk
        row[: i % 4] = np.random.default_rng(i).integers(0, xs[-1], i % 4)
        row[i % 4 + 1:] = 2
    t = ember.tensor(rows.reshape(xs), dtype=ember.int64)
    if xs[0] or reduction != "mean":  # torch 2.13's empty-batch mean is uninitialised memory
        fcheck(lambda f, x, t: f.multilabel_margin_loss(x, t, reduction=reduction), x, t)
    y = rand(*xs, dtype=ember.float64, low=0, high=1, seed=2, requires_grad=True)
    w = rand(xs[-1], dtype=ember.float64, low=0.1, high=2, seed=3)
    fcheck(lambda f, x, y, w: f.multilabel_soft_margin_loss(x, y, w, reduction=reduction), x, y, w)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("dist", [None, "cos"])
def test_triplet_margin_with_distance_loss(reduction, swap, dist):
    a, p, n = (rand(4, 5, dtype=ember.float64, requires_grad=True, seed=s) for s in (0, 1, 2))

    def fn(f, a, p, n):
        d = None if dist is None else (lambda x, y: 1 - f.cosine_similarity(x, y))
        return f.triplet_margin_with_distance_loss(a, p, n, distance_function=d, margin=0.7,
                                                   swap=swap, reduction=reduction)
    fcheck(fn, a, p, n)


@pytest.mark.parametrize("fn", [
    lambda f, x, t: f.multi_margin_loss(x, t[:2]),
    lambda f, x, t: f.multi_margin_loss(x, t + 7),
    lambda f, x, t: f.multi_margin_loss(x, t, p=3),
    lambda f, x, t: f.multi_margin_loss(x, t, weight=x[:1]),
    lambda f, x, t: f.multi_margin_loss(x.unsqueeze(0), t),
    lambda f, x, t: f.multilabel_margin_loss(x, t),
    lambda f, x, t: f.multilabel_margin_loss(x, (x * 0).long() + 7),
    lambda f, x, t: f.multilabel_soft_margin_loss(x, x[:, :4]),
    lambda f, x, t: f.triplet_margin_with_distance_loss(x, x, x, margin=0.0),
])
def test_margin_loss_errors(fn):
    fraises(fn, rand(3, 5), longs(1, 2, 3))


def test_gumbel_softmax():
    x = rand(200, 5, dtype=ember.float64, requires_grad=True)
    y = EF.gumbel_softmax(x, tau=0.5)
    np.testing.assert_allclose(y.detach().numpy().sum(1), 1.0)
    h = EF.gumbel_softmax(x, hard=True)
    hv = h.detach().numpy()
    assert set(np.unique(hv)) == {0.0, 1.0} and np.all(hv.sum(1) == 1)
    # samples follow softmax(x): the most likely class wins most often
    big = ember.tensor([[0.0, 3.0, 0.0]] * 2000, dtype=ember.float64)
    freq = EF.gumbel_softmax(big, hard=True).numpy().mean(0)
    np.testing.assert_allclose(freq, np.exp([0, 3, 0]) / np.exp([0, 3, 0]).sum(), atol=0.03)
    h.sum().backward()  # straight-through: gradient of the soft sample
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()
