"""Random number generation: generators and seeding, and the shapes/dtypes of every sampling
signature (against torch). Value ranges, the statistical tests of each distribution, autograd and
errors are in test_random_laws.py; shared helpers in random_util.py."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from oracle import raises_like, to_numpy
from random_util import IN_PLACE, E, T, gen

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
