"""Random number generation: torch's errors for bad sizes, ranges, probabilities, dtypes and
states, raised with the same exception types."""

from __future__ import annotations

import pytest
import torch

import ember
from oracle import raises_like

E, T = ember, torch


def z(m, *shape, dtype="float32", fill=0.0):
    return m.full(shape, fill, dtype=getattr(m, dtype))


def _leaf(m, *shape, dtype="float32", fill=0.0):
    return z(m, *shape, dtype=dtype, fill=fill)


ERRORS = {
    "rand negative": lambda m: m.rand(-1),
    "rand negative 2": lambda m: m.rand(2, -1),
    "rand float size": lambda m: m.rand(2.5),
    "rand no size": lambda m: m.rand(),
    "rand tuple and int": lambda m: m.rand((2,), 3),
    "rand size twice": lambda m: m.rand(2, size=(2, 3)),
    "rand int dtype": lambda m: m.rand(2, 3, dtype=m.int64),
    "rand bool dtype": lambda m: m.rand(2, dtype=m.bool),
    "rand bad generator": lambda m: m.rand(2, generator=3),
    "randn int dtype": lambda m: m.randn(2, dtype=m.int64),
    "randn negative": lambda m: m.randn(3, -2),
    "randint low == high": lambda m: m.randint(5, 5, (3,)),
    "randint low > high": lambda m: m.randint(6, 5, (3,)),
    "randint high 0": lambda m: m.randint(0, (3,)),
    "randint negative size": lambda m: m.randint(5, (-1,)),
    "randint int size": lambda m: m.randint(5, 3),
    "randint int size kw": lambda m: m.randint(5, size=3),
    "randint no size": lambda m: m.randint(5),
    "randint float high": lambda m: m.randint(2.5, (3,)),
    "randint float size elem": lambda m: m.randint(3, (2.0,)),
    "randint bool range": lambda m: m.randint(0, 3, (3,), dtype=m.bool),
    "randint uint8 high": lambda m: m.randint(0, 300, (3,), dtype=m.uint8),
    "randint uint8 low": lambda m: m.randint(-1, 3, (3,), dtype=m.uint8),
    "randint int32 high": lambda m: m.randint(0, 2 ** 40, (3,), dtype=m.int32),
    "randint complex": lambda m: m.randint(0, 5, (3,), dtype=m.complex64),
    "randint int rg": lambda m: m.randint(5, (3,), requires_grad=True),
    "randint bad generator": lambda m: m.randint(5, (3,), generator="g"),
    "randperm negative": lambda m: m.randperm(-1),
    "randperm float n": lambda m: m.randperm(5.0),
    "randperm bool": lambda m: m.randperm(5, dtype=m.bool),
    "randperm complex": lambda m: m.randperm(4, dtype=m.complex64),
    "randperm int8 overflow": lambda m: m.randperm(129, dtype=m.int8),
    "randperm uint8 overflow": lambda m: m.randperm(300, dtype=m.uint8),
    "randperm f16 overflow": lambda m: m.randperm(3000, dtype=m.float16),
    "randperm int rg": lambda m: m.randperm(3, requires_grad=True),
    "rand_like int": lambda m: m.rand_like(_leaf(m, 2, dtype="int64")),
    "randn_like int": lambda m: m.randn_like(_leaf(m, 2, dtype="int64")),
    "rand_like int dtype": lambda m: m.rand_like(_leaf(m, 2), dtype=m.int32),
    "randint_like low == high": lambda m: m.randint_like(_leaf(m, 2), 5, 5),
    "randint_like low > high": lambda m: m.randint_like(_leaf(m, 2), 5, 2),
    "randint_like float": lambda m: m.randint_like(_leaf(m, 2), 1.5),
    "randint_like uint8": lambda m: m.randint_like(_leaf(m, 2, dtype="uint8"), 300),
    "randint_like complex": lambda m: m.randint_like(_leaf(m, 2, dtype="complex64"), 3),
    "normal negative std": lambda m: m.normal(_leaf(m, 2, 3), -1.0),
    "normal nan std": lambda m: m.normal(_leaf(m, 2), float("nan")),
    "normal negative std tensor": lambda m: m.normal(_leaf(m, 3), _leaf(m, 3, fill=-1.0)),
    "normal negative std fT": lambda m: m.normal(0.0, _leaf(m, 3, fill=-1.0)),
    "normal nan std tensor": lambda m: m.normal(_leaf(m, 2), m.tensor([float("nan"), 1.0])),
    "normal negative std size": lambda m: m.normal(0.0, -1.0, (2, 3)),
    "normal int mean": lambda m: m.normal(_leaf(m, 2, dtype="int64"), 1.0),
    "normal int mean T": lambda m: m.normal(_leaf(m, 2, dtype="int64"), _leaf(m, 2)),
    "normal int std fT": lambda m: m.normal(0.0, _leaf(m, 2, fill=1, dtype="int64")),
    "normal int dtype": lambda m: m.normal(0.0, 1.0, (2,), dtype=m.int64),
    "normal no size": lambda m: m.normal(0.0, 1.0),
    "normal no mean": lambda m: m.normal(std=_leaf(m, 3, fill=1.0)),
    "normal broadcast": lambda m: m.normal(_leaf(m, 2, 3), _leaf(m, 4, fill=1.0)),
    "normal numel not shape": lambda m: m.normal(_leaf(m, 2, 3), _leaf(m, 6, fill=1.0)),
    "normal negative size": lambda m: m.normal(0.0, 1.0, (-2,)),
    "bernoulli p > 1": lambda m: m.bernoulli(_leaf(m, 2, 3, fill=1.5)),
    "bernoulli p < 0": lambda m: m.bernoulli(_leaf(m, 2, fill=-0.5)),
    "bernoulli p nan": lambda m: m.bernoulli(_leaf(m, 2, fill=float("nan"))),
    "bernoulli int": lambda m: m.bernoulli(_leaf(m, 2, dtype="int64", fill=1)),
    "bernoulli bool": lambda m: m.bernoulli(_leaf(m, 2, dtype="bool", fill=1)),
    "bernoulli complex": lambda m: m.bernoulli(_leaf(m, 2, dtype="complex64")),
    "bernoulli scalar p > 1": lambda m: m.bernoulli(_leaf(m, 2), 1.3),
    "bernoulli scalar p complex": lambda m: m.bernoulli(_leaf(m, 2, dtype="complex64"), 0.5),
    "bernoulli tensor p": lambda m: m.bernoulli(_leaf(m, 2), _leaf(m, 2, fill=0.2)),
    "bernoulli_ p > 1": lambda m: _leaf(m, 2, 3).bernoulli_(1.5),
    "bernoulli_ p < 0": lambda m: _leaf(m, 2, 3).bernoulli_(-0.1),
    "bernoulli_ tensor p > 1": lambda m: _leaf(m, 2, 3).bernoulli_(_leaf(m, 3, fill=1.9)),
    "bernoulli_ shape": lambda m: _leaf(m, 2, 3).bernoulli_(_leaf(m, 6, fill=0.9)),
    "bernoulli_ expand self": lambda m: _leaf(m, 3).bernoulli_(_leaf(m, 2, 3, fill=0.9)),
    "bernoulli_ int p": lambda m: _leaf(m, 2, 3).bernoulli_(_leaf(m, 3, fill=1, dtype="int64")),
    "bernoulli_ complex": lambda m: _leaf(m, 3, dtype="complex64").bernoulli_(),
    "multinomial int": lambda m: m.multinomial(m.tensor([1, 2, 3]), 2),
    "multinomial complex": lambda m: m.multinomial(_leaf(m, 3, fill=1.0, dtype="complex64"), 1),
    "multinomial 0-d": lambda m: m.multinomial(m.tensor(1.0), 1),
    "multinomial 3-d": lambda m: m.multinomial(_leaf(m, 2, 2, 2, fill=1.0), 1),
    "multinomial 0 samples": lambda m: m.multinomial(m.tensor([1.0, 2.0]), 0),
    "multinomial negative samples": lambda m: m.multinomial(m.tensor([1.0, 2.0]), -1),
    "multinomial too many": lambda m: m.multinomial(m.tensor([1.0, 2.0, 3.0]), 4),
    "multinomial too many 2d": lambda m: m.multinomial(_leaf(m, 2, 3, fill=1.0), 4),
    "multinomial empty 1d": lambda m: m.multinomial(_leaf(m, 0), 1),
    "multinomial no categories": lambda m: m.multinomial(_leaf(m, 2, 0), 1),
    "multinomial negative": lambda m: m.multinomial(m.tensor([1.0, -2.0, 3.0]), 2),
    "multinomial nan": lambda m: m.multinomial(m.tensor([1.0, float("nan"), 3.0]), 2),
    "multinomial inf": lambda m: m.multinomial(m.tensor([1.0, float("inf"), 3.0]), 2, True),
    "multinomial zero sum": lambda m: m.multinomial(m.tensor([0.0, 0.0, 0.0]), 2),
    "multinomial zero sum repl": lambda m: m.multinomial(m.tensor([0.0, 0.0]), 2, True),
    "multinomial zero row": lambda m: m.multinomial(m.tensor([[1.0, 2], [0.0, 0]]), 1, True),
    "multinomial negative row": lambda m: m.multinomial(m.tensor([[1.0, 2.0], [-1.0, 0]]), 1),
    "multinomial float n": lambda m: m.multinomial(_leaf(m, 2, 3, fill=1.0), 2.0),
    "multinomial categories": lambda m: m.multinomial(_leaf(m, 1, 2 ** 24 + 1, fill=1.0), 1),
    "poisson int": lambda m: m.poisson(m.tensor([1, 2, 3])),
    "poisson complex": lambda m: m.poisson(_leaf(m, 3, dtype="complex64")),
    "poisson negative": lambda m: m.poisson(m.tensor([1.0, -2.0, 3.0])),
    "poisson nan": lambda m: m.poisson(m.tensor([1.0, float("nan")])),
    "uniform_ from > to": lambda m: _leaf(m, 3).uniform_(5, 2),
    "uniform_ int": lambda m: _leaf(m, 3, dtype="int64").uniform_(),
    "uniform_ f32 bounds": lambda m: _leaf(m, 3).uniform_(-1e308, 1e308),
    "uniform_ f64 range": lambda m: _leaf(m, 3, dtype="float64").uniform_(-1e308, 1e308),
    "uniform_ f64 inf": lambda m: _leaf(m, 3, dtype="float64").uniform_(-float("inf"), 1),
    "uniform_ f16 bounds": lambda m: _leaf(m, 3, dtype="float16").uniform_(0, 1e6),
    "normal_ negative std": lambda m: _leaf(m, 3).normal_(2, -3),
    "normal_ int": lambda m: _leaf(m, 3, dtype="int64").normal_(),
    "random_ to 0": lambda m: _leaf(m, 3).random_(0),
    "random_ to negative": lambda m: _leaf(m, 3).random_(-3),
    "random_ from > to": lambda m: _leaf(m, 3).random_(10, 3),
    "random_ complex": lambda m: _leaf(m, 3, dtype="complex64").random_(),
    "random_ complex from to": lambda m: _leaf(m, 3, dtype="complex64").random_(0, 3),
    "random_ int8 from": lambda m: _leaf(m, 3, dtype="int8").random_(-300, 100),
    "random_ int8 to": lambda m: _leaf(m, 3, dtype="int8").random_(-3, 200),
    "random_ int16 to": lambda m: _leaf(m, 3, dtype="int16").random_(-3, 2 ** 16),
    "random_ int32 from": lambda m: _leaf(m, 3, dtype="int32").random_(-2 ** 40, 2),
    "random_ bool": lambda m: _leaf(m, 3, dtype="bool").random_(0, 3),
    "random_ f16 to": lambda m: _leaf(m, 3, dtype="float16").random_(0, 70000),
    "random_ f16 from None": lambda m: _leaf(m, 3, dtype="float16").random_(5000, None),
    "random_ uint8 from None": lambda m: _leaf(m, 3, dtype="uint8").random_(-1, None),
    "random_ uint8 big from None": lambda m: _leaf(m, 3, dtype="uint8").random_(5000, None),
    "exponential_ 0": lambda m: _leaf(m, 3).exponential_(0),
    "exponential_ negative": lambda m: _leaf(m, 3).exponential_(-1),
    "exponential_ int": lambda m: _leaf(m, 3, dtype="int64").exponential_(),
    "exponential_ complex": lambda m: _leaf(m, 3, dtype="complex64").exponential_(),
    "geometric_ 0": lambda m: _leaf(m, 3).geometric_(0),
    "geometric_ 1": lambda m: _leaf(m, 3).geometric_(1),
    "geometric_ 1.5": lambda m: _leaf(m, 3).geometric_(1.5),
    "geometric_ bool": lambda m: _leaf(m, 3, dtype="bool").geometric_(0.5),
    "geometric_ complex": lambda m: _leaf(m, 3, dtype="complex64").geometric_(0.5),
    "geometric_ no p": lambda m: _leaf(m, 3).geometric_(),
    "log_normal_ std 0": lambda m: _leaf(m, 3).log_normal_(0, 0),
    "log_normal_ std negative": lambda m: _leaf(m, 3).log_normal_(0, -1),
    "log_normal_ int": lambda m: _leaf(m, 3, dtype="int64").log_normal_(),
    "cauchy_ sigma 0": lambda m: _leaf(m, 3).cauchy_(1, 0),
    "cauchy_ sigma negative": lambda m: _leaf(m, 3).cauchy_(1, -1),
    "cauchy_ int": lambda m: _leaf(m, 3, dtype="int64").cauchy_(),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_like_torch(name):
    f = ERRORS[name]
    raises_like(lambda: f(E), lambda: f(T))


def test_int64_overflow_is_rejected():
    # torch raises ValueError while parsing; ember's dispatcher reports RuntimeError
    for f in (lambda m: m.randint(0, 2 ** 63, (3,)), lambda m: m.randint(0, 2 ** 64, (3,)),
              lambda m: _leaf(m, 3, dtype="int64").random_(-3, 2 ** 64)):
        with pytest.raises(ValueError):
            f(T)
        with pytest.raises((ValueError, RuntimeError), match="int64"):
            f(E)


def test_error_messages_name_the_problem():
    with pytest.raises(RuntimeError, match="from=5 >= to=5"):
        E.randint(5, 5, (3,))
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        E.multinomial(E.tensor([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="std >= 0.0, but found std -1"):
        E.normal(E.zeros(2), -1.0)
    with pytest.raises(NotImplementedError, match="'Long'"):
        E.rand(2, dtype=E.int64)
    with pytest.raises(RuntimeError, match="p=1.5"):
        E.zeros(2).bernoulli_(1.5)
    with pytest.raises(TypeError, match="generator"):
        E.randn(2, generator=T.Generator())
