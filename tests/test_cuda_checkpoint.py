"""GPU tier: activation checkpointing on CUDA tensors: the CUDA generator's state replays (the
dropout masks of the recomputation are the forward's), gradients equal the plain program's and
torch's CUDA checkpointing of the same program."""

import functools

import numpy as np
import pytest

import ember
import ember.utils.checkpoint as ecp
from oracle import assert_same
from test_cuda import GPU_TIER, torch

pytestmark = GPU_TIER

X = np.random.default_rng(0).standard_normal((32, 48)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((48, 48)).astype(np.float32)


def block(lib, x, w, p):
    h = lib.tanh(x @ w)
    return lib.nn.functional.dropout(h, p, True) @ w


def run(lib, cp, variant, p, seed=5):
    x = lib.tensor(X).cuda().requires_grad_()
    w = lib.tensor(W).cuda().requires_grad_()
    lib.manual_seed(seed)
    if cp is None:
        y = block(lib, x, w, p)
    else:
        y = cp.checkpoint(functools.partial(block, lib), x, w, p, use_reentrant=variant)
    y.square().sum().backward()
    return y.detach().cpu(), x.grad.cpu(), w.grad.cpu()


@pytest.mark.parametrize("variant", [True, False])
def test_cuda_dropout_masks_replay(variant):
    got = run(ember, ecp, variant, 0.5)
    want = run(ember, None, variant, 0.5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("variant", [True, False])
def test_cuda_checkpoint_matches_torch(variant):
    got = run(ember, ecp, variant, 0.0)
    want = run(torch, torch.utils.checkpoint, variant, 0.0)
    assert_same(got, want, rtol=1e-4, atol=1e-4)


def test_save_on_cpu_round_trip():
    x = ember.tensor(X).cuda().requires_grad_()
    with ember.autograd.graph.save_on_cpu(pin_memory=True):
        y = (x.sin() * x).sum()
    y.backward()
    x2 = ember.tensor(X).cuda().requires_grad_()
    (x2.sin() * x2).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), x2.grad.cpu().numpy(), rtol=1e-6)
