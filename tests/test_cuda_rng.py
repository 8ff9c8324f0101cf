"""ember's Philox random numbers on a GPU (the GPU tier: ``-m cuda``).

Tested by distribution and reproducibility, not bitwise against PyTorch (whose Philox consumes
counters differently): the compiled kernels' words against the reference Philox
(tests/philox_ref.py), seeding and state round trips through ``ember.manual_seed``,
``ember.cuda`` and ``Generator("cuda")``, moments and Kolmogorov-Smirnov bounds, dropout, and a
CUDA graph whose replays draw new numbers because the kernels read and advance the offset on
the device. Skips where no GPU exists.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from triton_util import ks_distance
from test_cuda import GPU_TIER
from philox_ref import words

pytestmark = GPU_TIER

FLOATS = ["float32", "float64", "float16", "bfloat16"]
N = 1_000_000


def host(t) -> np.ndarray:
    assert t.is_cuda, f"result is on {t.device}, not the GPU"
    return t.float().cpu().numpy().astype(np.float64) if t.dtype.is_floating_point and \
        t.dtype is not ember.float64 else t.cpu().numpy()


def _philox():
    from ember.backends.cuda import backend, philox
    return backend.BACKEND, philox


_ks = ks_distance


def _normal_cdf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * (1 + erf(x / math.sqrt(2)))


KS_BOUND = 1.95 / math.sqrt(N)  # the 0.1% critical value


# ---------------------------------------------------------------------- reproducibility
def test_manual_seed_reproduces_rand():
    ember.manual_seed(0)
    a = ember.rand(1000, device="cuda")
    ember.manual_seed(0)
    b = ember.rand(1000, device="cuda")
    assert a.is_cuda and a.dtype is ember.float32
    assert np.array_equal(host(a), host(b))
    assert not np.array_equal(host(ember.rand(1000, device="cuda")), host(a))


def test_compiled_kernel_is_philox():
    """The compiled kernel's float32 uniforms are the reference words' top 24 bits."""
    ember.manual_seed(12345)
    got = ember.rand(5000, device="cuda").cpu().numpy()
    w = words(12345, 0, 5000)
    assert np.array_equal(got, ((w[0] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24)
                          .astype(np.float32))
    ember.manual_seed(12345)
    got = ember.rand(5000, device="cuda", dtype=ember.float64).cpu().numpy()
    k53 = (w[0] >> np.uint64(5)) * np.uint64(1 << 26) + (w[1] >> np.uint64(6))
    assert np.array_equal(got, k53 * 2.0 ** -53)


def test_independent_of_block_size():
    backend, philox = _philox()
    cp = pytest.importorskip("cupy")
    outs = []
    for block in (128, 1024, 4096):
        st = philox.PhiloxState(backend, 0, 99)
        out = cp.empty(100_003, cp.float32)
        philox.normal_(out, st, block=block)
        outs.append(out.get())
        assert st.get() == (99, 100_003)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_one_valued_arguments():
    """Arguments Triton specialises (an int equal to 1) still draw correctly: n == 1, a
    float whose low word is 1, a Bernoulli threshold of 1."""
    backend, philox = _philox()
    cp = pytest.importorskip("cupy")
    st = philox.PhiloxState(backend, 0, 5)
    one = cp.empty(1, cp.float32)
    philox.uniform_(one, st)
    assert 0 <= float(one.get()[0]) < 1 and st.get() == (5, 1)
    out = cp.empty(1000, cp.float64)
    philox.uniform_(out, st, 0.0, 1.0000000000000002)
    v = out.get()
    assert 0 <= v.min() and v.max() <= 1.0000000000000002 and v.std() > 0.2
    bits = cp.empty(1000, cp.uint8)
    philox.bernoulli_(bits, st, 2.0 ** -32)  # threshold 1: about never
    assert int(bits.get().sum()) <= 1
    assert st.get() == (5, 2001)


def test_generator_seed_and_state_round_trip():
    g = ember.Generator("cuda")
    assert g.device.type == "cuda" and g.initial_seed() == 67280421310721
    g.manual_seed(7)
    a = ember.rand(100, device="cuda", generator=g)
    state = g.get_state()
    assert state.dtype is ember.uint8 and state.numel() == 16 and not state.is_cuda
    b = ember.randn(100, device="cuda", generator=g)
    g.set_state(state)
    assert np.array_equal(host(ember.randn(100, device="cuda", generator=g)), host(b))
    h = ember.Generator("cuda").manual_seed(7)
    assert np.array_equal(host(ember.rand(100, device="cuda", generator=h)), host(a))
    assert g.initial_seed() == 7
    c = g.clone_state()
    assert np.array_equal(host(ember.rand(50, device="cuda", generator=c)),
                          host(ember.rand(50, device="cuda", generator=g)))


def test_cuda_namespace_rng_state():
    ember.cuda.manual_seed(3)
    assert ember.cuda.initial_seed() == 3
    s = ember.cuda.get_rng_state()
    assert s.dtype is ember.uint8 and s.numel() == 16
    a = ember.rand(1000, device="cuda")
    ember.cuda.set_rng_state(s)
    assert np.array_equal(host(ember.rand(1000, device="cuda")), host(a))
    states = ember.cuda.get_rng_state_all()
    assert len(states) == ember.cuda.device_count()
    b = ember.randn(10, device="cuda")
    ember.cuda.set_rng_state_all(states)
    assert np.array_equal(host(ember.randn(10, device="cuda")), host(b))
    gens = ember.cuda.default_generators
    assert len(gens) == ember.cuda.device_count() and gens[0].initial_seed() == 3
    ember.cuda.manual_seed_all(11)
    assert gens[0].initial_seed() == 11
    ember.cuda.seed()
    ember.cuda.seed_all()


def test_cpu_seed_reaches_cuda():
    ember.manual_seed(21)
    assert ember.cuda.initial_seed() == 21
    s = ember.seed()
    assert ember.cuda.initial_seed() == s


@pytest.mark.parametrize("devices", [None, [0]])
def test_fork_rng_restores_the_cuda_stream(devices):
    ember.manual_seed(5)
    with ember.random.fork_rng(devices=devices):
        inside = ember.rand(10, device="cuda")
    after = ember.rand(10, device="cuda")
    assert np.array_equal(host(inside), host(after))
    with ember.random.fork_rng(devices=[]):  # no device forked: the stream moves on
        ember.rand(10, device="cuda")
    assert not np.array_equal(host(ember.rand(10, device="cuda")), host(after))


def test_cpu_generator_for_a_cuda_op():
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
        ember.rand(3, device="cuda", generator=ember.Generator())


# ---------------------------------------------------------------------- distributions
@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_distribution(dtype):
    ember.manual_seed(100)  # fixed seeds: the statistical bounds are checked once, not flaky
    dt = getattr(ember, dtype)
    u = host(ember.rand(N, device="cuda", dtype=dt))
    assert u.min() >= 0 and u.max() < 1
    # values are k 2^-d (d the dtype's kept bits), so the mean sits half a step below 0.5
    step = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}.get(dtype, 0.0)
    assert abs(u.mean() - (0.5 - step / 2)) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 0.001
    if dtype in ("float32", "float64"):
        assert _ks(u, lambda x: x) < KS_BOUND


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_distribution(dtype):
    ember.manual_seed(101)
    dt = getattr(ember, dtype)
    z = host(ember.randn(N, device="cuda", dtype=dt))
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N) + (0.002 if dtype == "bfloat16" else 0)
    assert abs(np.mean(z ** 3)) < 0.02 and abs(np.mean(z ** 4) - 3) < 0.06
    if dtype in ("float32", "float64"):
        assert _ks(z[:100_000], _normal_cdf) < 1.95 / math.sqrt(100_000)


@pytest.mark.parametrize("dtype", FLOATS)
def test_like_and_fills(dtype):
    ember.manual_seed(102)
    dt = getattr(ember, dtype)
    base = ember.zeros(100_000, dtype=dt, device="cuda")
    for t in (ember.rand_like(base), ember.randn_like(base)):
        assert t.is_cuda and t.dtype is dt
    x = ember.empty(100_000, dtype=dt, device="cuda").uniform_(-3, 2)
    v = host(x)
    assert x.dtype is dt and v.min() >= -3 and v.max() <= 2 and abs(v.mean() + 0.5) < 0.05
    x = ember.empty(100_000, dtype=dt, device="cuda").normal_(4, 0.5)
    v = host(x)
    assert abs(v.mean() - 4) < 0.02 and abs(v.std() - 0.5) < 0.02
    y = ember.normal(ember.full((100_000,), 1.0, dtype=dt, device="cuda"), 2.0)
    assert y.is_cuda and y.dtype is dt and abs(host(y).std() - 2) < 0.05


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_bernoulli_frequency(p):
    ember.manual_seed(103)
    x = ember.empty(N, device="cuda").bernoulli_(p)
    f = host(x).mean()
    assert abs(f - p) <= 5 * math.sqrt(p * (1 - p) / N)
    probs = ember.full((N,), p, device="cuda")
    assert abs(host(ember.bernoulli(probs)).mean() - p) <= 5 * math.sqrt(p * (1 - p) / N) + 1e-9


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_draws_on_the_device(replacement):
    """Philox draws (xp.uniform_draws) reproduce under a seed and follow the weights: with
    replacement every draw is category k with probability w_k; without, the first of two
    draws is (the second never repeats it)."""
    w = np.array([0.1, 0.2, 0.3, 0.4])
    probs = ember.tensor(np.tile(w, (N // 4, 1))).cuda()
    ember.manual_seed(104)
    x = ember.multinomial(probs, 2, replacement)
    ember.manual_seed(104)
    assert x.is_cuda and np.array_equal(host(x), host(ember.multinomial(probs, 2, replacement)))
    x = host(x)
    if not replacement:
        assert np.all(x[:, 0] != x[:, 1])
    f = np.bincount(x[:, 0], minlength=4) / len(x)
    assert np.all(np.abs(f - w) <= 5 * np.sqrt(w * (1 - w) / len(x)))
    g = ember.Generator("cuda").manual_seed(5)
    assert ember.multinomial(probs[:3], 1, generator=g).is_cuda
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
        ember.multinomial(probs, 1, generator=ember.Generator())


def test_bernoulli_dtypes_and_tensor_p():
    ember.manual_seed(104)
    for dt in (ember.bool, ember.uint8, ember.int64, ember.float16, ember.bfloat16):
        x = ember.empty(100_000, dtype=dt, device="cuda").bernoulli_(0.25)
        v = host(x).astype(np.float64)
        assert x.dtype is dt and set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - 0.25) < 0.01
    p = ember.tensor([[0.0], [0.2], [0.8], [1.0]], device="cuda")
    f = host(ember.empty(4, 100_000, device="cuda").bernoulli_(p)).mean(axis=1)
    assert f[0] == 0 and f[3] == 1 and abs(f[1] - 0.2) < 0.01 and abs(f[2] - 0.8) < 0.01
    with pytest.raises(RuntimeError):
        ember.empty(3, device="cuda").bernoulli_(1.5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dropout(dtype):
    dt = getattr(ember, dtype)
    x = ember.ones(N, dtype=dt, device="cuda")
    ember.manual_seed(0)
    y = ember.nn.functional.dropout(x, 0.3)
    v = host(y)
    kept = v != 0
    assert y.is_cuda and y.dtype is dt
    assert abs(kept.mean() - 0.7) < 5 * math.sqrt(0.21 / N)
    np.testing.assert_allclose(v[kept], 1 / 0.7, rtol=1e-2 if dtype != "float32" else 1e-6)
    ember.manual_seed(0)
    assert np.array_equal(host(ember.nn.functional.dropout(x, 0.3)), v)
    m = ember.nn.Dropout(0.5)
    z = host(m(ember.ones(100_000, dtype=dt, device="cuda")))
    assert abs((z != 0).mean() - 0.5) < 0.01
    m.eval()
    assert np.array_equal(host(m(x)), host(x))


def test_dropout_backward():
    x = ember.ones(10_000, device="cuda", requires_grad=True)
    y = ember.nn.functional.dropout(x, 0.4)
    y.sum().backward()
    assert np.array_equal(host(x.grad), host(y.detach()))


# ---------------------------------------------------------------------- CUDA graphs
@pytest.mark.parametrize("kind", ["uniform", "normal", "bernoulli"])
def test_cuda_graph_replays_draw_new_numbers(kind):
    """A captured draw reads the offset from the device buffer and advances it there, so
    each replay continues the stream: the replays equal the eager stream's next draws."""
    cp = pytest.importorskip("cupy")
    backend, philox = _philox()
    fill = {"uniform": lambda o, s: philox.uniform_(o, s),
            "normal": lambda o, s: philox.normal_(o, s, 1.0, 2.0),
            "bernoulli": lambda o, s: philox.bernoulli_(o, s, 0.5)}[kind]
    n = 10_000
    st = philox.PhiloxState(backend, 0, 2024)
    out = cp.empty(n, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fill(out, st)  # compiles and loads the kernels, allocates the state buffer
        stream.synchronize()
        stream.begin_capture()
        fill(out, st)  # captured: no allocation, no synchronisation
        graph = stream.end_capture()
        replays = []
        for _ in range(2):
            graph.launch(stream)
            stream.synchronize()
            replays.append(out.get())
    assert not np.array_equal(replays[0], replays[1])
    assert st.get() == (2024, 3 * n)
    ref = cp.empty(3 * n, cp.float32)
    fill(ref, philox.PhiloxState(backend, 0, 2024))
    ref = ref.get()
    assert np.array_equal(replays[0], ref[n:2 * n])
    assert np.array_equal(replays[1], ref[2 * n:])
