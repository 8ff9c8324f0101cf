"""Compiled graphs on one thread pool (ember/compiler/gemm.py): the matmul drivers against
numpy over every layout they take or refuse, which graphs run on one pool, the kernels' lower
OpenMP threshold there, and numpy's BLAS thread count restored after every call."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from compile_util import close, fresh_compiler, rand  # noqa: F401 (autouse fixture)
from oracle import assert_within, product_bound

import ember
from ember.compiler import codegen_c, compile, fusion, gemm

F = ember.nn.functional


def test_drivers_are_available_here():
    """numpy's wheels bring OpenBLAS and the test machines have gcc with OpenMP: if this
    fails, every graph silently lost the one-pool path."""
    assert gemm.pool() is not None


def _t(a: np.ndarray) -> np.ndarray:
    """``a`` stored transposed in its last two dims (same values, column-major matrices)."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


LAYOUTS = {
    "plain": lambda a: a,
    "transposed": _t,
    "strided rows": lambda a: np.concatenate([a, a], axis=-1)[..., : a.shape[-1]],
    "every other col": lambda a: np.repeat(a, 2, axis=-1)[..., ::2],  # no unit stride: copied
    "reversed": lambda a: a[..., ::-1, :][..., ::-1, :],  # a view of a view, positive strides
    # an expanded stack (the first matrix repeated at batch stride 0, read-only): its rows
    # never lie k apart, so it is not read as one matrix of all rows
    "broadcast batch": lambda a: np.broadcast_to(a[:1], a.shape) if a.ndim > 2 else a,
}
WRITABLE = [name for name in LAYOUTS if name != "broadcast batch"]  # for outputs

SHAPES = [
    ((64, 32), (32, 48)),  # one product
    ((1024, 128), (128, 384)),  # big enough to split rows over the threads
    ((16, 64, 128), (128, 512)),  # a stack times one matrix: one product of all rows
    ((8, 64, 32), (8, 32, 64)),  # a batch: one matrix per thread
    ((2, 3, 64, 32), (2, 3, 32, 64)),  # two batch dims
    ((4, 1, 8, 16), (3, 16, 8)),  # broadcast batch dims
    ((1, 16), (16, 1)),  # 1 x 1 result
    ((1, 5, 7), (7, 1)),
    ((4, 1, 16), (16, 8)),  # a stack of one-row matrices times one matrix
    ((3, 1, 7), (3, 7, 5)),
    ((5, 0), (0, 4)),  # empty inner dim: zeros (numpy's fallback)
    ((0, 5), (5, 4)),
    ((0, 3, 5), (0, 5, 4)),  # an empty batch (once a division by zero in the driver)
    ((2, 0, 3, 5), (1, 5, 4)),
    ((7,), (7, 3)),  # 1-D operands: numpy's fallback
    ((3, 7), (7,)),
    ((7,), (7,)),  # a 0-d result
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la", sorted(LAYOUTS))
@pytest.mark.parametrize("lb", sorted(LAYOUTS))
def test_matmul_matches_numpy(dtype, la, lb):
    rng = np.random.default_rng(0)
    with gemm.pool().serial_blas():
        for sa, sb in SHAPES:
            a, b = (rng.standard_normal(s).astype(dtype) for s in (sa, sb))
            if len(sa) >= 2:
                a = LAYOUTS[la](a)
            if len(sb) >= 2:
                b = LAYOUTS[lb](b)
            want = np.asarray(np.matmul(a, b))
            np.full(want.shape, np.nan, dtype)  # freed: a result's new memory may start NaN
            # linear's bias: one value per column, filled into c before BLAS adds the product
            bias = rng.standard_normal(want.shape[-1:]).astype(dtype)
            # an output in another layout: each LAYOUTS entry (column-major goes through a
            # temporary), and batch dims swapped (a transposed attention output)
            lo = la if la in WRITABLE else "plain"
            out = LAYOUTS[lo](np.full(want.shape, np.nan, dtype)) if want.ndim >= 2 else \
                np.full(want.shape, np.nan, dtype)
            swapped = np.full(want.shape[:-3] + want.shape[-2:-1] + want.shape[-3:-2] +
                              want.shape[-1:], np.nan, dtype).swapaxes(-3, -2) \
                if want.ndim >= 3 else np.full(want.shape, np.nan, dtype)
            outs = [(gemm.matmul(a, b, out=o), o) for o in (out, swapped)]
            outs += [(o, o) for o in (out.copy(), swapped.copy()) if _direct(a, b, o)]
            for got, o in outs:
                assert got is o, (sa, sb)
            # numpy's matmul and the drivers may sum each dot product in another order (on
            # some CPUs they do): both lie within product_bound of the exact product
            bound = 2 * product_bound(a, b)
            for got, want, bnd in ((gemm.matmul(a, b), want, bound),
                                   (gemm.matmul(a, b, bias), want + bias,
                                    2 * product_bound(a, b, bias)),
                                   *((got, want, bound) for got, _ in outs)):
                assert isinstance(got, np.ndarray), (sa, sb)
                assert got.shape == want.shape and got.dtype == want.dtype, (sa, sb)
                assert_within(got, want, bnd, rtol=0, path=str((sa, sb)))


def _direct(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """c = a @ b by one driver call with gemm.static_args (what a compiled graph's wrapper
    emits when shapes and strides are known), if it takes these layouts."""
    el = [tuple(s // x.itemsize for s in x.strides) for x in (a, b, c)]
    args = gemm.static_args((a.shape, el[0]), (b.shape, el[1]), (c.shape, el[2]), a.dtype)
    if args is None or a.dtype != b.dtype or c.dtype != a.dtype:
        return False
    (head, la, lb, lc), p = args, gemm.pool()
    p.drivers[a.dtype](p.fns[a.dtype], *head, a.ctypes.data, *la, b.ctypes.data, *lb,
                       c.ctypes.data, *lc, None)
    return True


def test_matmul_falls_back_for_other_dtypes():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    b = np.arange(8, dtype=np.int64).reshape(4, 2)
    np.testing.assert_array_equal(gemm.matmul(a, b), a @ b)
    h = np.ones((4, 4), np.float16)
    assert gemm.matmul(h, h).dtype == np.float16
    mixed = gemm.matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float64))
    assert mixed.dtype == np.float64


def _entry(cf):
    return cf._entries[-1].run


def test_graph_products_run_on_one_pool():
    """matmul, mm, bmm and linear (its bias filled into the output first) call the drivers;
    results equal eager's; numpy's BLAS thread count is what it was after the call."""
    w, b = rand(96, 64, seed=1), rand(96, seed=2)
    q, k = rand(8, 4, 32, 16, seed=3), rand(8, 4, 16, 32, seed=4)
    m1, m2 = rand(6, 64, seed=5), rand(64, 6, seed=6)
    b1, b2 = rand(3, 5, 7, seed=7), rand(3, 7, 2, seed=8)

    def f(x):
        h = F.gelu(F.linear(x, w, b))
        att = (q @ k).softmax(-1)
        return h, F.linear(x, w), att, m1.mm(m2), b1.bmm(b2), x.t() @ x

    x = rand(128, 64)
    # compiled and eager products may sum in other orders (CPU-dependent): each output within
    # twice the products' bound, carried through what follows them (GELU's slope is below
    # 1.13; a softmax moves by at most half its row's largest input change)
    bounds = [2.26 * product_bound(x, w.t(), b), 2 * product_bound(x, w.t()),
              product_bound(q, k).max(-1, keepdims=True), 2 * product_bound(m1, m2),
              2 * product_bound(b1, b2), 2 * product_bound(x.t(), x)]
    before = gemm.pool()._get()
    cf = compile(f)
    with ember.no_grad():
        for _ in range(2):
            for i, (got, want, bound) in enumerate(zip(cf(x), f(x), bounds)):
                assert_within(got, want, bound, path=f"out[{i}]")
    assert gemm.pool()._get() == before
    src = _entry(cf).wrapper_source
    for name in ("linear", "matmul", "mm", "bmm"):  # each a direct driver call
        assert f"# {name}: BLAS on the graph's thread pool" in src, name
        assert f"# ember.ops.{name}," not in src and f"_gemm_{name}(" not in src, name


def test_training_graph_on_one_pool_matches_eager():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.GELU(),
                                ember.nn.Linear(128, 64))
    ref = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.GELU(), ember.nn.Linear(128, 64))
    ref.load_state_dict(model.state_dict())
    cm = compile(model)
    x = rand(256, 64, seed=9)
    for m in (cm, ref):
        m(x).square().mean().backward()
    for (n, p), pr in zip(model.named_parameters(), ref.parameters()):
        close(p.grad, pr.grad)


def test_graph_with_numpy_blas_eager_step_keeps_numpy_threads():
    """A convolution runs eagerly and calls numpy's BLAS itself: that graph keeps numpy's
    matmul and threads (two pools would fight) and the big-kernel OpenMP threshold."""
    w = rand(4, 3, 3, 3, seed=1)
    lin = rand(16, 8, seed=2)

    def f(x):
        y = F.conv2d(x, w)
        return y.flatten(1)[:, :8] @ lin.t(), (x * 2).exp()

    x = rand(2, 3, 128, 128)  # 98K elements: parallel on one pool, not next to numpy's BLAS
    cf = compile(f)
    with ember.no_grad():
        close(cf(x), f(x))
    run = _entry(cf)
    assert run.pool is None and "BLAS on the graph" not in run.wrapper_source
    assert "#pragma omp parallel" not in run.c_source


def test_one_pool_kernels_go_parallel_at_smaller_sizes():
    n = codegen_c.OMP_MIN_ELEMENTS_ONE_POOL
    assert n < codegen_c.OMP_MIN_ELEMENTS
    w = rand(n // 64, 64, seed=1)

    def f(x):
        return (x @ w.t()).tanh()  # 64 x n/64 = n elements

    x = rand(64, 64)
    cf = compile(f)
    with ember.no_grad():
        assert_within(cf(x), f(x), 2 * product_bound(x, w.t()))  # tanh's slope is at most 1
    run = _entry(cf)
    assert run.pool is not None and "#pragma omp parallel for" in run.c_source


def test_no_pool_graphs_still_work(monkeypatch):
    """Without the drivers (no OpenBLAS found, no OpenMP) graphs keep numpy's matmul."""
    monkeypatch.setattr(gemm, "_POOL", [None])
    w, b = rand(32, 16, seed=1), rand(32, seed=2)

    def f(x):
        return F.relu(F.linear(x, w)), F.gelu(F.linear(x, w, b))

    x = rand(8, 16)
    cf = compile(f)
    with ember.no_grad():
        close(cf(x), f(x))
    assert "BLAS on the graph" not in _entry(cf).wrapper_source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_of_head_views_in_place(dtype):
    """Attention heads viewed in a (B, T, 3 * H * D) buffer: batch dims (B, H) that do not
    collapse to one stride are two groups for the driver, so nothing is copied."""
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((2, 8, 3 * 4 * 16)).astype(dtype)
    q, k, v = (qkv[..., i * 64:(i + 1) * 64].reshape(2, 8, 4, 16).transpose(0, 2, 1, 3)
               for i in range(3))
    big = rng.standard_normal((2, 80, 3 * 4 * 160)).astype(dtype)[..., :640]
    bq = big.reshape(2, 80, 4, 160).transpose(0, 2, 1, 3)  # 160 > SMALL_DIM: BLAS calls
    with gemm.pool().serial_blas():
        for x, y in ((q, k.swapaxes(-1, -2)), (q @ k.swapaxes(-1, -2), v),
                     (q.swapaxes(-1, -2), v), (bq, bq.swapaxes(-1, -2)), (bq.swapaxes(-1, -2), bq)):
            c = np.empty(x.shape[:-1] + y.shape[-1:], dtype)
            j, la, lb, lc, a, b = gemm._layouts(x, y, c, x.shape[:-2])
            assert a is x and b is y  # read in place, not copied
            assert_within(gemm.matmul(x, y), np.matmul(x, y), 2 * product_bound(x, y), rtol=0)


def test_blas_thread_count_restored_after_nested_and_concurrent_graphs():
    import threading
    p = gemm.pool()
    before = p._get()
    with p.serial_blas():
        assert p._get() == 1
        with p.serial_blas():
            assert p._get() == 1
        assert p._get() == 1  # the outer graph still runs
    assert p._get() == before
    w = rand(64, 64, seed=3)
    cf = compile(lambda x: (x @ w).relu())
    xs = [rand(128, 64, seed=s) for s in range(4)]
    with ember.no_grad():
        cf(xs[0])
        errors = []

        def run(x):
            try:
                bound = 2 * product_bound(x, w)
                for _ in range(20):
                    assert_within(cf(x), (x @ w).relu(), bound)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=run, args=(x,)) for x in xs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and p._get() == before


_THREADS_CHILD = """
import ctypes, ember
f = ember.compile(lambda x: (x * 2).exp())
x = ember.randn(512, 512)
r = f(x)
gomp = next(ln.split()[-1] for ln in open("/proc/self/maps") if "libgomp" in ln)
get = ctypes.CDLL(gomp).omp_get_max_threads
seen = [get()]
ember.set_num_threads(1)
seen.append(get())
assert ember.equal(f(x), r)
print(*seen)
"""


@pytest.mark.parametrize("env, want", [({}, None), ({"EMBER_NUM_THREADS": "1"}, 1)])
def test_set_num_threads_reaches_generated_kernels(tmp_path, env, want):
    """ember.set_num_threads (or $EMBER_NUM_THREADS before the first kernel) sets the OpenMP
    team of generated kernels; without either, OpenMP's own count stands."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=root, **env)
    full.pop("OMP_NUM_THREADS", None)
    r = subprocess.run([sys.executable, "-c", _THREADS_CHILD], env=full, capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    first, after = map(int, r.stdout.split())
    assert first == (want or len(os.sched_getaffinity(0))) and after == 1


@pytest.mark.parametrize("pool", [True, False])
def test_product_written_in_its_readers_layout(monkeypatch, pool):
    """Attention's (p @ v).transpose(1, 2).reshape(B, T, C): the product is written in the
    layout the transpose sees as contiguous (the drivers take c's strides), so the reshape is
    a view and no copy kernel runs; without the drivers the eager result is laid out so."""
    if not pool:
        monkeypatch.setattr(gemm, "_POOL", [None])
    p, v = rand(2, 4, 8, 8, seed=1).softmax(-1), rand(2, 4, 8, 16, seed=2)

    def f(x):
        y = (p @ (v * x)).transpose(1, 2).reshape(2, 8, 64)
        return y.relu(), (p @ v).transpose(-1, -2).sum(-1)  # transposed matrices: contiguous

    x = rand(16, seed=3)
    cf = compile(f)
    with ember.no_grad():
        close(cf(x), f(x))
    run = _entry(cf)
    assert not any("copy" in k.name for k in run.plan.kernels), run.plan.kernels
    src = run.wrapper_source
    made = "_empty_strided((2, 4, 8, 16), (512, 16, 64, 1)" if pool else "(512, 16, 64, 1))"
    assert src.count(made) == 1, src
    assert ("# matmul: BLAS" in src) == pool and ("_restride(" in src) != pool


def test_saved_views_reach_the_backward_uncopied():
    """A training forward returns saved values that are parts of its own buffers (the
    split halves of one product) as views, not copies; the backward graph reads them in that
    layout, and re-lays out a saved value that arrives otherwise (a contiguous clone)."""
    w = rand(32, 64, seed=1).requires_grad_()

    def f(x):
        a, b = (x @ w).split(32, -1)
        return (a.sin() * b.cos()).sum()

    x = rand(16, 32, seed=2).requires_grad_()
    cf = compile(f)
    cf(x).backward()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    f(x).backward()
    close(got, (x.grad, w.grad))
    run = _entry(cf)
    assert not any("copy" in k.name for k in run.forward.plan.kernels)
    views = [o for o in run.forward.plan.outputs if isinstance(o, fusion.Load)]
    assert len(views) == 2 and {v.offset for v in views} == {0, 32}, views
    saved = run.forward(x, w)[1:]
    grad = ember.ones(())
    want = run.backward(*saved, grad)
    relaid = run.backward(*[s.contiguous().clone() for s in saved], grad)
    close(relaid, want)


@pytest.mark.parametrize("rows", [(2, 1), (3, 4)])
def test_broadcast_stack_times_matrix(rows):
    """A stack of matrices expanded along its batch dim (rows repeat at stride 0) times one
    matrix: the rows cannot be read as one matrix (BLAS needs lda >= k), so the direct driver
    call goes batch by batch and every batch gets its product (the second batch came out 0
    before; found by the fuzzer). Forward and backward equal eager."""
    b, m = rows
    x0 = rand(1, m, 5, seed=1)
    w = rand(5, 3, seed=2)

    def f(a, w):
        return a.expand(b, m, 5) @ w

    close(compile(f)(x0, w), f(x0, w))
    xg, wg = x0.clone().requires_grad_(), w.clone().requires_grad_()
    compile(f)(xg, wg).square().sum().backward()
    xe, we = x0.clone().requires_grad_(), w.clone().requires_grad_()
    f(xe, we).square().sum().backward()
    close((xg.grad, wg.grad), (xe.grad, we.grad))


def test_view_read_only_by_driver_calls_is_pointer_arithmetic():
    """A strided view that only direct driver calls read is never made as an array: the
    call takes its source's pointer plus the offset, and the source stays alive (no del)
    until that call, though no array refers to it."""
    w, w1 = rand(16, 8, seed=1), rand(32, 32, seed=3)

    def f(x):
        y = x @ w1
        a = y.narrow(1, 16, 16)  # read only by the product below
        z = (x + 1).exp().sum()  # allocations in between
        return a @ w + z

    x = rand(64, 32, seed=2)
    cf = compile(f)
    with ember.no_grad():
        close(cf(x), f(x))
    src = _entry(cf).wrapper_source
    lines = src.splitlines()
    call = [i for i, ln in enumerate(lines) if "# matmul: BLAS" in ln][-1]
    offset = lines[call].split("_drv_float32(_blas_float32, ")[1].split(",")[6].strip()
    base = offset.split(" + ")[0]
    assert offset == f"{base} + 64" and "_view(" not in src, lines[call]
    dels = [i for i, ln in enumerate(lines) if ln.strip() == f"del {base[2:]}"]
    assert all(i > call for i in dels), src


def test_independent_products_run_side_by_side():
    """Two products in a row where the second reads nothing the first writes (a linear's
    input and weight gradients) are one call, one product per thread; a product reading
    the one before it is not paired. Results equal eager's."""
    w1, w2 = rand(256, 128, seed=1), rand(128, 256, seed=2)

    def f(x):
        return (x @ w1) @ w2, x.t() @ x, x @ w1.t().t()

    x = rand(512, 256, seed=3)
    cf = compile(f)
    y = x @ w1
    bounds = [2 * product_bound(y, w2, a_err=product_bound(x, w1)), 2 * product_bound(x.t(), x),
              2 * product_bound(x, w1)]
    with ember.no_grad():
        for i, (got, want, bound) in enumerate(zip(cf(x), f(x), bounds)):
            assert_within(got, want, bound, path=f"out[{i}]")
    src = _entry(cf).wrapper_source
    assert src.count("side by side") == 1 and src.count("_drv2_float32(") == 1, src
    model = ember.nn.Sequential(ember.nn.Linear(256, 512), ember.nn.Tanh(),
                                ember.nn.Linear(512, 64))
    ref = copy.deepcopy(model)
    cm = compile(model)
    for m in (cm, ref):
        m(x).square().mean().backward()
    for p, pr in zip(model.parameters(), ref.parameters()):
        close(p.grad, pr.grad)
    assert "_drv2_float32(" in _entry(cm._compiled_call).backward.wrapper_source
