"""Loss modules against torch: options, buffers (weight, pos_weight), reductions, gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_compare import pair, randint, randn, run_both

import ember


def _r(*shape, seed=0, grad=True, scale=1.0):
    return lambda: randn(*shape, seed=seed, requires_grad=grad, scale=scale)


def _prob(*shape, seed=0, grad=True):
    def make():
        p = np.random.default_rng(seed).uniform(0.05, 0.95, shape)
        t = ember.tensor(p, dtype=ember.float64)
        return t.requires_grad_() if grad else t
    return make


def _logprob(*shape, seed=0):
    return lambda: randn(*shape, seed=seed, requires_grad=False).log_softmax(-1)


def _int(high, *shape, seed=0, low=0):
    return lambda: randint(high, *shape, seed=seed, low=low)


def _sign(*shape, seed=0):
    return lambda: ember.tensor(np.random.default_rng(seed).choice([-1.0, 1.0], shape))


W4 = randn(4, seed=7, requires_grad=False).abs() + 0.5

LOSSES = [  # (name, kwargs, input makers)
    ("CrossEntropyLoss", {}, [_r(5, 4), _int(4, 5)]),
    ("CrossEntropyLoss", {"weight": W4, "reduction": "sum"}, [_r(5, 4), _int(4, 5)]),
    ("CrossEntropyLoss", {"ignore_index": 1, "label_smoothing": 0.2}, [_r(6, 4), _int(4, 6)]),
    ("CrossEntropyLoss", {"reduction": "none"}, [_r(2, 4, 3), _int(4, 2, 3)]),
    ("CrossEntropyLoss", {"weight": W4}, [_r(5, 4), _prob(5, 4, grad=False)]),
    ("CrossEntropyLoss", {}, [_r(4), _int(4)]),
    ("NLLLoss", {}, [_r(5, 4), _int(4, 5)]),
    ("NLLLoss", {"weight": W4, "ignore_index": 2}, [_r(2, 4, 3, 2), _int(4, 2, 3, 2)]),
    ("MSELoss", {}, [_r(3, 4), _r(3, 4, seed=1)]),
    ("MSELoss", {"reduction": "none"}, [_r(3, 4), _r(4, seed=1, grad=False)]),
    ("L1Loss", {"reduction": "sum"}, [_r(3, 4), _r(3, 4, seed=1)]),
    ("SmoothL1Loss", {"beta": 0.5}, [_r(3, 4), _r(3, 4, seed=1)]),
    ("HuberLoss", {"delta": 0.7, "reduction": "none"}, [_r(3, 4), _r(3, 4, seed=1)]),
    ("BCELoss", {}, [_prob(3, 4), _prob(3, 4, seed=1, grad=False)]),
    ("BCELoss", {"weight": randn(4, seed=3, requires_grad=False).abs()},
     [_prob(3, 4), _prob(3, 4, seed=1, grad=False)]),
    ("BCEWithLogitsLoss", {}, [_r(3, 4), _prob(3, 4, seed=1)]),
    ("BCEWithLogitsLoss", {"weight": W4, "pos_weight": W4 * 2, "reduction": "sum"},
     [_r(3, 4, scale=3.0), _prob(3, 4, seed=1, grad=False)]),
    ("KLDivLoss", {"reduction": "batchmean"}, [_logprob(3, 4), _prob(3, 4, seed=1)]),
    ("KLDivLoss", {"log_target": True, "reduction": "none"}, [_r(3, 4), _r(3, 4, seed=1)]),
    ("MarginRankingLoss", {"margin": 0.3}, [_r(6), _r(6, seed=1), _sign(6)]),
    ("SoftMarginLoss", {}, [_r(3, 4), _sign(3, 4)]),
    ("PoissonNLLLoss", {}, [_r(3, 4), _prob(3, 4, seed=1, grad=False)]),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 1e-6},
     [_prob(3, 4), lambda: ember.tensor([[0.0, 1, 2, 3]] * 3, dtype=ember.float64)]),
    ("GaussianNLLLoss", {}, [_r(3, 4), _r(3, 4, seed=1), _prob(3, 4, seed=2)]),
    ("GaussianNLLLoss", {"full": True, "reduction": "sum"},
     [_r(3, 4), _r(3, 4, seed=1), _prob(3, 1, seed=2)]),
    ("TripletMarginLoss", {}, [_r(5, 3), _r(5, 3, seed=1), _r(5, 3, seed=2)]),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True, "reduction": "none"},
     [_r(5, 3), _r(5, 3, seed=1), _r(5, 3, seed=2)]),
    ("TripletMarginWithDistanceLoss", {}, [_r(5, 3), _r(5, 3, seed=1), _r(5, 3, seed=2)]),
    ("TripletMarginWithDistanceLoss", {"swap": True, "margin": 2.0, "reduction": "sum"},
     [_r(5, 3), _r(5, 3, seed=1), _r(5, 3, seed=2)]),
    ("CosineEmbeddingLoss", {"margin": 0.2}, [_r(5, 3), _r(5, 3, seed=1), _sign(5)]),
    ("HingeEmbeddingLoss", {"margin": 0.5, "reduction": "none"}, [_r(3, 4), _sign(3, 4)]),
    ("MultiLabelSoftMarginLoss", {}, [_r(3, 4), _prob(3, 4, seed=1, grad=False)]),
    ("MultiLabelSoftMarginLoss", {"weight": W4, "reduction": "none"},
     [_r(3, 4), _prob(3, 4, seed=1, grad=False)]),
    ("MultiMarginLoss", {}, [_r(5, 4), _int(4, 5)]),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5, "weight": W4, "reduction": "sum"},
     [_r(5, 4), _int(4, 5)]),
    ("MultiMarginLoss", {"reduction": "none"}, [_r(4), _int(4)]),
]


@pytest.mark.parametrize("case", LOSSES, ids=[f"{c[0]}-{k}" for k, c in enumerate(LOSSES)])
def test_loss_matches_torch(case):
    name, kwargs, makers = case
    em, tm = pair(name, **kwargs)
    assert repr(em) == repr(tm)
    run_both(em, tm, [m() for m in makers])


def test_weight_buffers_follow_the_module():
    for name, kw, keys in [("CrossEntropyLoss", {"weight": W4}, ["weight"]),
                           ("BCEWithLogitsLoss", {"pos_weight": W4}, ["pos_weight"]),
                           ("BCEWithLogitsLoss", {}, []), ("NLLLoss", {}, [])]:
        em, tm = pair(name, **{k: v.float() for k, v in kw.items()}, dtype=ember.float32)
        assert list(em.state_dict()) == list(tm.state_dict()) == keys
        em.double()
        assert all(b.dtype is ember.float64 for b in em.buffers())


def test_custom_distance_function():
    def dist(a, b):
        return (a - b).abs().sum(-1)

    args = [randn(4, 3), randn(4, 3, seed=1), randn(4, 3, seed=2)]
    em = ember.nn.TripletMarginWithDistanceLoss(distance_function=dist, margin=0.5)
    tm = torch.nn.TripletMarginWithDistanceLoss(distance_function=dist, margin=0.5)
    run_both(em, tm, args)


@pytest.mark.parametrize("size_average,reduce,expected", [
    (None, False, "none"), (False, None, "sum"), (True, True, "mean"), (False, False, "none"),
])
def test_legacy_reduction_arguments(size_average, reduce, expected):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        em = ember.nn.MSELoss(size_average=size_average, reduce=reduce)
    with pytest.warns(UserWarning):
        tm = torch.nn.MSELoss(size_average=size_average, reduce=reduce)
    assert em.reduction == tm.reduction == expected


def test_nllloss2d_is_deprecated():
    with pytest.warns(UserWarning, match="NLLLoss2d has been deprecated"):
        ember.nn.NLLLoss2d()


BAD = [
    ("TripletMarginLoss", {"margin": 0.0}, None),
    ("TripletMarginWithDistanceLoss", {"margin": -1.0}, None),
    ("MultiMarginLoss", {"p": 3}, None),
    ("MSELoss", {"reduction": "avg"}, [_r(3), _r(3, seed=1)]),
    ("CrossEntropyLoss", {}, [_r(5, 4), _int(4, 6)]),
    ("CrossEntropyLoss", {}, [_r(5, 4), _int(9, 5, low=5)]),
    ("NLLLoss", {"weight": randn(3, requires_grad=False)}, [_r(5, 4), _int(4, 5)]),
    ("BCELoss", {}, [_prob(3, 4), _prob(3, 5, seed=1)]),
    ("MultiLabelSoftMarginLoss", {"reduction": "avg"}, [_r(3, 4), _prob(3, 4, seed=1)]),
    ("TripletMarginWithDistanceLoss", {}, [_r(5, 3), _r(3, seed=1), _r(5, 3, seed=2)]),
]


@pytest.mark.parametrize("case", BAD, ids=[f"{c[0]}-{k}" for k, c in enumerate(BAD)])
def test_bad_arguments(case):
    from oracle import to_torch
    name, kwargs, makers = case
    if makers is None:
        with pytest.raises(Exception) as te:
            getattr(torch.nn, name)(**kwargs)
        with pytest.raises(type(te.value)):
            getattr(ember.nn, name)(**kwargs)
        return
    args = [m() for m in makers]
    em = getattr(ember.nn, name)(**kwargs)
    tm = getattr(torch.nn, name)(**to_torch(kwargs))
    with pytest.raises(Exception) as te:
        tm(*to_torch(args))
    with pytest.raises(type(te.value)):
        em(*args)
