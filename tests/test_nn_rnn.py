"""RNN, LSTM, GRU and their cells against torch with the same weights: outputs, final
states, input/state gradients and every parameter gradient, over the option combinations."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from nn_compare import pair, randn, run_both
from oracle import to_torch

import ember

MODES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]
T, B, I, H = 4, 3, 3, 4


def _inputs(name, kw, batch_first, layers, dirs, h0, unbatched=False):
    shape = (T, I) if unbatched else ((B, T, I) if batch_first else (T, B, I))
    xs = [randn(*shape)]
    if h0:
        lead = (layers * dirs,) if unbatched else (layers * dirs, B)
        h = randn(*lead, kw.get("proj_size") or H, seed=1)
        xs.append((h, randn(*lead, H, seed=2)) if name == "LSTM" else h)
    return xs


@pytest.mark.parametrize("mode", MODES, ids=["tanh", "relu", "lstm", "gru"])
@pytest.mark.parametrize("layers,bidirectional,batch_first",
                         list(itertools.product([1, 2], [False, True], [False, True])))
def test_sequence_options(mode, layers, bidirectional, batch_first):
    name, kw = mode
    em, tm = pair(name, I, H, num_layers=layers, bidirectional=bidirectional,
                  batch_first=batch_first, **kw)
    dirs = 2 if bidirectional else 1
    run_both(em, tm, _inputs(name, kw, batch_first, layers, dirs, h0=layers == 2))


@pytest.mark.parametrize("mode", MODES, ids=["tanh", "relu", "lstm", "gru"])
@pytest.mark.parametrize("bias,h0,unbatched", [(False, True, False), (True, False, True),
                                               (False, True, True)])
def test_bias_state_and_unbatched(mode, bias, h0, unbatched):
    name, kw = mode
    em, tm = pair(name, I, H, bias=bias, num_layers=2, bidirectional=True, **kw)
    run_both(em, tm, _inputs(name, kw, False, 2, 2, h0, unbatched))


@pytest.mark.parametrize("layers,bidirectional,batch_first,h0",
                         [(1, False, False, False), (2, True, True, True), (2, False, False, True)])
def test_lstm_projection(layers, bidirectional, batch_first, h0):
    kw = {"proj_size": 2}
    em, tm = pair("LSTM", I, H, num_layers=layers, bidirectional=bidirectional,
                  batch_first=batch_first, **kw)
    run_both(em, tm, _inputs("LSTM", kw, batch_first, layers, 2 if bidirectional else 1, h0))


def test_float32_lstm_and_gru():
    for name in ("LSTM", "GRU"):
        em, tm = pair(name, I, H, num_layers=2, dtype=ember.float32)
        run_both(em, tm, [randn(T, B, I, dtype=ember.float32)], rtol=1e-4, atol=1e-5)


def test_dropout_between_layers():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em, tm = pair("GRU", I, H, num_layers=3, dropout=0.5)
    x = randn(T, B, I, requires_grad=False)
    run_both(em, tm, [x], train=False)  # no dropout in eval
    em.train()
    ember.manual_seed(0)
    a = em(x)[0]
    ember.manual_seed(1)
    b = em(x)[0]
    assert not bool((a == b).all())  # dropout acts while training
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        ember.nn.LSTM(I, H, dropout=0.2)


CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}),
         ("LSTMCell", {}), ("GRUCell", {}), ("GRUCell", {"bias": False})]


@pytest.mark.parametrize("cell", CELLS, ids=[f"{c[0]}-{k}" for k, c in enumerate(CELLS)])
@pytest.mark.parametrize("state", ["none", "given", "unbatched"])
def test_cells(cell, state):
    name, kw = cell
    em, tm = pair(name, I, H, **kw)
    lead = () if state == "unbatched" else (B,)
    xs = [randn(*lead, I)]
    if state != "none":
        h = randn(*lead, H, seed=1)
        xs.append((h, randn(*lead, H, seed=2)) if name == "LSTMCell" else h)
    run_both(em, tm, xs)


def test_parameter_names_and_all_weights():
    em, tm = pair("LSTM", I, H, num_layers=2, bidirectional=True, proj_size=2)
    assert em._flat_weights_names == tm._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in em.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    em.flatten_parameters()


def test_positional_arguments_and_repr():
    for args, kw in [((3, 4, 2, "relu", False, True, 0.0, True), {}),
                     ((3, 4, 2, False, True, 0.0, True), {"name": "LSTM"}),
                     ((3, 4, 1, True, False, 0.0, False, 2), {"name": "LSTM"})]:
        name = kw.get("name", "RNN")
        e, t = getattr(ember.nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict())


BAD_CTOR = [
    ("RNN", (3, 4), {"nonlinearity": "sigmoid"}),
    ("GRU", (3, 4), {"proj_size": 2}),
    ("LSTM", (3, 4), {"proj_size": 4}),
    ("LSTM", (3, 4), {"proj_size": -1}),
    ("LSTM", (3, 4), {"dropout": 1.5}),
    ("LSTM", (3, 4), {"dropout": True}),
    ("GRU", (3, 4), {"num_layers": 0}),
    ("GRU", (3, 0), {}),
    ("GRU", (3, 4.0), {}),
    ("GRU", (3, 4), {"bias": 1}),
]


@pytest.mark.parametrize("case", BAD_CTOR, ids=[f"{c[0]}-{k}" for k, c in enumerate(BAD_CTOR)])
def test_bad_constructor(case):
    name, args, kw = case
    with pytest.raises(Exception) as te:
        getattr(torch.nn, name)(*args, **kw)
    with pytest.raises(type(te.value)) as ee:
        getattr(ember.nn, name)(*args, **kw)
    assert str(ee.value) == str(te.value)


BAD_CALL = [
    ("LSTM", lambda: [randn(T, B, I + 1)]),
    ("GRU", lambda: [randn(2, T, B, I)]),
    ("RNN", lambda: [randn(T)]),
    ("RNN", lambda: [randn(T, B, I), randn(1, B + 1, H)]),
    ("RNN", lambda: [randn(T, B, I), randn(B, H)]),
    ("GRU", lambda: [randn(T, I), randn(1, 1, H)]),
    ("LSTM", lambda: [randn(T, B, I), (randn(1, B, H), randn(1, B, H + 1))]),
    ("LSTM", lambda: [randn(T, B, I), (randn(B, H), randn(1, B, H))]),
    ("LSTM", lambda: [randn(T, B, I, dtype=ember.float32)]),
    ("GRU", lambda: [randn(0, B, I)]),
    ("LSTMCell", lambda: [randn(B, I), (randn(B, H), randn(2, B, H))]),
    ("GRUCell", lambda: [randn(B, I + 1)]),
    ("RNNCell", lambda: [randn(B, I), randn(B + 1, H)]),
    ("RNNCell", lambda: [randn(2, B, I)]),
]


@pytest.mark.parametrize("case", BAD_CALL, ids=[f"{c[0]}-{k}" for k, c in enumerate(BAD_CALL)])
def test_bad_call(case):
    name, make = case
    em, tm = pair(name, I, H)
    args = make()
    with pytest.raises(Exception) as te:
        tm(*to_torch(args))
    with pytest.raises(type(te.value)) as ee:
        em(*args)
    assert str(ee.value) == str(te.value).replace("torch.", "ember.")


@pytest.mark.parametrize("mode", MODES, ids=["tanh", "relu", "lstm", "gru"])
def test_empty_batch(mode):
    name, kw = mode
    em, tm = pair(name, I, H, num_layers=2, bidirectional=True, **kw)
    run_both(em, tm, [randn(T, 0, I)])


def test_rnn_relu_cell_unknown_nonlinearity():
    cell = ember.nn.RNNCell(I, H)
    cell.nonlinearity = "gelu"
    with pytest.raises(RuntimeError, match="Unknown nonlinearity: gelu"):
        cell(randn(B, I))
