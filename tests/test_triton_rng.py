"""ember's Philox random numbers (backends/cuda/philox.py, philox_kernels.py, random_ops.py)
through Triton's interpreter on CPU: CI's proof of the CUDA generator's kernels without a GPU.

The kernels run on numpy buffers (``TRITON_INTERPRET=1``, set by conftest where there is no
GPU): their words against a Philox 4x32-10 written here from the paper (itself checked on the
Random123 known-answer vectors) and against Triton's own ``tl.randint4x``; reproducibility per
seed, independence from the block size, the device-side offset; distributions by moments and
Kolmogorov-Smirnov bounds. Then the CUDA backend's overrides are put on the CPU backend, so
``ember.rand``, ``x.uniform_``, dropout, ... run the same kernels end to end, with the ops'
argument errors unchanged.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import ember
from triton_util import ks_distance
from ember import _random
from ember.backends import cpu
from ember.backends.cuda import philox, random_ops, triton_adapter
from ember.ops.registry import OPS
from philox_ref import KAT, philox_ref, words

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language
philox_kernels = pytest.importorskip("ember.backends.cuda.philox_kernels")
_words = philox_kernels._words


@pytest.fixture(scope="module", autouse=True)
def interpreted():
    if not triton_adapter.interpreting():  # conftest sets it where there is no GPU
        pytest.skip("runs where Triton interprets (TRITON_INTERPRET=1, set without a GPU)")


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_reference_known_answers(ctr, key, expected):
    assert tuple(int(w) for w in philox_ref(ctr, key)) == expected


@triton.jit
def _words_kernel(out_ptr, state_ptr, n, BLOCK: tl.constexpr):
    idx, x0, x1, x2, x3 = _words(state_ptr, BLOCK)
    m = idx < n
    tl.store(out_ptr + idx * 4, x0, mask=m)
    tl.store(out_ptr + idx * 4 + 1, x1, mask=m)
    tl.store(out_ptr + idx * 4 + 2, x2, mask=m)
    tl.store(out_ptr + idx * 4 + 3, x3, mask=m)


@triton.jit
def _triton_words_kernel(out_ptr, seed, offset, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = idx < n
    x0, x1, x2, x3 = tl.randint4x(seed, idx.to(tl.int64) + offset)
    tl.store(out_ptr + idx * 4, x0, mask=m)
    tl.store(out_ptr + idx * 4 + 1, x1, mask=m)
    tl.store(out_ptr + idx * 4 + 2, x2, mask=m)
    tl.store(out_ptr + idx * 4 + 3, x3, mask=m)


def kernel_words(seed, offset, n, block=64) -> np.ndarray:
    out = np.zeros((n, 4), np.uint32)
    buf = np.array([seed - (1 << 64) if seed >= 1 << 63 else seed, offset], np.int64)
    triton_adapter.launch(_words_kernel, (-(-n // block),), [out, buf, n], BLOCK=block)
    return out


@pytest.mark.parametrize("seed,offset", [(0, 0), (42, 7), ((1 << 64) - 1, (1 << 40) + 3),
                                         (0x123456789ABCDEF0, (1 << 32) - 5)])
def test_kernel_words_are_philox(seed, offset):
    n = 100  # offsets crossing 2**32 carry into the counter's high word
    got = kernel_words(seed, offset, n)
    assert np.array_equal(got, np.stack(words(seed, offset, n), axis=1).astype(np.uint32))


def test_kernel_words_match_tritons_philox():
    seed, offset, n = 987654321, 11, 50
    ours = kernel_words(seed, offset, n)
    theirs = np.zeros((n, 4), np.uint32)
    triton_adapter.launch(_triton_words_kernel, (1,), [theirs, seed, offset, n], BLOCK=64)
    assert np.array_equal(ours, theirs)


# ---------------------------------------------------------------------- the kernels
def state(seed=0):
    return philox.PhiloxState(cpu.BACKEND, 0, seed)


BF16 = ember.bfloat16.np
FLOATS = [np.float32, np.float64, np.float16, BF16]
DRAWS = {
    "uniform": lambda out, st, block=None: philox.uniform_(out, st, block=block),
    "normal": lambda out, st, block=None: philox.normal_(out, st, block=block),
    "bernoulli": lambda out, st, block=None: philox.bernoulli_(out, st, 0.3, block=block),
}


def draw(kind, n, dtype=np.float32, st=None, block=None):
    out = np.empty(n, dtype)
    DRAWS[kind](out, st if st is not None else state(), block)
    return out


def test_uniform_values_are_the_words_top_bits():
    n = 300
    w = words(5, 0, n)
    top = (w[0] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    assert np.array_equal(draw("uniform", n, st=state(5)), top.astype(np.float32))
    k53 = (w[0] >> np.uint64(5)) * np.uint64(1 << 26) + (w[1] >> np.uint64(6))
    assert np.array_equal(draw("uniform", n, np.float64, st=state(5)), k53 * 2.0 ** -53)


def test_normal_is_box_muller_of_the_words():
    n = 300
    w = words(9, 0, n)
    u1 = ((w[0] >> np.uint64(8)).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (w[1] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    z = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(draw("normal", n, st=state(9)), z, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("kind", DRAWS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_independent_of_block_size(kind, dtype):
    n = 1000  # not a multiple of any block
    ref = draw(kind, n, dtype, block=1024)
    for block in (16, 128, 256):
        assert np.array_equal(draw(kind, n, dtype, block=block), ref, equal_nan=True), block


@pytest.mark.parametrize("kind", DRAWS)
def test_reproducible_per_seed(kind):
    a, b = draw(kind, 500, st=state(123)), draw(kind, 500, st=state(123))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, draw(kind, 500, st=state(124)))


def test_offset_advances_on_the_device():
    st = state(7)
    a = draw("uniform", 1000, st=st)
    assert st.get() == (7, 1000)
    b = draw("uniform", 500, st=st)
    assert st.get() == (7, 1500)
    assert not np.array_equal(a[:500], b)
    whole = draw("uniform", 1500, st=state(7))  # the draws continue one stream
    assert np.array_equal(np.concatenate([a, b]), whole)
    # the kernels read the offset from the buffer: set it there and they follow
    st.set(7, 1000)
    assert np.array_equal(draw("uniform", 500, st=st), b)
    st.manual_seed(7)
    assert st.get() == (7, 0) and np.array_equal(draw("uniform", 1000, st=st), a)


def test_empty_draw_keeps_the_offset():
    st = state(1)
    draw("normal", 0, st=st)
    assert st.get() == (1, 0)


def test_large_seed_and_offset_round_trip():
    st = state((1 << 64) - 3)
    st.set((1 << 64) - 3, (1 << 62) + 5)
    draw("uniform", 10, st=st)
    assert st.get() == ((1 << 64) - 3, (1 << 62) + 15)


# ---------------------------------------------------------------------- distributions
N = 100_000
BIG = 32768  # a large block: the interpreter's cost is per program


_ks = ks_distance


def _normal_cdf(x):
    return torch.special.ndtr(torch.from_numpy(x)).numpy()


KS_BOUND = 1.95 / math.sqrt(N)  # the 0.1% critical value


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_distribution(dtype):
    u = draw("uniform", N, dtype, block=BIG).astype(np.float64)
    assert u.min() >= 0 and u.max() < 1  # never 1.0, at any dtype
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 0.003
    if dtype in (np.float32, np.float64):
        assert _ks(u, lambda x: x) < KS_BOUND
    # every value is k * 2**-digits, k < 2**digits: rounding to the dtype cannot reach 1
    d = philox.DIGITS[np.dtype(dtype)]
    k = u * 2.0 ** d
    assert np.array_equal(k, np.floor(k)) and k.max() <= 2 ** d - 1


def test_uniform_affine_range():
    out = np.empty(N, np.float32)
    philox.uniform_(out, state(3), -2.0, 5.0, block=BIG)
    assert out.min() >= -2 and out.max() < 3
    assert abs(out.mean() - 0.5) < 5 * 5 * math.sqrt(1 / 12 / N)


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_distribution(dtype):
    z = draw("normal", N, dtype, block=BIG).astype(np.float64)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs(np.mean(z ** 3)) < 0.05 and abs(np.mean(z ** 4) - 3) < 0.1  # skew, kurtosis
    if dtype in (np.float32, np.float64):
        assert _ks(z, _normal_cdf) < KS_BOUND


def test_normal_mean_std_float64():
    out = np.empty(N, np.float64)
    philox.normal_(out, state(4), 1e10, 1e-3, block=BIG)  # float64 parameters stay float64
    assert abs(out.mean() - 1e10) < 5e-3 / math.sqrt(N) * 2
    assert abs(out.std() - 1e-3) < 5e-5


@pytest.mark.parametrize("p", [0.0, 0.01, 0.3, 0.5, 0.97, 1.0])
def test_bernoulli_frequency(p):
    out = np.empty(N, np.float32)
    philox.bernoulli_(out, state(11), p, block=BIG)
    assert set(np.unique(out)) <= {0.0, 1.0}
    assert abs(out.mean() - p) <= 5 * math.sqrt(p * (1 - p) / N)
    if p in (0.0, 1.0):
        assert out.mean() == p


@pytest.mark.parametrize("pdtype", [np.float32, np.float64, np.float16])
def test_bernoulli_tensor_p(pdtype):
    levels = np.array([0.0, 0.1, 0.5, 0.9, 1.0], pdtype)
    p = np.repeat(levels, N // 5)
    out = np.empty(p.shape, np.int64)
    philox.bernoulli_(out, state(12), p, block=BIG)
    freq = out.reshape(5, -1).mean(axis=1)
    sd = np.sqrt(levels.astype(np.float64) * (1 - levels) / (N // 5))
    assert np.all(np.abs(freq - levels.astype(np.float64)) <= 5 * sd + 1e-12), freq


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.float16, BF16])
def test_bernoulli_dtypes(dtype):
    out = np.empty(4000, dtype)
    philox.bernoulli_(out, state(13), 0.25)
    vals = out.astype(np.float64)
    assert set(np.unique(vals)) <= {0.0, 1.0} and 0.2 < vals.mean() < 0.3


def test_independent_streams_are_uncorrelated():
    a = draw("uniform", N, np.float64, st=state(1), block=BIG)
    b = draw("uniform", N, np.float64, st=state(2), block=BIG)
    c = draw("uniform", N, np.float64, st=state(1), block=BIG)[1:]  # one counter apart
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(N)
    assert abs(np.corrcoef(a[:-1], c)[0, 1]) < 5 / math.sqrt(N)


# ---------------------------------------------------------------------- the ops, end to end
@pytest.fixture
def philox_on_cpu(monkeypatch):
    """The CUDA backend's overrides, put on the CPU backend: ember's sampling ops on CPU draw
    from Philox kernels run by the interpreter."""
    monkeypatch.setattr(philox, "BLOCK", 4096)
    for name, kernel in random_ops.make(cpu.BACKEND).items():
        monkeypatch.setitem(OPS[name]._kernel_overrides, cpu.BACKEND, kernel)
    yield philox.default_state(cpu.BACKEND, 0)
    philox._DEFAULTS.pop(("cpu", 0), None)


def test_manual_seed_reproduces_rand(philox_on_cpu):
    ember.manual_seed(0)
    a = ember.rand(1000)
    ember.manual_seed(0)
    b = ember.rand(1000)
    assert ember.equal(a, b)
    assert np.array_equal(a.numpy(), draw("uniform", 1000, st=state(0)))
    assert philox_on_cpu.get() == (0, 1000)
    assert not ember.equal(ember.rand(1000), a)  # the stream moved on


SHAPES = {
    "ints": lambda m: m.rand(3, 4),
    "tuple": lambda m: m.rand((3, 4)),
    "list": lambda m: m.rand([3, 4]),
    "size=": lambda m: m.rand(size=(3, 4)),
    "Size": lambda m: m.rand(m.Size([3, 4])),
    "0-d": lambda m: m.rand(()),
    "empty": lambda m: m.rand(0, 4),
}


@pytest.mark.parametrize("name", SHAPES)
def test_factory_shapes_draw_from_philox(name, philox_on_cpu):
    out = SHAPES[name](ember)
    assert tuple(out.shape) == tuple(SHAPES[name](torch).shape)
    assert philox_on_cpu.get()[1] == out.numel()  # every form drew from the Philox stream


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_factories_and_fills(dtype, philox_on_cpu):
    dt = getattr(ember, dtype)
    ember.manual_seed(1)
    for x in (ember.rand(2000, dtype=dt), ember.rand_like(ember.zeros(2000, dtype=dt))):
        assert x.dtype is dt and 0 <= float(x.min()) and float(x.max()) < 1
    for x in (ember.randn(2000, dtype=dt), ember.randn_like(ember.zeros(2000, dtype=dt))):
        assert x.dtype is dt and abs(float(x.float().mean())) < 0.15
    x = ember.empty(2000, dtype=dt).uniform_(2, 5)
    assert x.dtype is dt and 2 <= float(x.min()) and float(x.max()) <= 5
    x = ember.empty(2000, dtype=dt).normal_(3, 0.5)
    assert abs(float(x.float().mean()) - 3) < 0.1 and abs(float(x.float().std()) - 0.5) < 0.1
    assert philox_on_cpu.get()[1] == 6 * 2000


def test_default_dtype_and_like_dtype(philox_on_cpu):
    assert ember.rand(3).dtype is ember.float32
    assert ember.randn_like(ember.zeros(3, dtype=ember.float16), dtype=ember.float64).dtype \
        is ember.float64


def test_normal_op(philox_on_cpu):
    ember.manual_seed(4)
    x = ember.normal(2.0, 3.0, size=(20000,))
    assert x.dtype is ember.float32 and philox_on_cpu.get()[1] == 20000
    assert abs(float(x.mean()) - 2) < 0.1 and abs(float(x.std()) - 3) < 0.1
    y = ember.normal(ember.full((4, 5000), 1.0), ember.full((1, 5000), 2.0))
    assert tuple(y.shape) == (4, 5000) and philox_on_cpu.get()[1] == 40000
    assert abs(float(y.mean()) - 1) < 0.1 and abs(float(y.std()) - 2) < 0.1
    z = ember.normal(0.5, ember.full((5000,), 0.1, dtype=ember.float64))
    assert z.dtype is ember.float64 and abs(float(z.mean()) - 0.5) < 0.01
    h = ember.normal(ember.zeros(5000, dtype=ember.float16), 1.0)
    assert h.dtype is ember.float16 and abs(float(h.float().std()) - 1) < 0.05
    assert philox_on_cpu.get()[1] == 50000


def test_bernoulli_ops(philox_on_cpu):
    ember.manual_seed(2)
    p = ember.full((4000,), 0.25)
    b = ember.bernoulli(p)
    assert b.dtype is ember.float32 and 0.2 < float(b.mean()) < 0.3
    b = ember.bernoulli(ember.zeros(4000), 0.75)
    assert 0.7 < float(b.mean()) < 0.8
    x = ember.empty(4000, dtype=ember.bool).bernoulli_(0.5)
    assert x.dtype is ember.bool and 0.45 < float(x.float().mean()) < 0.55
    x = ember.empty(4, 1000).bernoulli_(ember.tensor([[0.0], [0.2], [0.8], [1.0]]))
    f = x.mean(1).numpy()
    assert f[0] == 0 and f[3] == 1 and 0.15 < f[1] < 0.25 and 0.75 < f[2] < 0.85
    assert philox_on_cpu.get()[1] == 4 * 4000


def test_dropout_keeps_the_fraction_and_scales(philox_on_cpu):
    ember.manual_seed(3)
    x = ember.ones(20000)
    y = ember.nn.functional.dropout(x, 0.2)
    kept = y.numpy() != 0
    assert 0.78 < kept.mean() < 0.82
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.8, rtol=1e-6)
    assert philox_on_cpu.get()[1] == 20000
    ember.manual_seed(3)
    assert ember.equal(ember.nn.functional.dropout(x, 0.2), y)


def test_dropout_gradient(philox_on_cpu):
    x = ember.ones(1000, requires_grad=True)
    y = ember.nn.functional.dropout(x, 0.5)
    y.sum().backward()
    assert ember.equal(x.grad, y.detach())


ERRORS = {
    "negative size": lambda m: m.rand(-1),
    "int dtype": lambda m: m.rand(3, dtype=m.int64),
    "no size": lambda m: m.rand(),
    "float size": lambda m: m.rand(2.5),
    "uniform from > to": lambda m: m.empty(3).uniform_(5, 2),
    "uniform int": lambda m: m.zeros(3, dtype=m.int32).uniform_(),
    "uniform too wide": lambda m: m.empty(3, dtype=m.float16).uniform_(-60000.0, 60000.0),
    "normal negative std": lambda m: m.empty(3).normal_(0, -1),
    "bernoulli p > 1": lambda m: m.empty(3).bernoulli_(1.5),
    "bernoulli tensor p > 1": lambda m: m.empty(3).bernoulli_(m.full((3,), 2.0)),
    "bernoulli probs < 0": lambda m: m.bernoulli(m.full((3,), -0.5)),
    "bernoulli int probs": lambda m: m.bernoulli(m.zeros(3, dtype=m.int64)),
    "bernoulli int p": lambda m: m.empty(3).bernoulli_(m.zeros(3, dtype=m.int64)),
    "randn_like int": lambda m: m.randn_like(m.zeros(3, dtype=m.int64)),
    "normal negative tensor std": lambda m: m.normal(m.zeros(3), m.full((3,), -1.0)),
    "normal negative std": lambda m: m.normal(m.zeros(3), -1.0),
    "normal floats without size": lambda m: m.normal(0.0, 1.0),
    "normal int mean": lambda m: m.normal(m.zeros(3, dtype=m.int64), 1.0),
    "generator not a generator": lambda m: m.rand(3, generator=5),
}


@pytest.mark.parametrize("name", ERRORS)
def test_argument_errors_unchanged(name, philox_on_cpu):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(type(theirs.value)):
        ERRORS[name](ember)
    assert philox_on_cpu.get()[1] == 0  # nothing drawn


def test_complex_falls_back(philox_on_cpu):
    z = ember.randn(100, dtype=ember.complex64)
    assert z.dtype is ember.complex64
    assert philox_on_cpu.get()[1] == 0  # numpy's generator drew it


def test_generator_of_another_device_type(philox_on_cpu):
    other = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda"))
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator"):
        ember.rand(3, generator=other)


def test_generator_over_a_philox_stream(philox_on_cpu):
    """ember.Generator's Philox side (a CUDA generator's, here over a CPU-backend stream)."""
    g = _random.Generator._of_stream(ember.device("cpu"), philox.PhiloxState(cpu.BACKEND, 0, 0))
    g.manual_seed(77)
    a = ember.rand(100, generator=g)
    assert np.array_equal(a.numpy(), draw("uniform", 100, st=state(77)))
    st = g.get_state()
    assert st.dtype is ember.uint8 and st.numel() == 16
    assert int.from_bytes(st.numpy().tobytes()[:8], "little") == 77
    assert int.from_bytes(st.numpy().tobytes()[8:], "little") == 100
    b = ember.rand(100, generator=g)
    g.set_state(st)
    assert ember.equal(ember.rand(100, generator=g), b)
    assert g.initial_seed() == 77 and philox_on_cpu.get()[1] == 0  # the default stream idle
    with pytest.raises(RuntimeError, match="wrong size"):
        g.set_state(ember.zeros(53, dtype=ember.uint8))
    h = g.clone_state()
    assert ember.equal(ember.rand(50, generator=h), ember.rand(50, generator=g))
