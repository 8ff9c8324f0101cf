"""Helpers shared by the shape test files (test_shape*.py): dtype lists and random inputs,
contiguous or not."""

from __future__ import annotations

import math

import torch.nn.functional as TF
from oracle import rand

import ember
from ember.ops.padding import pad as ember_pad

FLOATS = [ember.float32, ember.float64]
HALVES = [ember.float16, ember.bfloat16]
INTS = [ember.bool, ember.uint8, ember.int32, ember.int64]
NAN, INF = math.nan, math.inf


def F(m):
    """``nn.functional.pad`` of either library."""
    return ember_pad if m is ember else TF.pad


def make(shape, dtype=ember.float64, noncontig=False, requires_grad=False, seed=0):
    """A random input; the non-contiguous variant is a permuted view of a permuted tensor."""
    if noncontig and can_be_noncontiguous(shape):
        base = rand(*reversed(shape), dtype=dtype, seed=seed)
        x = base.permute(tuple(reversed(range(len(shape)))))
        assert not x.is_contiguous()
        return x.detach().requires_grad_() if requires_grad else x
    return rand(*shape, dtype=dtype, seed=seed, requires_grad=requires_grad)


def can_be_noncontiguous(shape) -> bool:
    return all(s > 0 for s in shape) and sum(s > 1 for s in shape) >= 2


def resolved(fn):
    """``fn`` with PyTorch's lazily conjugated results materialised (for the oracle)."""
    def run(m, *xs):
        out = fn(m, *xs)
        if isinstance(out, (tuple, list)):
            return type(out)(m.resolve_conj(o) for o in out)
        return m.resolve_conj(out)
    return run
