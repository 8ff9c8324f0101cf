"""Random number generation: generators and seeding, shapes/dtypes of every sampling signature
(against torch), statistical tests of each distribution (Kolmogorov-Smirnov against the exact
CDF, chi-square for discrete ones; fixed seeds make them deterministic), and torch's errors."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

import ember
from oracle import raises_like, to_numpy

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


# ---------------------------------------------------------------------- reproducibility
# one draw of every sampling function, from generator g
DRAWS = {
    "rand": lambda m, g: m.rand(7, generator=g),
    "rand_f16": lambda m, g: m.rand(7, generator=g, dtype=m.float16),
    "randn": lambda m, g: m.randn(3, 2, generator=g),
    "randn_c64": lambda m, g: m.randn(5, generator=g, dtype=m.complex64),
    "randint": lambda m, g: m.randint(0, 1000, (9,), generator=g),
    "randperm": lambda m, g: m.randperm(20, generator=g),
    "rand_like": lambda m, g: m.rand_like(m.zeros(4), generator=g),
    "randn_like": lambda m, g: m.randn_like(m.zeros(4), generator=g),
    "randint_like": lambda m, g: m.randint_like(m.zeros(4), 100, generator=g),
    "normal_TT": lambda m, g: m.normal(m.zeros(5), m.ones(5), generator=g),
    "normal_size": lambda m, g: m.normal(1.0, 2.0, (5,), generator=g),
    "bernoulli": lambda m, g: m.bernoulli(m.full((30,), 0.5), generator=g),
    "multinomial": lambda m, g: m.multinomial(m.ones(50), 10, generator=g),
    "multinomial_repl": lambda m, g: m.multinomial(m.ones(50), 10, True, generator=g),
    "poisson": lambda m, g: m.poisson(m.full((8,), 4.0), generator=g),
    "uniform_": lambda m, g: m.zeros(6).uniform_(-1, 1, generator=g),
    "normal_": lambda m, g: m.zeros(6).normal_(generator=g),
    "random_": lambda m, g: m.zeros(6, dtype=m.int64).random_(generator=g),
    "exponential_": lambda m, g: m.zeros(6).exponential_(generator=g),
    "bernoulli_": lambda m, g: m.zeros(30).bernoulli_(0.5, generator=g),
    "geometric_": lambda m, g: m.zeros(6).geometric_(0.2, generator=g),
    "log_normal_": lambda m, g: m.zeros(6).log_normal_(generator=g),
    "cauchy_": lambda m, g: m.zeros(6).cauchy_(generator=g),
}


def _eq(a, b) -> bool:
    return np.array_equal(to_numpy(a), to_numpy(b))


@pytest.mark.parametrize("name", DRAWS)
def test_same_seed_same_numbers(name):
    draw = DRAWS[name]
    a = draw(E, gen(E, 123))
    b = draw(E, gen(E, 123))
    assert _eq(a, b)
    E.manual_seed(123)  # the default generator with the same seed gives the same stream
    assert _eq(draw(E, None), a)
    assert not _eq(draw(E, gen(E, 124)), a), "a different seed gave the same numbers"
    g = gen(E, 123)
    draw(E, g)
    assert not _eq(draw(E, g), a), "the generator did not advance"


def test_generators_are_independent():
    g = gen(E, 5)
    E.manual_seed(5)
    a = E.rand(10)
    E.rand(3, generator=g)  # drawing from g does not move the default generator
    E.manual_seed(5)
    E.rand(10)
    b = E.rand(10)
    E.manual_seed(5)
    E.rand(10)
    E.rand(3, generator=g)
    assert _eq(E.rand(10), b) and not _eq(a, b)


@pytest.mark.parametrize("odd", [False, True])
def test_state_round_trip(odd):
    g = gen(E, 7)
    if odd:  # leaves half of a 64-bit word buffered in the bit generator
        E.rand(1, generator=g)
    state = g.get_state()
    assert state.dtype is E.uint8 and state.ndim == 1
    a = E.rand(33, generator=g)
    assert _eq(g.set_state(state).get_state(), state)
    assert _eq(E.rand(33, generator=g), a)
    other = E.Generator().manual_seed(99).set_state(state)  # state carries the initial seed
    assert other.initial_seed() == 7
    assert _eq(E.rand(33, generator=other), a)
    state.zero_()  # get_state returns a copy
    assert _eq(g.set_state(other.get_state()).get_state(), other.get_state())


def test_default_generator_state_and_fork_rng():
    assert E.manual_seed(11) is E.default_generator
    s = E.get_rng_state()
    a = E.randn(5)
    E.set_rng_state(s)
    assert _eq(E.randn(5), a)
    with E.random.fork_rng():
        E.randn(100)
    b = E.randn(5)
    E.set_rng_state(s)
    E.randn(5)
    assert _eq(E.randn(5), b)
    with E.random.fork_rng(enabled=False):
        E.randn(1)
    assert not _eq(E.randn(5), b)


def test_random_module():
    import ember.random as er
    from ember.random import fork_rng  # noqa: F401
    assert er is E.random
    assert er.manual_seed is E.manual_seed and er.default_generator is E.default_generator
    assert set(torch.random.__all__) <= set(dir(er))
    er.manual_seed(3)
    assert er.initial_seed() == E.initial_seed() == 3


def test_seeds_like_torch():
    for m in (E, T):
        assert m.Generator().initial_seed() == 67280421310721
        assert m.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1
        assert m.Generator().manual_seed(2 ** 64 - 1).initial_seed() == 2 ** 64 - 1
        assert m.manual_seed(1.9).initial_seed() == 1  # the module function takes int(seed)
        assert m.manual_seed("12").initial_seed() == 12
        g = m.Generator()
        s = g.seed()
        assert 0 <= s < 2 ** 64 and g.initial_seed() == s
        s = m.seed()
        assert m.initial_seed() == s
        assert str(m.Generator("cpu").device) == "cpu"
        assert str(m.Generator(device=m.device("cpu")).device) == "cpu"


def test_generator_pickle_and_clone():
    g = gen(E, 42)
    E.rand(3, generator=g)
    for h in (pickle.loads(pickle.dumps(g)), g.clone_state()):
        assert h.initial_seed() == 42
        assert _eq(E.rand(9, generator=h), E.rand(9, generator=g.clone_state()))


SEED_ERRORS = {
    "float": (lambda m: m.Generator().manual_seed(1.5)),
    "str": (lambda m: m.Generator().manual_seed("a")),
    "bool": (lambda m: m.Generator().manual_seed(True)),
    "too big": (lambda m: m.Generator().manual_seed(2 ** 64)),
    "too small": (lambda m: m.Generator().manual_seed(-2 ** 63 - 1)),
    "module too big": (lambda m: m.manual_seed(2 ** 64)),
    "cuda generator": (lambda m: m.Generator("cuda")),
}


@pytest.mark.parametrize("name", SEED_ERRORS)
def test_seed_errors(name):
    f = SEED_ERRORS[name]
    raises_like(lambda: f(E), lambda: f(T))


def _state_size(m):
    return m.Generator().get_state().numel()


STATE_ERRORS = {
    "list": lambda m: m.Generator().set_state([1, 2]),
    "float tensor": lambda m: m.Generator().set_state(m.zeros(_state_size(m))),
    "wrong size": lambda m: m.Generator().set_state(m.zeros(10, dtype=m.uint8)),
    "garbage": lambda m: m.Generator().set_state(m.zeros(_state_size(m), dtype=m.uint8)),
    "module wrong size": lambda m: m.set_rng_state(m.zeros(10, dtype=m.uint8)),
    "module float": lambda m: m.set_rng_state(m.zeros(10)),
}


@pytest.mark.parametrize("name", STATE_ERRORS)
def test_bad_state(name):
    f = STATE_ERRORS[name]
    raises_like(lambda: f(E), lambda: f(T))
    g = gen(E, 1)
    before = g.get_state()
    with pytest.raises(Exception):
        g.set_state(E.zeros(before.numel(), dtype=E.uint8))
    assert _eq(g.get_state(), before), "a rejected state changed the generator"


# ---------------------------------------------------------------------- shapes and dtypes
def z(m, *shape, dtype="float32", fill=0.0):
    return m.full(shape, fill, dtype=getattr(m, dtype))


SIGNATURES = {
    "rand ints": lambda m, g: m.rand(2, 3, generator=g),
    "rand tuple": lambda m, g: m.rand((2, 3)),
    "rand list": lambda m, g: m.rand([4]),
    "rand Size": lambda m, g: m.rand(m.Size([2, 1])),
    "rand size kw": lambda m, g: m.rand(size=(2, 3), generator=g),
    "rand 0-d": lambda m, g: m.rand([]),
    "rand empty": lambda m, g: m.rand(0, 3),
    "rand f64": lambda m, g: m.rand(3, dtype=m.float64),
    "rand f16": lambda m, g: m.rand(3, dtype=m.float16),
    "rand bf16": lambda m, g: m.rand(3, dtype=m.bfloat16),
    "rand c64": lambda m, g: m.rand(3, dtype=m.complex64),
    "rand c128": lambda m, g: m.rand(3, dtype=m.complex128),
    "rand requires_grad": lambda m, g: m.rand(3, requires_grad=True),
    "randn ints": lambda m, g: m.randn(2, 3, generator=g),
    "randn 0-d": lambda m, g: m.randn(()),
    "randn f64": lambda m, g: m.randn(4, dtype=m.float64),
    "randn bf16": lambda m, g: m.randn(4, dtype=m.bfloat16),
    "randn c128": lambda m, g: m.randn(4, dtype=m.complex128),
    "randn requires_grad": lambda m, g: m.randn(2, requires_grad=True, dtype=m.float64),
    "randint high": lambda m, g: m.randint(5, (3,), generator=g),
    "randint low high": lambda m, g: m.randint(2, 5, (2, 3)),
    "randint kw": lambda m, g: m.randint(low=1, high=3, size=(2,)),
    "randint high kw": lambda m, g: m.randint(high=3, size=(2,)),
    "randint size kw": lambda m, g: m.randint(5, size=(2, 2)),
    "randint list size": lambda m, g: m.randint(3, [2]),
    "randint 0-d": lambda m, g: m.randint(3, ()),
    "randint empty": lambda m, g: m.randint(3, (0,)),
    "randint int32": lambda m, g: m.randint(3, (2,), dtype=m.int32, generator=g),
    "randint uint8": lambda m, g: m.randint(0, 256, (2,), dtype=m.uint8),
    "randint int8": lambda m, g: m.randint(-128, 128, (2,), dtype=m.int8),
    "randint bool": lambda m, g: m.randint(0, 2, (4,), dtype=m.bool),
    "randint f32": lambda m, g: m.randint(5, (3,), dtype=m.float32),
    "randint f16": lambda m, g: m.randint(0, 5, (3,), dtype=m.float16),
    "randint f64 rg": lambda m, g: m.randint(5, (3,), dtype=m.float64, requires_grad=True),
    "randint int64 range": lambda m, g: m.randint(-2 ** 63, 2 ** 63 - 1, (3,)),
    "randint tensor bound": lambda m, g: m.randint(m.tensor(3), (2,)),
    "randperm": lambda m, g: m.randperm(5, generator=g),
    "randperm 0": lambda m, g: m.randperm(0),
    "randperm 1": lambda m, g: m.randperm(1),
    "randperm int32": lambda m, g: m.randperm(5, dtype=m.int32),
    "randperm f32": lambda m, g: m.randperm(5, dtype=m.float32),
    "randperm f64 rg": lambda m, g: m.randperm(5, dtype=m.float64, requires_grad=True),
    "randperm uint8 256": lambda m, g: m.randperm(256, dtype=m.uint8),
    "randperm int8 128": lambda m, g: m.randperm(128, dtype=m.int8),
    "randperm f16 2049": lambda m, g: m.randperm(2049, dtype=m.float16),
    "randperm bf16 257": lambda m, g: m.randperm(257, dtype=m.bfloat16),
    "rand_like": lambda m, g: m.rand_like(z(m, 2, 3), generator=g),
    "rand_like f64": lambda m, g: m.rand_like(z(m, 2, dtype="float64")),
    "rand_like f16": lambda m, g: m.rand_like(z(m, 2, dtype="float16")),
    "rand_like c64": lambda m, g: m.rand_like(z(m, 2, dtype="complex64")),
    "rand_like dtype": lambda m, g: m.rand_like(z(m, 2), dtype=m.float64),
    "rand_like to complex": lambda m, g: m.rand_like(z(m, 2), dtype=m.complex64),
    "rand_like rg": lambda m, g: m.rand_like(z(m, 2), requires_grad=True),
    "rand_like of rg input": lambda m, g: m.rand_like(z(m, 2).requires_grad_()),
    "rand_like 0-d": lambda m, g: m.rand_like(z(m)),
    "randn_like": lambda m, g: m.randn_like(z(m, 2, 3), generator=g),
    "randn_like bf16": lambda m, g: m.randn_like(z(m, 3, dtype="bfloat16")),
    "randn_like c128": lambda m, g: m.randn_like(z(m, 3, dtype="complex128")),
    "randn_like from int": lambda m, g: m.randn_like(z(m, 3, dtype="int64"), dtype=m.float32),
    "randint_like": lambda m, g: m.randint_like(z(m, 2, 3), 5, generator=g),
    "randint_like low high": lambda m, g: m.randint_like(z(m, 2, 3), 2, 5),
    "randint_like int32": lambda m, g: m.randint_like(z(m, 2, dtype="int32"), 2, 5),
    "randint_like bool": lambda m, g: m.randint_like(z(m, 3, dtype="bool"), 0, 2),
    "randint_like dtype": lambda m, g: m.randint_like(z(m, 3), 5, dtype=m.int16),
    "randint_like high kw": lambda m, g: m.randint_like(z(m, 3), high=5),
    "randint_like kw": lambda m, g: m.randint_like(z(m, 3), low=1, high=5),
    "normal TT": lambda m, g: m.normal(z(m, 2, 3), z(m, 2, 3, fill=1.0), generator=g),
    "normal TT broadcast": lambda m, g: m.normal(z(m, 2, 3), z(m, 3, fill=1.0)),
    "normal TT broadcast 2": lambda m, g: m.normal(z(m, 3), z(m, 2, 3, fill=1.0)),
    "normal Tf": lambda m, g: m.normal(z(m, 2, 3), 2.0, generator=g),
    "normal T default std": lambda m, g: m.normal(z(m, 2, 3)),
    "normal T int std": lambda m, g: m.normal(z(m, 3), 1),
    "normal fT": lambda m, g: m.normal(0.0, z(m, 2, 3, fill=1.0), generator=g),
    "normal fT f64": lambda m, g: m.normal(0.0, z(m, 3, fill=1.0, dtype="float64")),
    "normal int fT": lambda m, g: m.normal(0, z(m, 3, fill=1.0)),
    "normal T f64 T f32": lambda m, g: m.normal(z(m, 3, dtype="float64"), z(m, 3, fill=1.0)),
    "normal T f32 T f64": lambda m, g: m.normal(z(m, 3), z(m, 3, fill=1.0, dtype="float64")),
    "normal 0-d T f64": lambda m, g: m.normal(z(m), z(m, 3, fill=1.0, dtype="float64")),
    "normal T f32 T int": lambda m, g: m.normal(z(m, 3), z(m, 3, fill=1, dtype="int64")),
    "normal f16": lambda m, g: m.normal(z(m, 3, dtype="float16"),
                                        z(m, 3, fill=1.0, dtype="float16")),
    "normal bf16": lambda m, g: m.normal(z(m, 3, dtype="bfloat16"), 1.0),
    "normal c64 f": lambda m, g: m.normal(z(m, 3, dtype="complex64"), 1.0),
    "normal c64 T": lambda m, g: m.normal(z(m, 3, dtype="complex64"), z(m, 3, fill=1.0)),
    "normal 0-d": lambda m, g: m.normal(z(m), z(m, fill=1.0)),
    "normal empty": lambda m, g: m.normal(z(m, 0), z(m, 0)),
    "normal kw": lambda m, g: m.normal(mean=z(m, 3), std=z(m, 3, fill=1.0)),
    "normal kw mean": lambda m, g: m.normal(mean=z(m, 3)),
    "normal kw fT": lambda m, g: m.normal(mean=0.0, std=z(m, 3, fill=1.0)),
    "normal size": lambda m, g: m.normal(0.0, 1.0, (2, 3), generator=g),
    "normal size kw": lambda m, g: m.normal(mean=0.0, std=1.0, size=(3,)),
    "normal size ints": lambda m, g: m.normal(0, 1, (2, 3)),
    "normal size f64": lambda m, g: m.normal(0.0, 1.0, (2,), dtype=m.float64),
    "normal size f16": lambda m, g: m.normal(0.0, 1.0, (2,), dtype=m.float16),
    "normal size c64": lambda m, g: m.normal(0.0, 1.0, (2,), dtype=m.complex64),
    "normal size rg": lambda m, g: m.normal(0.0, 1.0, (2,), requires_grad=True),
    "normal mean rg": lambda m, g: m.normal(z(m, 2).requires_grad_(), 1.0),
    "normal std rg": lambda m, g: m.normal(0.0, z(m, 2, fill=1.0).requires_grad_()),
    "bernoulli": lambda m, g: m.bernoulli(z(m, 2, 3, fill=0.5), generator=g),
    "bernoulli f64": lambda m, g: m.bernoulli(z(m, 3, fill=0.5, dtype="float64")),
    "bernoulli f16": lambda m, g: m.bernoulli(z(m, 3, fill=0.5, dtype="float16")),
    "bernoulli bf16": lambda m, g: m.bernoulli(z(m, 3, fill=0.5, dtype="bfloat16")),
    "bernoulli p": lambda m, g: m.bernoulli(z(m, 2, 3), 0.3, generator=g),
    "bernoulli p kw": lambda m, g: m.bernoulli(z(m, 2, 3), p=0.3),
    "bernoulli p int": lambda m, g: m.bernoulli(z(m, 3, dtype="int64"), 0.3),
    "bernoulli p bool": lambda m, g: m.bernoulli(z(m, 3, dtype="bool"), 0.5),
    "bernoulli p uint8": lambda m, g: m.bernoulli(z(m, 3, dtype="uint8"), 0.5),
    "bernoulli method": lambda m, g: z(m, 2, fill=0.5).bernoulli(generator=g),
    "bernoulli method p": lambda m, g: z(m, 2, fill=0.5).bernoulli(0.2),
    "bernoulli 0-d": lambda m, g: m.bernoulli(z(m, fill=0.5)),
    "bernoulli empty": lambda m, g: m.bernoulli(z(m, 0, 2)),
    "bernoulli rg": lambda m, g: m.bernoulli(z(m, 2, fill=0.5).requires_grad_()),
    "bernoulli p rg": lambda m, g: m.bernoulli(z(m, 2).requires_grad_(), 0.5),
    "multinomial": lambda m, g: m.multinomial(m.tensor([1.0, 2.0, 3.0]), 2, generator=g),
    "multinomial all": lambda m, g: m.multinomial(m.tensor([1.0, 2.0, 3.0]), 3),
    "multinomial 2d": lambda m, g: m.multinomial(z(m, 4, 3, fill=1.0), 2),
    "multinomial repl": lambda m, g: m.multinomial(z(m, 4, 3, fill=1.0), 7, True),
    "multinomial repl kw": lambda m, g: m.multinomial(z(m, 3, fill=1.0), 7, replacement=True),
    "multinomial f64": lambda m, g: m.multinomial(z(m, 3, fill=1.0, dtype="float64"), 2),
    "multinomial f16": lambda m, g: m.multinomial(z(m, 3, fill=1.0, dtype="float16"), 2),
    "multinomial bf16": lambda m, g: m.multinomial(z(m, 3, fill=1.0, dtype="bfloat16"), 2),
    "multinomial method": lambda m, g: z(m, 2, 3, fill=1.0).multinomial(2, generator=g),
    "multinomial no rows": lambda m, g: m.multinomial(z(m, 0, 3, fill=1.0), 1),
    "multinomial rg": lambda m, g: m.multinomial(z(m, 3, fill=1.0).requires_grad_(), 1),
    "poisson": lambda m, g: m.poisson(z(m, 2, 3, fill=2.0), generator=g),
    "poisson positional gen": lambda m, g: m.poisson(z(m, 2, 3, fill=2.0), g),
    "poisson f64": lambda m, g: m.poisson(z(m, 3, fill=2.0, dtype="float64")),
    "poisson f16": lambda m, g: m.poisson(z(m, 3, fill=2.0, dtype="float16")),
    "poisson bf16": lambda m, g: m.poisson(z(m, 3, fill=2.0, dtype="bfloat16")),
    "poisson 0-d": lambda m, g: m.poisson(z(m, fill=2.0)),
    "poisson empty": lambda m, g: m.poisson(z(m, 0)),
    "poisson rg": lambda m, g: m.poisson(z(m, 2, fill=2.0).requires_grad_()),
    "out= rand": lambda m, g: m.rand(2, 3, out=z(m, 1)),
    "out= randint": lambda m, g: m.randint(5, (4,), out=z(m, 4, dtype="int64")),
    "out= normal": lambda m, g: m.normal(0.0, 1.0, (3,), out=z(m, 2)),
    "out= normal TT": lambda m, g: m.normal(z(m, 2), z(m, 2, fill=1.0), out=z(m, 5)),
}
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
# the dtypes each in-place fill accepts in torch
_REAL = ("float32", "float64", "float16", "bfloat16")
_ALL_INT = ("int64", "int32", "int16", "int8", "uint8")
FILL_DTYPES = {
    "uniform_": _REAL + ("complex64",), "normal_": _REAL + ("complex64", "complex128"),
    "random_": _REAL + _ALL_INT + ("bool",), "exponential_": _REAL, "geometric_": _REAL + _ALL_INT,
    "log_normal_": _REAL, "cauchy_": _REAL, "bernoulli_": _REAL + _ALL_INT + ("bool",),
}
IN_PLACE_CASES = [(name, dt) for name in IN_PLACE for dt in FILL_DTYPES[name.split()[0]]
                  if not (name.startswith("random_") and " " in name and dt == "bool")]


def meta(t):
    return tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad


@pytest.mark.parametrize("name", SIGNATURES)
def test_signature_matches_torch(name):
    f = SIGNATURES[name]
    e, t = f(E, gen(E)), f(T, gen(T))
    assert isinstance(e, E.Tensor)
    assert meta(e) == meta(t)


@pytest.mark.parametrize("name,dtype", IN_PLACE_CASES)
def test_in_place_fill_matches_torch(name, dtype):
    f = IN_PLACE[name]
    xe, xt = z(E, 2, 3, dtype=dtype), z(T, 2, 3, dtype=dtype)
    v = xe._version
    re, rt = f(xe, gen(E)), f(xt, gen(T))
    assert re is xe and rt is xt
    assert meta(re) == meta(rt)
    assert xe._version > v


@pytest.mark.parametrize("name", ["uniform_", "normal_", "random_", "exponential_", "cauchy_",
                                  "log_normal_", "geometric_", "bernoulli_"])
def test_in_place_fill_of_views(name):
    f = IN_PLACE[name]
    base = E.full((3, 4), -7.0)
    view = base.t()  # non-contiguous
    assert f(view, gen(E)) is view
    assert not np.any(to_numpy(base) == -7.0), "the fill did not write through the view"
    assert base._version == view._version > 0
    row = E.full((3, 4), -7.0)
    f(row[1], gen(E))
    vals = to_numpy(row)
    assert np.all(vals[[0, 2]] == -7.0) and not np.any(vals[1] == -7.0)


def _as_meta(x):
    if isinstance(x, E.Tensor):
        return E.autograd.engine.TensorMeta(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_as_meta(v) for v in x)
    return x


class _Recorder:
    """Stands in for the ember module: runs each random op and records its arguments."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        attr = getattr(E, name)
        if isinstance(attr, E.ops.OpDef) and "random" in attr.tags:
            def call(*args, **kwargs):
                self.calls.append((attr, args, kwargs))
                return attr(*args, **kwargs)
            return call
        return attr


@pytest.mark.parametrize("name", [n for n in SIGNATURES if "method" not in n])
def test_meta_matches_eager_without_drawing(name):
    rec = _Recorder()
    SIGNATURES[name](rec, None)
    assert rec.calls, "no random op was called"
    d, args, kwargs = rec.calls[-1]
    kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "requires_grad")}
    state = E.get_rng_state()
    shape, dtype = d.run_meta(*_as_meta(args), **_as_meta(kwargs))
    assert _eq(E.get_rng_state(), state), "run_meta drew random numbers"
    real = d(*args, **kwargs)
    assert shape == tuple(real.shape) and dtype is real.dtype


@pytest.mark.parametrize("name", ["uniform", "normal_functional", "random", "exponential",
                                  "geometric", "log_normal", "cauchy", "bernoulli_functional"])
def test_fill_meta(name):
    x = E.zeros(2, 3, dtype=E.float64)
    args = (0.5,) if name == "geometric" else ()
    assert E.ops.OPS[name].run_meta(E.autograd.engine.TensorMeta(x), *args) == \
        ((2, 3), E.float64)


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
    from ember.ops.random import _multinomial_with_replacement

    class Fixed:
        def __init__(self, u):
            self.u = u

        def random(self, shape):
            return np.full(shape, self.u)

    w = np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 4.0]] * 3)
    assert np.all(_multinomial_with_replacement(Fixed(1 - 2.0 ** -53), w, 2)
                  == np.repeat([[1], [1], [0], [2]] * 3, 2, axis=1))
    assert np.all(_multinomial_with_replacement(Fixed(0.0), w, 2)
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
