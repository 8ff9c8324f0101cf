"""End to end: small models trained for 8 SGD steps in ember and in torch from the same
weights on the same data must give the same losses and the same final weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nn_compare import copy_state
from oracle import assert_same, to_torch

import ember


def cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding="same", bias=False),
                         nn.GroupNorm(2, 8), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.0), nn.Linear(8, 3))


def lstm(lib):
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 6, padding_idx=0)
            self.rnn = nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(16, 8, batch_first=True)
            self.norm = nn.LayerNorm(8)
            self.out = nn.Linear(8, 12)

        def forward(self, idx):
            h, _ = self.rnn(self.emb(idx))
            h, _ = self.gru(h)
            return self.out(self.norm(h))
    return LM()


def encoder(lib):
    nn = lib.nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 8)
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.out = nn.Linear(8, 12)

        def forward(self, idx):
            mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1])
            return self.out(self.enc(self.emb(idx), mask=mask, is_causal=True))
    return Enc()


def _data(kind, step):
    rng = np.random.default_rng(step)
    if kind == "cnn":
        x = ember.tensor(rng.standard_normal((8, 1, 8, 8)), dtype=ember.float32)
        return x, ember.tensor(rng.integers(0, 3, 8))
    seq = ember.tensor(rng.integers(0, 12, (4, 7)))
    return seq[:, :-1], seq[:, 1:]


@pytest.mark.parametrize("kind,build,lr", [("cnn", cnn, 0.1), ("seq", lstm, 0.5),
                                           ("seq", encoder, 0.1)],
                         ids=["cnn-batchnorm", "lstm-gru", "transformer-encoder"])
def test_training_matches_torch(kind, build, lr):
    torch.manual_seed(0)
    tm = build(torch)
    em = build(ember)
    copy_state(tm, em)
    opt_t = torch.optim.SGD(tm.parameters(), lr=lr, momentum=0.9)
    opt_e = ember.optim.SGD(em.parameters(), lr=lr, momentum=0.9)
    loss_t_fn, loss_e_fn = torch.nn.CrossEntropyLoss(), ember.nn.CrossEntropyLoss()
    losses_e, losses_t = [], []
    x, y = _data(kind, 0)  # one fixed batch, so the loss must fall
    for step in range(8):
        for m, opt, fn, lx, ly, out in ((em, opt_e, loss_e_fn, x, y, losses_e),
                                        (tm, opt_t, loss_t_fn, to_torch(x), to_torch(y),
                                         losses_t)):
            opt.zero_grad()
            logits = m(lx)
            loss = fn(logits.reshape(-1, logits.shape[-1]), ly.reshape(-1))
            loss.backward()
            opt.step()
            out.append(loss.item())
    np.testing.assert_allclose(losses_e, losses_t, rtol=1e-4)
    assert losses_e[-1] < losses_e[0]
    for (n, pe), (_, pt) in zip(em.state_dict().items(), tm.state_dict().items()):
        assert_same(pe, pt, rtol=1e-3, atol=1e-4, path=n)
    em.eval()
    tm.eval()
    x, _ = _data(kind, 99)
    assert_same(em(x), tm(to_torch(x)), rtol=1e-3, atol=1e-4)


def test_optimizer_survives_dtype_move():
    """An optimizer built before .double() still updates the module (parameters keep their
    identity across dtype moves, as in torch)."""
    m = ember.nn.Linear(3, 2)
    opt = ember.optim.SGD(m.parameters(), lr=1.0)
    m.double()
    before = m.weight.detach().clone()
    m(ember.ones(4, 3, dtype=ember.float64)).sum().backward()
    opt.step()
    assert not bool((m.weight == before).all())
    assert m.weight.dtype is ember.float64


@pytest.mark.parametrize("build", [cnn, lstm, encoder], ids=["cnn", "lstm", "encoder"])
def test_checkpoints_interchange_with_torch(build, tmp_path):
    """A state dict saved by torch loads into the ember model (and back) through files."""
    torch.manual_seed(1)
    tm = build(torch).eval()
    torch.save(tm.state_dict(), tmp_path / "t.pt")
    em = build(ember).eval()
    em.load_state_dict(ember.load(tmp_path / "t.pt"))
    x, _ = _data("cnn" if build is cnn else "seq", 3)
    assert_same(em(x), tm(to_torch(x)), rtol=1e-4, atol=1e-5)
    ember.save(em.state_dict(), tmp_path / "e.pt")
    tm2 = build(torch).eval()
    tm2.load_state_dict(torch.load(tmp_path / "e.pt"))
    assert_same(em(x), tm2(to_torch(x)), rtol=1e-4, atol=1e-5)
