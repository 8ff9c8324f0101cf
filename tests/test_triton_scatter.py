"""ember's Triton scatter kernel (backends/cuda/scatter_kernels.py, wrapper scatter.py:
``xp.ufunc_at`` on CUDA) through Triton's interpreter on CPU. First the wrapper on numpy
arrays against numpy's ``ufunc.at`` (every operation and dtype, repeated and negative
indices, keys of several index arrays, masks and slices, strided targets, empty keys), then
through ember's ops with the CPU backend's ``xp.ufunc_at`` swapped for the kernel, against
PyTorch: index_put(accumulate=True), index_add, scatter(reduce=), scatter_add,
scatter_reduce, take's and indexing's backward. Last, the kernel
compiles for sm_90 in every operation and element type (no GPU needed).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, SM90_BUILD, compile_for_sm90
from ember.backends import cpu
from ember.backends.cuda import scatter

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64", "complex64"]
OPS = ["add", "multiply", "maximum", "minimum"]


def _np_dtype(name):
    return getattr(ember, name).np if name == "bfloat16" else np.dtype(name)


def values(shape, dtype, rng):
    dt = _np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -4, 5, shape).astype(dt)
    a = rng.integers(-6, 7, shape) / 2  # exact in every float type: sums and products too
    return (a + 1j * rng.integers(-3, 4, shape) if dt.kind == "c" else a).astype(dt)


def reference(name, a, key, v):
    """numpy's ufunc.at in float64 (half types round once at the end, as the kernel)."""
    if a.dtype.kind == "f" and a.dtype.itemsize == 2 or a.dtype == ember.bfloat16.np:
        wide = a.astype(np.float64)
        getattr(np, name).at(wide, key, np.asarray(v).astype(np.float64))
        return wide.astype(a.dtype)
    out = a.copy()
    getattr(np, name).at(out, key, v)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", OPS)
def test_wrapper_matches_numpy(name, dtype):
    if dtype == "complex64" and name != "add":
        a = np.zeros(3, np.complex64)
        with pytest.raises(NotImplementedError, match="complex"):
            scatter.ufunc_at(name, a, np.array([0]), a[:1])
        return
    rng = np.random.default_rng(len(name) + len(dtype))
    a = values((6, 3), dtype, rng)
    idx = rng.integers(-6, 6, 20)  # repeated and negative rows
    v = values((20, 3), dtype, rng)
    got = a.copy()
    scatter.ufunc_at(name, got, idx, v)
    np.testing.assert_array_equal(got, reference(name, a, idx, v))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_extrema_propagate_nan(name):
    a = np.array([1.0, np.nan, 3.0, 0.0], np.float32)
    idx = np.array([0, 0, 1, 2, 3, 3])
    v = np.array([np.nan, 5.0, 2.0, 4.0, -np.inf, np.inf], np.float32)
    got = a.copy()
    scatter.ufunc_at(name, got, idx, v)
    np.testing.assert_array_equal(got, reference(name, a, idx, v))


KEYS = [
    ("rows and columns", (4, 5, 2), lambda r: (r.integers(0, 4, 7), r.integers(-5, 5, (3, 1)),
                                              slice(None))),
    ("mask", (4, 5), lambda r: r.random((4, 5)) > 0.4),
    ("after a slice", (3, 6), lambda r: (slice(None), np.array([1, 1, 5, -1]))),
    ("empty", (3, 4), lambda r: np.zeros(0, np.int64)),
]


@pytest.mark.parametrize("case", KEYS, ids=[k[0] for k in KEYS])
@pytest.mark.parametrize("name", ["add", "maximum", "multiply"])
def test_keys(case, name):
    _, shape, key_of = case
    rng = np.random.default_rng(3)
    key = key_of(rng)
    a = values(shape, "float64", rng)
    v = values(a[key].shape, "float64", rng)
    got = a.copy()
    scatter.ufunc_at(name, got, key, v)
    np.testing.assert_array_equal(got, reference(name, a, key, v))


def test_strided_target_and_broadcast_values():
    """A transposed view is updated in place; a scalar value broadcasts over the key."""
    base = np.zeros((5, 4))
    view = base.T[:, ::2]  # (4, 3), not contiguous
    idx = np.array([0, 3, 3, 1])
    scatter.ufunc_at("add", view, idx, 2.5)
    want = np.zeros((5, 4))
    np.add.at(want.T[:, ::2], idx, 2.5)
    np.testing.assert_array_equal(base, want)


@pytest.fixture
def kernel_at(monkeypatch):
    """The CPU backend's kernels scatter through the Triton kernel; yields its launch count."""
    monkeypatch.setattr(cpu.BACKEND.xp, "ufunc_at", scatter.ufunc_at)
    before = scatter.STATS["launches"]
    return lambda: scatter.STATS["launches"] - before


def pair(a, grad=False):
    e, t = ember.tensor(a), torch.tensor(a)
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def same(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_ops_through_the_kernel(kernel_at):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))
    src = rng.standard_normal((7, 4))
    rows = rng.integers(0, 5, 7)
    for f in (lambda m, a, s, i: m.index_add(a, 0, i, s, alpha=2),
              lambda m, a, s, i: a.index_put((i,), s, accumulate=True),
              lambda m, a, s, i: a.scatter_add(0, i[:, None].expand(7, 4)[:4], s[:4]),
              lambda m, a, s, i: a.scatter(0, i[:4, None].expand(4, 4), s[:4], reduce="multiply"),
              lambda m, a, s, i: a.scatter_reduce(0, i[:, None].expand(7, 4), s, "amax",
                                                  include_self=False),
              lambda m, a, s, i: a.scatter_reduce(0, i[:, None].expand(7, 4), s, "mean")):
        (ea, ta), (es, ts) = pair(x), pair(src)
        same(f(ember, ea, es, ember.tensor(rows)), f(torch, ta, ts, torch.tensor(rows)))
    assert kernel_at() >= 6


def test_gradients_through_the_kernel(kernel_at):
    """Backward of indexing with repeated indices and take's accumulate through it (the CPU
    backend sums embedding's gradient rows in its own C loop: the GPU tier checks that one)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3))
    rows = rng.integers(-6, 6, 9)
    (ex, tx) = pair(x, grad=True)
    ex[ember.tensor(rows)].pow(2).sum().backward()
    tx[torch.tensor(rows)].pow(2).sum().backward()
    same(ex.grad, tx.grad)
    (ex, tx) = pair(x, grad=True)
    flat = rng.integers(-18, 18, 11)
    ember.take(ex, ember.tensor(flat)).sum().backward()
    torch.take(tx, torch.tensor(flat)).sum().backward()
    same(ex.grad, tx.grad)
    assert kernel_at() == 2


COMPILE = SM90_BUILD + r"""
from ember.backends.cuda import scatter_kernels as K
types = {"fp32": "i32", "fp64": "i64", "i32": "i32", "i64": "i64", "u64": "u64"}
for op in range(4):
    for t, bits in types.items():
        sig = {"out_ptr": "*" + t, "bits_ptr": "*" + bits, "idx_ptr": "*i64",
               "val_ptr": "*" + t, "n": "i32", "inner": "i32"}
        consts = dict(OP=op, FLOAT=t.startswith("fp"), BLOCK=512)
        sig.update({c: "constexpr" for c in consts})
        triton.compile(ASTSource(K.scatter_at, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": WARPS})
print("ok")
"""


def test_kernel_compiles_for_sm90():
    """The scatter kernel in every operation and element type, through Triton's compiler to a
    Hopper cubin."""
    compile_for_sm90(COMPILE)
