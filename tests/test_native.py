"""The eager fast path through compiler-generated kernels (ember/backends/native.py, built by
ember/compiler/eager_kernels.py): each fast-pathed op against the numpy path and torch, forward
and backward, around the size threshold; the switches (EMBER_EAGER_KERNELS, no C compiler,
failures, recursion) and the on-disk cache across processes."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import ember
from ember.backends import native
from ember.codegen.c import runtime
from ember.compiler import eager_kernels
from tests.oracle import assert_same, check, rand

N = native.MIN_ELEMENTS

# name -> fn(module, x): each runs its op's forward and, through check(), its backward op
OPS = {
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "gelu_tanh": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
    "softmax_last": lambda m, x: m.softmax(x, -1),
    "softmax_mid": lambda m, x: m.softmax(x, 1),
    "softmax_first": lambda m, x: m.softmax(x, 0),
    "log_softmax_last": lambda m, x: m.log_softmax(x, -1),
    "log_softmax_mid": lambda m, x: m.log_softmax(x, 1),
}
# shapes around the threshold (elements: N - 32, N, 3 N) plus edge shapes of the row kernels
SHAPES = [(N // 64 - 1, 2, 32), (N // 64, 2, 32), (3, 2, N // 2), (1, N, 2), (N, 1, 2),
          (2, N // 2, 1)]
# native calls per forward + backward in float64 (eager_kernels.py _PAYS64: exact GELU and
# softmax's backward; float64 tanh-GELU, log_softmax and softmax's forward stay on numpy)
NATIVE64 = {"gelu": 2, "softmax_last": 1, "softmax_mid": 1, "softmax_first": 1}
TOL = {ember.float32: {"rtol": 1e-5, "atol": 1e-5}, ember.float64: {"rtol": 1e-13, "atol": 1e-13}}


def _close(a, b, rtol=0.0, atol=0.0):
    """Two ember results agree (NaN where the other has NaN, infinities equal)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture
def numpy_path(monkeypatch):
    """Runs a callable with the native path switched off."""
    def run(fn, *args):
        monkeypatch.setenv("EMBER_EAGER_KERNELS", "0")
        try:
            return fn(*args)
        finally:
            monkeypatch.delenv("EMBER_EAGER_KERNELS")
    return run


def _fwd_bwd(fn, x, g):
    x = x.detach().requires_grad_()
    y = fn(ember, x)
    y.backward(g)
    return y.detach(), x.grad


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_native_matches_numpy_and_torch(name, shape, dtype, numpy_path, monkeypatch):
    monkeypatch.delenv("EMBER_EAGER_KERNELS", raising=False)
    fn = OPS[name]
    x = rand(*shape, dtype=dtype, low=-6, high=6, seed=1)
    g = rand(*shape, dtype=dtype, seed=2)
    before = eager_kernels.STATS["calls"]
    y, gx = _fwd_bwd(fn, x, g)
    used = eager_kernels.STATS["calls"] - before
    big = x.numel() >= N
    expect = 0 if not big else 2 if dtype == ember.float32 else NATIVE64.get(name, 0)
    assert used == expect, f"{used} native calls, expected {expect}"
    y0, gx0 = numpy_path(_fwd_bwd, fn, x, g)
    _close(y, y0, **TOL[dtype])
    _close(gx, gx0, **TOL[dtype])
    # |x| up to 6: torch's float32 GELU computes 1 + erf(x / sqrt 2) and 1 - tanh^2, which
    # cancel for x << 0 (~1e-6 absolute error; ember's formulas do not: test_gelu_accuracy)
    check(fn, None, x.detach().requires_grad_(), seed=3,
          atol=1e-5 if dtype == ember.float32 else None)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "softmax_last", "log_softmax_mid"])
def test_noncontiguous(name, numpy_path):
    x = rand(64, 3, 400, noncontig=True, low=-5, high=5, requires_grad=True)
    assert not x.is_contiguous()
    before = eager_kernels.STATS["calls"]
    check(OPS[name], None, x, atol=1e-5 if name.startswith("gelu") else None)  # as above
    assert eager_kernels.STATS["calls"] > before
    y = OPS[name](ember, x.detach())
    _close(y, numpy_path(OPS[name], ember, x.detach()), **TOL[ember.float32])


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("name", OPS)
def test_nan_inf(name, dtype, numpy_path):
    x = rand(N // 64, 4, 16, dtype=dtype, low=-8, high=8, seed=4)
    a = x.numpy()
    a[0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    a[1, :, :] = -np.inf  # a row of -inf (NaN for softmax, as in torch)
    a[2, 1, 3] = np.inf
    a[3, 2, 5] = np.nan
    a[4, 0, 0] = -0.0
    x = ember.tensor(a)
    g = rand(*x.shape, dtype=dtype, seed=5)
    y, gx = _fwd_bwd(OPS[name], x, g)
    y0, gx0 = numpy_path(_fwd_bwd, OPS[name], x, g)
    _close(y, y0, **TOL[dtype])
    _close(gx, gx0, **TOL[dtype])
    assert np.signbit(y.numpy()[4, 0, 0]) == np.signbit(y0.numpy()[4, 0, 0])
    if name.startswith(("softmax", "log")):  # torch agrees on these
        assert_same(y, OPS[name](torch, torch.from_numpy(a)))


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
@pytest.mark.parametrize("name", ["softmax_last", "log_softmax_mid"])
def test_half_softmax_forward(name, dtype):
    x = rand(N // 64, 4, 16, dtype=dtype)
    before = eager_kernels.STATS["calls"]
    check(OPS[name], None, x, grad=False, rtol=1e-2, atol=1e-2)
    assert eager_kernels.STATS["calls"] == before + 1  # computed in float32 natively


@pytest.mark.parametrize("shape", [(0, N), (N, 0, 3)], ids=str)
@pytest.mark.parametrize("name", OPS)
def test_empty(name, shape):
    check(OPS[name], None, rand(*shape, requires_grad=True))


def test_env_var_off(monkeypatch):
    monkeypatch.setenv("EMBER_EAGER_KERNELS", "0")
    x = rand(4 * N, requires_grad=True)
    before = dict(eager_kernels.STATS)
    check(OPS["gelu"], None, x)
    check(OPS["softmax_last"], None, x.detach().reshape(8, -1).requires_grad_())
    assert eager_kernels.STATS == before


@pytest.fixture
def fresh_kernels():
    eager_kernels.clear()
    yield
    eager_kernels.clear()  # later tests rebuild from the disk cache


def test_no_c_compiler(monkeypatch, fresh_kernels, tmp_path, numpy_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    probes = []
    monkeypatch.setattr(runtime, "find_c_compiler", lambda: probes.append(1))
    x = rand(2 * N, low=-5, high=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            y = ember.nn.functional.gelu(x)
    assert len(probes) == 1  # the failure is remembered, not retried per call
    _close(y, numpy_path(OPS["gelu"], ember, x))  # the numpy path itself: bit for bit
    check(OPS["gelu"], None, x, atol=1e-5)


def test_build_failure_remembered(monkeypatch, fresh_kernels):
    calls = []

    def broken(*a):
        calls.append(a)
        raise runtime.CompileError("rejected")

    monkeypatch.setattr(eager_kernels, "_build", broken)
    x = rand(8, N // 4)
    for _ in range(3):
        check(OPS["softmax_last"], None, x)
    assert len(calls) == 1


def test_recursion_guard():
    eager_kernels._LOCAL.busy = True
    try:
        assert native.kernel("gelu", np.float32, 1, approximate="none") is None
    finally:
        eager_kernels._LOCAL.busy = False
    assert native.kernel("gelu", np.float32, 1, approximate="none") is not None


def test_under_compile():
    # while ember.compile captures, the op is a graph node; the compiled graph's own kernels
    # and the eager fast path then agree
    f = ember.compile(lambda t: ember.nn.functional.gelu(t) + ember.softmax(t, -1))
    x = rand(16, N // 8)
    _close(f(x), ember.nn.functional.gelu(x) + ember.softmax(x, -1), rtol=1e-5, atol=1e-6)


_CHILD = textwrap.dedent("""
    import ember, json
    from ember.codegen import cache
    from ember.compiler import eager_kernels
    x = ember.randn(64, 1024)
    ember.softmax(x, -1)
    print(json.dumps({"calls": eager_kernels.STATS["calls"], **cache.STATS}))
""")


def test_disk_cache_across_processes(tmp_path):
    import json

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_EAGER_KERNELS": "1",
           "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120, check=True)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert runs[0]["calls"] == 1 and runs[0]["builds"] == 1
    assert runs[1]["calls"] == 1 and runs[1]["builds"] == 0 and runs[1]["hits"] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_add_scatters_rows_in_order(dtype):
    """embedding's weight gradient kernel: out[idx[i]] += src[i], repeated rows summed in
    index order (as numpy's sorted segments), refused (False, out untouched) for layouts and
    dtypes it does not take."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 7, 300)
    src = rng.standard_normal((300, 33)).astype(dtype)
    out = rng.standard_normal((7, 33)).astype(dtype)
    want = out.copy()
    for i, r in enumerate(idx):
        want[r] += src[i]
    assert native.rows_add(out, idx.astype(np.int32), src)
    np.testing.assert_array_equal(out, want)
    before = out.copy()
    assert not native.rows_add(out, idx, src[:, ::2])  # not contiguous
    assert not native.rows_add(out, idx, src.astype(np.float16))  # another dtype
    assert not native.rows_add(np.asfortranarray(out), idx, src)
    np.testing.assert_array_equal(out, before)
