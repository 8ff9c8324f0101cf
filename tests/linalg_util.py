"""Helpers shared by the linear-algebra test files (test_linalg*.py): dtypes, tolerances and
well-conditioned inputs, so both libraries agree to their dtype's tolerance."""

from __future__ import annotations

import math

import torch
from oracle import raises_like, rand, to_torch

import ember

E = ember
FLOAT = [E.float32, E.float64]
ALL = FLOAT + [E.complex64, E.complex128]
INF = math.inf
LOOSE = {E.float32: dict(rtol=1e-4, atol=1e-4), E.complex64: dict(rtol=1e-4, atol=1e-4)}


def tol(dtype):
    return LOOSE.get(dtype, {})


def leaf(t):
    return t.detach().requires_grad_()


def well(*shape, dtype=E.float64, seed=0):
    """A well-conditioned square matrix (batch): uniform entries plus n on the diagonal."""
    n = shape[-1]
    return leaf(rand(*shape, dtype=dtype, seed=seed) + E.eye(n, dtype=dtype) * n)


def spd(*shape, dtype=E.float64, seed=0):
    """A Hermitian positive-definite matrix (batch): A A^H + n I."""
    a = rand(*shape, dtype=dtype, seed=seed)
    return leaf(a @ a.mH + E.eye(shape[-1], dtype=dtype) * shape[-1])


def same_error(fn, *args, exact=True):
    """fn(module, *args) raises the same exception type in both libraries, with the same
    message (``exact``) or at least a message."""
    e, t = raises_like(lambda: fn(E, *args), lambda: fn(torch, *to_torch(args)))
    if exact:
        assert str(e) == str(t)
    return e


def gradgrad(fn, inputs):
    assert E.autograd.gradgradcheck(fn, inputs)

