"""Random number generation: value ranges, statistical tests of each distribution
(Kolmogorov-Smirnov against the exact CDF, chi-square for discrete ones; fixed seeds make them
deterministic), autograd through samplers, and torch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import raises_like, to_numpy
from random_util import IN_PLACE, E, N, T, assert_chi2, assert_ks, gen, ks_stat, normal_cdf, np_


# ---------------------------------------------------------------------- value ranges
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_range_and_resolution(dtype):
    dt = getattr(E, dtype)
    x = np_(E.rand(200000, generator=gen(E, 1), dtype=dt))
    assert x.min() >= 0 and x.max() < 1
    digits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[dtype]
    assert np.all(x * 2 ** digits == np.floor(x * 2 ** digits))  # on the dtype's grid
    if digits <= 11:
        assert len(np.unique(x)) == 2 ** digits  # every grid value is reachable
    u = np_(E.zeros(100000, dtype=dt).uniform_(-3, 5, generator=gen(E, 2)))
    assert u.min() >= -3 and u.max() <= 5 and u.min() < -2.9 and u.max() > 4.9


# torch's random_() ranges: [0, 2**mantissa] for floats, [0, max] for integers
RANDOM_DEFAULT = {"float16": 2 ** 11, "bfloat16": 2 ** 8, "float32": 2 ** 24,
                  "float64": 2 ** 53, "int64": 2 ** 63 - 1, "int32": 2 ** 31 - 1,
                  "int16": 2 ** 15 - 1, "int8": 127, "uint8": 255, "bool": 1}


@pytest.mark.parametrize("dtype", list(RANDOM_DEFAULT))
def test_random_default_range(dtype):
    hi = RANDOM_DEFAULT[dtype]
    x = E.zeros(100000, dtype=getattr(E, dtype)).random_(generator=gen(E, 3))
    vals = to_numpy(x).astype(np.float64)
    assert vals.min() >= 0 and vals.max() <= hi
    if hi <= 2 ** 11:  # small ranges: both ends are hit
        assert vals.min() == 0 and vals.max() == hi
    else:
        assert vals.max() > hi * 0.999
    y = to_numpy(E.zeros(100000, dtype=getattr(E, dtype)).random_(1, None, generator=gen(E)))
    y = y.astype(np.float64)
    assert y.min() >= 1 and y.max() <= hi
    if hi <= 2 ** 11:
        assert y.min() == 1 and y.max() == hi


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "float32", "float16"])
def test_randint_range(dtype):
    lo, hi = (0, 7) if dtype == "uint8" else (-5, 7)
    x = to_numpy(E.randint(lo, hi, (50000,), dtype=getattr(E, dtype), generator=gen(E, 4)))
    assert set(np.unique(x).tolist()) == set(range(lo, hi))
    full = to_numpy(E.randint(-2 ** 63, 2 ** 63 - 1, (1000,), generator=gen(E)))
    assert full.min() < -2 ** 62 and full.max() > 2 ** 62


def test_randperm_is_permutation():
    for n, dtype in [(0, "int64"), (1, "int64"), (5, "int64"), (1000, "int32"),
                     (2049, "float16"), (257, "bfloat16"), (256, "uint8"), (128, "int8"),
                     (3000, "float32"), (3000, "float64")]:
        p = to_numpy(E.randperm(n, dtype=getattr(E, dtype), generator=gen(E, n)))
        assert np.array_equal(np.sort(p.astype(np.int64)), np.arange(n)), (n, dtype)
    assert not np.array_equal(to_numpy(E.randperm(50)), np.arange(50))


# ---------------------------------------------------------------------- continuous laws
def _uniform_cdf(a, b):
    return lambda x: np.clip((x - a) / (b - a), 0, 1)


CONTINUOUS = {
    "rand": (lambda g, dt: E.rand(N, generator=g, dtype=dt), _uniform_cdf(0, 1)),
    "rand_like": (lambda g, dt: E.rand_like(E.zeros(N, dtype=dt), generator=g),
                  _uniform_cdf(0, 1)),
    "uniform_": (lambda g, dt: E.zeros(N, dtype=dt).uniform_(-2, 3, generator=g),
                 _uniform_cdf(-2, 3)),
    "randn": (lambda g, dt: E.randn(N, generator=g, dtype=dt), normal_cdf),
    "randn_like": (lambda g, dt: E.randn_like(E.zeros(N, dtype=dt), generator=g), normal_cdf),
    "normal_": (lambda g, dt: E.zeros(N, dtype=dt).normal_(1.5, 0.5, generator=g),
                lambda x: normal_cdf(x, 1.5, 0.5)),
    "normal size": (lambda g, dt: E.normal(-1.0, 2.0, (N,), generator=g, dtype=dt),
                    lambda x: normal_cdf(x, -1.0, 2.0)),
    "normal TT": (lambda g, dt: E.normal(E.full((N,), 2.0, dtype=dt), E.full((N,), 3.0),
                                         generator=g), lambda x: normal_cdf(x, 2.0, 3.0)),
    "normal Tf": (lambda g, dt: E.normal(E.full((N,), 2.0, dtype=dt), 0.5, generator=g),
                  lambda x: normal_cdf(x, 2.0, 0.5)),
    "normal fT": (lambda g, dt: E.normal(2.0, E.full((N,), 0.5, dtype=dt), generator=g),
                  lambda x: normal_cdf(x, 2.0, 0.5)),
    "exponential_": (lambda g, dt: E.zeros(N, dtype=dt).exponential_(2.5, generator=g),
                     lambda x: 1 - np.exp(-2.5 * np.maximum(x, 0))),
    "log_normal_": (lambda g, dt: E.zeros(N, dtype=dt).log_normal_(0.3, 0.4, generator=g),
                    lambda x: normal_cdf(np.log(np.maximum(x, 1e-300)), 0.3, 0.4)),
    "cauchy_": (lambda g, dt: E.zeros(N, dtype=dt).cauchy_(1.0, 2.0, generator=g),
                lambda x: 0.5 + np.arctan((x - 1.0) / 2.0) / np.pi),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", CONTINUOUS)
def test_continuous_distribution(name, dtype):
    sample, cdf = CONTINUOUS[name]
    x = sample(gen(E, 10), getattr(E, dtype))
    assert x.dtype is getattr(E, dtype) and x.shape == (N,)
    vals = np_(x)
    if dtype == "bfloat16" and name in ("normal_", "normal size", "normal TT", "normal Tf",
                                        "normal fT", "log_normal_", "cauchy_", "randn",
                                        "randn_like", "exponential_"):
        # bfloat16 keeps 8 significant bits: compare against the CDF at the rounded grid,
        # allowing the rounding error of ~2**-9 relative
        cdf_lo = ks_stat(vals * (1 - 2 ** -8), cdf)
        cdf_hi = ks_stat(vals * (1 + 2 ** -8), cdf)
        assert min(cdf_lo, cdf_hi, ks_stat(vals, cdf)) < 1.95 / math.sqrt(N) + 0.01
    else:
        assert_ks(vals, cdf)


def test_ks_rejects_a_wrong_law():
    # the statistical tests can fail: uniform samples are far from a normal CDF
    assert ks_stat(np_(E.rand(N, generator=gen(E))), normal_cdf) > 0.3


@pytest.mark.parametrize("name", ["rand", "randn", "normal_", "uniform_", "normal size"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_parts(name, dtype):
    dt = getattr(E, dtype)
    sample = {"rand": lambda g: E.rand(N, generator=g, dtype=dt),
              "randn": lambda g: E.randn(N, generator=g, dtype=dt),
              "normal_": lambda g: E.zeros(N, dtype=dt).normal_(1.0, 2.0, generator=g),
              "uniform_": lambda g: E.zeros(N, dtype=dt).uniform_(-1, 1, generator=g),
              "normal size": lambda g: E.normal(0.0, 3.0, (N,), dtype=dt, generator=g)}[name]
    # torch: complex normals put variance std**2 / 2 in each part; uniform parts independently
    cdf = {"rand": _uniform_cdf(0, 1), "randn": lambda x: normal_cdf(x, 0, math.sqrt(0.5)),
           "normal_": lambda x: normal_cdf(x, 1.0, 2 * math.sqrt(0.5)),
           "uniform_": _uniform_cdf(-1, 1),
           "normal size": lambda x: normal_cdf(x, 0.0, 3 * math.sqrt(0.5))}[name]
    x = to_numpy(sample(gen(E, 20)))
    assert x.dtype == np.dtype(dtype)
    assert_ks(x.real, cdf)
    assert_ks(x.imag, cdf)
    assert abs(np.corrcoef(x.real, x.imag)[0, 1]) < 0.03


def test_complex_normal_tensor_mean():
    x = to_numpy(E.normal(E.full((N,), 1 + 2j, dtype=E.complex64), 2.0, generator=gen(E)))
    assert_ks(x.real, lambda v: normal_cdf(v, 1.0, math.sqrt(2)))
    assert_ks(x.imag, lambda v: normal_cdf(v, 2.0, math.sqrt(2)))


def test_normal_per_element_parameters():
    mean = E.tensor([-10.0, 0.0, 10.0]).reshape(3, 1)
    std = E.tensor([0.1, 1.0, 5.0, 0.0])
    x = np_(E.normal(mean, std, generator=gen(E)))
    assert x.shape == (3, 4)
    assert np.all(x[:, 3] == [-10.0, 0.0, 10.0])  # std 0 gives the mean exactly
    many = np_(E.normal(mean.expand(3, N).contiguous(), 2.0, generator=gen(E)))
    for row, m in zip(many, (-10.0, 0.0, 10.0)):
        assert_ks(row, lambda v, m=m: normal_cdf(v, m, 2.0))
    stds = np_(E.normal(0.0, E.tensor([0.5, 4.0]).expand(N, 2).contiguous(), generator=gen(E)))
    for col, s in zip(stds.T, (0.5, 4.0)):
        assert_ks(col, lambda v, s=s: normal_cdf(v, 0.0, s))


# ---------------------------------------------------------------------- discrete laws
def test_randint_uniform_chi2():
    x = to_numpy(E.randint(-3, 9, (N,), generator=gen(E)))
    assert_chi2(np.bincount(x + 3, minlength=12), np.ones(12))
    y = to_numpy(E.zeros(N, dtype=E.int16).random_(2, 8, generator=gen(E)))
    assert_chi2(np.bincount(y - 2, minlength=6), np.ones(6))


def test_bernoulli_frequencies():
    p = np.linspace(0, 1, 11)
    probs = E.tensor(np.tile(p, (4000, 1)))
    x = np_(E.bernoulli(probs, generator=gen(E)))
    assert set(np.unique(x)) <= {0.0, 1.0}
    freq = x.mean(0)
    assert freq[0] == 0 and freq[-1] == 1
    assert np.all(np.abs(freq - p) < 3.3 * np.sqrt(p * (1 - p) / 4000) + 1e-12)
    for sample in (E.bernoulli(E.zeros(N), 0.3, generator=gen(E)),
                   E.zeros(N, dtype=E.int64).bernoulli_(0.3, generator=gen(E)),
                   E.zeros(N).bernoulli_(E.full((N,), 0.3), generator=gen(E)),
                   E.zeros(N, dtype=E.bool).bernoulli_(E.full((1,), 0.3), generator=gen(E)),
                   E.bernoulli(E.full((N,), 0.3, dtype=E.float16), generator=gen(E))):
        assert_chi2(np.bincount(to_numpy(sample).astype(np.int64), minlength=2), [0.7, 0.3])


def test_geometric_pmf():
    p = 0.3
    x = to_numpy(E.zeros(N, dtype=E.int64).geometric_(p, generator=gen(E)))
    assert x.min() >= 1
    k = np.arange(1, 16)
    probs = np.append((1 - p) ** (k - 1) * p, (1 - p) ** 15)  # last bin: k > 15
    counts = np.append(np.bincount(x, minlength=17)[1:16], (x > 15).sum())
    assert_chi2(counts, probs)


@pytest.mark.parametrize("rate", [0.5, 4.0, 30.0])
def test_poisson_pmf(rate):
    x = to_numpy(E.poisson(E.full((N,), rate, dtype=E.float64), generator=gen(E)))
    assert np.all(x == np.floor(x)) and x.min() >= 0
    k = np.arange(0, int(rate * 3 + 10))
    pmf = np.exp(k * math.log(rate) - rate - np.array([math.lgamma(i + 1) for i in k]))
    keep = N * pmf >= 5
    lo, hi = k[keep].min(), k[keep].max()
    probs = np.concatenate([[pmf[:lo].sum() + pmf[lo]], pmf[lo + 1:hi], [1 - pmf[:hi].sum()]])
    counts = np.concatenate([[(x <= lo).sum()], [(x == i).sum() for i in range(lo + 1, hi)],
                             [(x >= hi).sum()]])
    assert_chi2(counts, probs)


def test_poisson_edge_rates():
    x = to_numpy(E.poisson(E.tensor([0.0, 1e20, float("inf")], dtype=E.float64)))
    assert x[0] == 0 and abs(x[1] - 1e20) < 1e12 and x[2] == np.inf
    big = to_numpy(E.poisson(E.full((N,), 1e16, dtype=E.float64), generator=gen(E)))
    assert_ks((big - 1e16) / 1e8, normal_cdf)


def test_multinomial_with_replacement_frequencies():
    w = np.array([[1.0, 0.0, 3.0, 6.0], [0.0, 0.0, 5.0, 5.0], [2.0, 2.0, 2.0, 2.0]])
    x = to_numpy(E.multinomial(E.tensor(w), N, True, generator=gen(E)))
    assert x.shape == (3, N)
    for row, weights in zip(x, w):
        counts = np.bincount(row, minlength=4)
        assert np.all(counts[weights == 0] == 0), "a zero-weight category was drawn"
        assert_chi2(counts[weights > 0], weights[weights > 0])
    many_rows = to_numpy(E.multinomial(E.tensor(np.tile(w[0], (5000, 1))), 4, True,
                                       generator=gen(E)))
    counts = np.bincount(many_rows.ravel(), minlength=4)
    assert counts[1] == 0
    assert_chi2(counts[[0, 2, 3]], [1, 3, 6])


def test_multinomial_draws_at_the_ends_of_rows():
    # u = 0 and the largest u < 1 (which rounds onto the row's end once shifted by the row
    # index) must still land on categories of nonzero weight
    from ember.backends.cpu import BACKEND
    from ember.ops.random import _multinomial_with_replacement

    class Fixed:
        """The CPU backend's xp whose uniform draws are all ``u``."""

        def __init__(self, u):
            self.u = u

        def __getattr__(self, name):
            return getattr(BACKEND.xp, name)

        def uniform_draws(self, shape, generator, op):
            return np.full(shape, self.u)

    w = np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 4.0]] * 3)
    assert np.all(_multinomial_with_replacement(Fixed(1 - 2.0 ** -53), None, w, 2)
                  == np.repeat([[1], [1], [0], [2]] * 3, 2, axis=1))
    assert np.all(_multinomial_with_replacement(Fixed(0.0), None, w, 2)
                  == np.repeat([[0], [1], [0], [2]] * 3, 2, axis=1))


def test_multinomial_without_replacement():
    w = np.array([0.1, 0.2, 0.3, 0.4])
    x = to_numpy(E.multinomial(E.tensor(np.tile(w, (N, 1))), 2, generator=gen(E)))
    assert np.all(x[:, 0] != x[:, 1]), "a category was drawn twice"
    # sequential draws: P(i then j) = w_i * w_j / (1 - w_i)
    pair = np.array([[wi * wj / (1 - wi) if i != j else 0 for j, wj in enumerate(w)]
                     for i, wi in enumerate(w)])
    counts = np.zeros((4, 4))
    np.add.at(counts, (x[:, 0], x[:, 1]), 1)
    off = ~np.eye(4, dtype=bool)
    assert_chi2(counts[off], pair[off])
    full = to_numpy(E.multinomial(E.rand(50, 30, generator=gen(E)), 30, generator=gen(E)))
    assert np.all(np.sort(full, axis=1) == np.arange(30)), "not a permutation of categories"


def test_multinomial_zero_weights_come_last():
    for m in (E, T):
        x = m.multinomial(m.tensor([[1.0, 0.0, 0.0, 2.0], [0.0, 3.0, 0.0, 0.0]]), 4)
        x = x.numpy() if m is T else to_numpy(x)
        assert set(x[0, :2]) == {0, 3} and set(x[0, 2:]) == {1, 2}
        assert x[1, 0] == 1 and set(x[1, 1:]) == {0, 2, 3}
    single = to_numpy(E.multinomial(E.tensor([1.0, 0.0, 0.0]), 2))
    assert single[0] == 0 and single[1] in (1, 2)


def test_randperm_uniform():
    g = gen(E, 100)
    perms = np.stack([to_numpy(E.randperm(3, generator=g)) for _ in range(3000)])
    _, counts = np.unique(perms[:, 0] * 9 + perms[:, 1] * 3 + perms[:, 2], return_counts=True)
    assert len(counts) == 6
    assert_chi2(counts, np.ones(6))
    # every value lands in every position equally often
    positions = np.zeros((10, 10))
    for _ in range(1000):
        positions[np.arange(10), to_numpy(E.randperm(10, generator=g))] += 1
    assert_chi2(positions.ravel(), np.ones(100))


# ---------------------------------------------------------------------- autograd
def test_sampling_has_zero_gradient_like_torch():
    def run(m):
        mean = m.tensor([0.0, 1.0, 2.0], requires_grad=True)
        std = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        p = m.tensor([0.2, 0.5, 0.9], requires_grad=True)
        lam = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        outs = [m.normal(mean, std), m.normal(mean, 2.0), m.normal(1.0, std),
                m.normal(mean.reshape(3, 1), std), m.bernoulli(p), m.poisson(lam),
                m.zeros(3).bernoulli_(p), (lam * 1).bernoulli_(0.5), (lam * 1).bernoulli_(p)]
        h = mean * 2
        h.uniform_()
        outs.append(h)
        for fill in ("normal_", "exponential_", "cauchy_", "log_normal_"):
            h2 = std * 1
            getattr(h2, fill)()
            outs.append(h2)
        h3 = lam * 1
        h3.random_(0, 5)
        h4 = lam * 1
        h4.geometric_(0.5)
        outs += [h3, h4]
        assert all(o.requires_grad and o.grad_fn is not None for o in outs)
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
        total.backward()
        return [x.grad for x in (mean, std, p, lam)]

    for ge, gt in zip(run(E), run(T)):
        assert np.array_equal(to_numpy(ge), gt.numpy())
        assert not np.any(to_numpy(ge))


@pytest.mark.parametrize("name", ["uniform_", "normal_", "random_", "exponential_",
                                  "log_normal_", "cauchy_", "bernoulli_", "geometric_"])
def test_in_place_on_leaf_that_requires_grad(name):
    f = IN_PLACE[name]
    raises_like(lambda: f(E.zeros(3, requires_grad=True), None),
                lambda: f(T.zeros(3, requires_grad=True), None), match="leaf Variable")
    raises_like(lambda: f(E.zeros(2, 3, requires_grad=True).t(), None),
                lambda: f(T.zeros(2, 3, requires_grad=True).t(), None), match="leaf Variable")
    leaf = E.zeros(3, requires_grad=True)
    with E.no_grad():  # what nn.init does
        assert f(leaf, gen(E)) is leaf
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad_fn is None


def test_in_place_fill_invalidates_saved_tensor():
    def run(m):
        x = m.ones(3, requires_grad=True)
        y = x.exp()  # saves its output
        y.uniform_()
        y.sum().backward()

    raises_like(lambda: run(E), lambda: run(T), match="modified by an inplace operation")


def test_factories_requires_grad_are_leaves():
    for t in (E.rand(3, requires_grad=True), E.randn(2, requires_grad=True),
              E.normal(0.0, 1.0, (2,), requires_grad=True),
              E.randperm(4, dtype=E.float32, requires_grad=True)):
        assert t.requires_grad and t.is_leaf
        (t * 2).sum().backward()
        assert np.all(to_numpy(t.grad) == 2)


# ---------------------------------------------------------------------- errors
