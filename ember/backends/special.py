"""Special functions numpy lacks (erf, lgamma, digamma, ...), vectorised over arrays."""

from __future__ import annotations

import math

import numpy as np


def _via_math(fn):
    u = np.frompyfunc(fn, 1, 1)

    def apply(x):
        x = np.asarray(x)
        return u(x.astype(np.float64)).astype(x.dtype) if x.size else x.copy()
    return apply


def sigmoid(x):
    # 1 / (1 + exp(-x)) is exact enough and saturates correctly at both ends
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


erf = _via_math(math.erf)
erfc = _via_math(math.erfc)


def _lgamma(v):
    try:
        return math.lgamma(v)
    except ValueError:
        return math.inf


lgamma = _via_math(_lgamma)


def erfinv(x):
    x = np.asarray(x)
    out = np.empty(x.shape, np.float64)
    xf = x.astype(np.float64).reshape(-1)
    o = out.reshape(-1)
    for i, v in enumerate(xf):
        if v <= -1 or v >= 1:
            o[i] = -math.inf if v == -1 else math.inf if v == 1 else math.nan
            continue
        y = 0.0  # Newton on erf(y) = v
        for _ in range(100):
            e = math.erf(y) - v
            y -= e / (2 / math.sqrt(math.pi) * math.exp(-y * y))
            if abs(e) < 1e-17:
                break
        o[i] = y
    return out.astype(x.dtype)


def _digamma(v):
    if v <= 0 and v == math.floor(v):
        return math.nan if v < 0 else -math.inf
    r = 0.0
    if v < 0:  # reflection
        return _digamma(1 - v) - math.pi / math.tan(math.pi * v)
    while v < 6:
        r -= 1 / v
        v += 1
    f = 1 / (v * v)
    return r + math.log(v) - 0.5 / v - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (
        1 / 240 - f / 132))))


digamma = _via_math(_digamma)


def _polygamma_n(n, v):
    if n == 0:
        return _digamma(v)
    # (-1)^(n+1) n! sum_k 1/(v+k)^(n+1), with asymptotic tail
    s = 0.0
    while v < 20:
        s += 1 / v ** (n + 1)
        v += 1
    tail = math.factorial(n - 1) / v ** n + math.factorial(n) / (2 * v ** (n + 1))
    tail += math.factorial(n + 1) / (12 * v ** (n + 2))
    tail -= math.factorial(n + 3) / (720 * v ** (n + 4))
    return (-1) ** (n + 1) * (math.factorial(n) * s + tail)


def polygamma(n, x):
    return _via_math(lambda v: _polygamma_n(n, v))(x)
