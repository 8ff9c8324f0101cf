"""Helpers shared by the random-number test files (test_random*.py): generators, and the
Kolmogorov-Smirnov and chi-square statistics the distribution tests use."""

from __future__ import annotations

import math

import numpy as np
import torch
from oracle import to_numpy

import ember

E, T = ember, torch


def gen(m, seed=0):
    return m.Generator().manual_seed(seed)


# ---------------------------------------------------------------------- statistics helpers
_erf = np.vectorize(math.erf, otypes=[np.float64])


def normal_cdf(x, mean=0.0, std=1.0):
    return 0.5 * (1 + _erf((np.asarray(x, np.float64) - mean) / (std * math.sqrt(2))))


def ks_stat(samples, cdf) -> float:
    """The Kolmogorov-Smirnov distance between the samples' empirical CDF and ``cdf``."""
    x = np.sort(np.asarray(samples, np.float64).ravel())
    n = x.size
    f = cdf(x)
    i = np.arange(1, n + 1)
    return float(max((i / n - f).max(), (f - (i - 1) / n).max()))


def assert_ks(samples, cdf):
    n = np.asarray(samples).size
    stat = ks_stat(samples, cdf)
    assert stat < 1.95 / math.sqrt(n), f"KS statistic {stat:.4f} too large for n={n}"


def chi2_crit(df: int) -> float:
    """The 0.999 quantile of chi-square(df) (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + 3.09 * math.sqrt(2 / (9 * df))) ** 3


def assert_chi2(counts, probs):
    counts = np.asarray(counts, np.float64)
    probs = np.asarray(probs, np.float64)
    expected = counts.sum() * probs / probs.sum()
    assert expected.min() >= 5, "bins too small for a chi-square test"
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2_crit(len(counts) - 1), f"chi-square {stat:.1f} for {len(counts)} bins"


def np_(t) -> np.ndarray:
    return to_numpy(t).astype(np.float64) if t.dtype.is_floating_point else to_numpy(t)


N = 20000


# in-place samplers, by case name (the op name first)
IN_PLACE = {
    "uniform_": lambda x, g: x.uniform_(generator=g),
    "uniform_ range": lambda x, g: x.uniform_(2, 5),
    "uniform_ kw": lambda x, g: x.uniform_(to=5.0),
    "normal_": lambda x, g: x.normal_(generator=g),
    "normal_ args": lambda x, g: x.normal_(2, 3),
    "normal_ kw": lambda x, g: x.normal_(mean=1, std=2),
    "normal_ std 0": lambda x, g: x.normal_(2, 0),
    "random_": lambda x, g: x.random_(generator=g),
    "random_ to": lambda x, g: x.random_(10),
    "random_ to kw": lambda x, g: x.random_(to=10),
    "random_ from to": lambda x, g: x.random_(3, 10),
    "random_ from None": lambda x, g: x.random_(3, None),
    "exponential_": lambda x, g: x.exponential_(generator=g),
    "exponential_ kw": lambda x, g: x.exponential_(lambd=3),
    "geometric_": lambda x, g: x.geometric_(0.5, generator=g),
    "geometric_ kw": lambda x, g: x.geometric_(p=0.3),
    "log_normal_": lambda x, g: x.log_normal_(generator=g),
    "log_normal_ kw": lambda x, g: x.log_normal_(mean=1, std=0.5),
    "cauchy_": lambda x, g: x.cauchy_(generator=g),
    "cauchy_ kw": lambda x, g: x.cauchy_(median=1, sigma=2),
    "bernoulli_": lambda x, g: x.bernoulli_(generator=g),
    "bernoulli_ p": lambda x, g: x.bernoulli_(0.1),
    "bernoulli_ tensor p": lambda x, g: x.bernoulli_(x.new_full((3,), 0.9).float()),
    "bernoulli_ f64 tensor p": lambda x, g: x.bernoulli_(x.new_full((3,), 0.5).double()),
}
