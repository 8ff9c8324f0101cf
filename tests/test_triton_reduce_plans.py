"""The plan cache of ember's CUDA reductions (backends/cuda/reduction_plans.py) under Triton's
interpreter, against PyTorch on CPU: a repeated call reuses its plan and still returns fresh
results; a different layout, dtype or argument gets its own plan; arguments the impl refuses
never reach a plan cached for equal-comparing ones (``True`` for 1, ``2.0`` for 2); the cache
stays bounded. Then the GPU path of a plan (prepared launchers taking addresses, the general
launch for an unaligned view), run on numpy arrays dressed as CuPy's with each launch executed
by the interpreter.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, compile_for_sm90
from ember.backends.cuda import reduction_plans as P, reductions as R
from ember.backends.cuda import runtime, triton_adapter as adapter

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED


@pytest.fixture
def plans(monkeypatch):
    """An empty plan cache; yields how many plans were built since."""
    monkeypatch.setattr(P, "_PLANS", {})
    before = P.STATS["plans"]
    yield lambda: P.STATS["plans"] - before


def rand(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


def test_repeated_calls_reuse_the_plan_with_fresh_results(plans):
    a, b = rand((6, 40)), rand((6, 40), seed=1)
    ra = R.OVERRIDES["sum"](a, -1)
    assert plans() == 1
    rb = R.OVERRIDES["sum"](b, -1)
    assert plans() == 1  # the same shape, strides, dtype and arguments
    assert rb is not ra and not np.shares_memory(ra, rb)
    np.testing.assert_allclose(ra, a.sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rb, b.sum(-1), rtol=1e-5, atol=1e-5)
    R.OVERRIDES["sum"](a, 1)  # -1 and 1 normalise to the same axis
    R.OVERRIDES["sum"](a, (1,))
    assert plans() == 1
    R.OVERRIDES["sum"](a, -1, True)  # keepdim: other output shape
    R.OVERRIDES["mean"](a, -1)
    R.OVERRIDES["sum"](a, -1, dtype=ember.float64)
    assert plans() == 4


def test_strides_and_dtypes_get_their_own_plans(plans):
    """Same shape, other strides (a transposed view, a copy-only layout); other dtypes."""
    base = rand((5, 5))
    for x in (base, base.T, base[::-1], np.asfortranarray(base)):
        for dim in (0, 1, None):
            want = torch.from_numpy(np.ascontiguousarray(x)).sum(dim if dim is not None
                                                                  else (0, 1))
            np.testing.assert_allclose(R.OVERRIDES["sum"](x, dim), want.numpy(), rtol=1e-5,
                                       atol=1e-5)
    # base.T and the Fortran copy share strides: 3 layouts x 3 dims
    assert plans() == 9
    c = rand((3, 4, 5)).transpose(1, 0, 2)  # reducing (0, 2) of this needs a copy
    for dt in ("float32", "float64", "float16", ember.bfloat16.np, "int32"):
        x = c.astype(dt)
        want = torch.from_numpy(x.astype(np.float64)).sum((0, 2))
        got = R.OVERRIDES["sum"](x, (0, 2))
        assert got.dtype == (np.int64 if dt == "int32" else np.dtype(dt))
        np.testing.assert_allclose(got.astype(np.float64), want.numpy(), rtol=2e-2, atol=5e-2)
    assert plans() == 14


def test_refused_arguments_never_hit_a_cached_plan(plans):
    """Keys hold normalised arguments, so values the impl refuses (and that compare equal to
    accepted ones) are checked before any lookup."""
    x = rand((3, 4))
    assert R.OVERRIDES["sum"](x, 1) is not None and R.OVERRIDES["sum"](x, True) is None
    assert R.OVERRIDES["sum"](x, 1, True) is not None
    assert R.OVERRIDES["sum"](x, 1, 1.0) is None  # keepdim 1.0 == True
    assert R.OVERRIDES["amax"](x, 1) is not None and R.OVERRIDES["amax"](x, 1.0) is None
    assert R.OVERRIDES["sum_to_size"](x, (4,)) is not None
    assert R.OVERRIDES["sum_to_size"](x, (4.0,)) is None  # the impl's TypeError
    assert R.OVERRIDES["sum_to_size"](x, [4]).shape == (4,)  # a list, one plan
    got = R.OVERRIDES["sum_to_size"](x, (np.int64(1), True))  # index-like: (1, 1)
    assert got.shape == (1, 1) and np.isclose(got[0, 0], x.sum(), atol=1e-5)
    assert R.OVERRIDES["var"](x, 1, correction=4) is None  # no degrees of freedom, cached
    assert R.OVERRIDES["var"](x, 1, correction=4) is None
    assert R.OVERRIDES["var"](x, 1, correction=3) is not None
    assert plans() == 7


def test_the_cache_is_bounded(plans, monkeypatch):
    monkeypatch.setattr(P, "CACHE", 3)
    for n in range(2, 8):
        x = rand((4, n))
        np.testing.assert_allclose(R.OVERRIDES["sum"](x, 1), x.sum(1), rtol=1e-5, atol=1e-5)
        assert len(P._PLANS) <= 3
    assert plans() == 6
    assert [k[0] for k in P._PLANS] == [(4, 5), (4, 6), (4, 7)]  # the oldest went first
    R.OVERRIDES["sum"](rand((4, 2)), 1)
    assert plans() == 7 and len(P._PLANS) == 3


def test_plans_hold_their_launches():
    """The bias-gradient layout: columns split into partials, then one launch over them."""
    plan = P._build((300, 24), (24, 1), (P.SUM, (0,), False, np.dtype(np.float32),
                                        np.dtype(np.float32), 0, None, 0))
    assert plan.perm is None and len(plan.launches) == 2
    first, second = plan.launches
    assert first.args[0] == 0 and second.args[0] == first.args[3]
    assert plan.allocs[second.args[3] - 1] == ((24,), np.dtype(np.float32))
    assert second.scalars[3] == 1  # one split
    # a variance: the mean (1 launch), then the deviations reading it
    plan = P._build((3, 8), (8, 1), (P.VAR, (1,), True, np.dtype(np.float32),
                                     np.dtype(np.float32), 1, None, 1))
    mean, dev = plan.launches
    assert dev.args[2] == mean.args[3] and plan.results == (dev.args[3], mean.args[3])
    assert plan.allocs[dev.args[3] - 1][0] == (3, 1)


# ---------------------------------------------------------------------- the GPU path
class _Device(np.ndarray):
    """A numpy array with CuPy's ``data.ptr``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


@pytest.fixture
def gpu_path(monkeypatch, plans):
    """The plans' GPU path on numpy arrays: CuPy faked (allocations are ``_Device`` arrays),
    ``prepare`` and ``launch`` replaced by ones that map the addresses back to the arrays and
    run the kernel in the interpreter. Yields a record of the calls."""
    seen = {}
    calls = {"prepare": 0, "go": 0, "launch": 0, "streams": set()}

    def dev(a):
        a = a.view(_Device)
        seen[a.data.ptr] = a
        return a
    stream = types.SimpleNamespace(ptr=77)
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                   get_current_stream=lambda *a: stream),
        empty=lambda shape, dtype: dev(np.empty(shape, dtype)),
        ascontiguousarray=lambda a: dev(np.ascontiguousarray(a)))
    monkeypatch.setitem(runtime._STATE, "cp", fake)
    monkeypatch.setattr(P, "_want", lambda: 4)
    adapter._patch_interpreter()

    def run(kernel, grid, ptrs, scalars, num_warps, constexprs):
        assert num_warps in (4, 8)
        kernel[grid](*adapter.host_args([seen[p] for p in ptrs] + list(scalars)), **constexprs)

    def prepare(kernel, grid, args, *, num_warps=None, **constexprs):
        calls["prepare"] += 1
        assert all(type(a) is adapter.Pointer and a.ptr % 16 == 0 for a in args[:5])
        fixed = list(args[5:])

        def go(s, *a):
            calls["go"] += 1
            calls["streams"].add(s)
            assert list(a[5:]) == fixed  # the scalars it was prepared for
            run(kernel, grid, a[:5], a[5:], num_warps, constexprs)
        return go

    def launch(kernel, grid, args, stream=None, *, num_warps=None, **constexprs):
        calls["launch"] += 1
        calls["streams"].add(stream)
        run(kernel, grid, [a.ptr for a in args[:5]], args[5:], num_warps, constexprs)
    monkeypatch.setattr(adapter, "prepare", prepare)
    monkeypatch.setattr(adapter, "launch", launch)
    monkeypatch.setattr(adapter, "interpreting", lambda: False)
    calls["device"] = dev
    yield calls


def test_gpu_path_prepares_once_and_launches_by_address(gpu_path):
    dev = gpu_path["device"]
    for seed in range(3):
        a = dev(rand((300, 24), seed=seed))
        got = R.OVERRIDES["sum"](a, 0)  # columns split into partials: two launches
        np.testing.assert_allclose(got, a.sum(0), rtol=1e-5, atol=1e-5)
        v, i = R.OVERRIDES["max"](a, 1)
        t = torch.from_numpy(np.asarray(a)).max(1)
        np.testing.assert_array_equal(v, t.values.numpy())
        np.testing.assert_array_equal(i, t.indices.numpy())
    assert gpu_path["prepare"] == 3 and gpu_path["go"] == 9 and gpu_path["launch"] == 0
    b = dev(rand((4, 5, 6), "float64"))
    got = R.OVERRIDES["var"](b.transpose(2, 0, 1), (0, 2))  # a copy, then mean and deviations
    want = torch.from_numpy(np.asarray(b)).permute(2, 0, 1).var((0, 2))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)
    assert gpu_path["streams"] == {77}


def test_gpu_path_unaligned_views_launch_generally(gpu_path):
    dev = gpu_path["device"]
    base = dev(rand((8, 33), ember.bfloat16.np))
    x = base[:, 1:]  # 2 bytes past an aligned address
    assert x.data.ptr % 16 == 2
    gpu_path["device"](x)  # known to the fake launcher by its address
    got = R.OVERRIDES["sum"](x, -1)
    want = torch.from_numpy(np.asarray(x).astype(np.float32)).sum(-1)
    np.testing.assert_allclose(got.astype(np.float32), want.numpy(), rtol=1e-2, atol=1e-2)
    assert gpu_path["launch"] == 1 and gpu_path["prepare"] == 0
    aligned = dev(np.ascontiguousarray(x))
    np.testing.assert_array_equal(R.OVERRIDES["sum"](aligned, -1), got)  # its own plan
    assert gpu_path["prepare"] == 1 and gpu_path["go"] == 1


# ---------------------------------------------------------------------- compiled for the GPU
VECTOR_LOADS = r"""
import re
import numpy as np
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import ember
from ember.backends.cuda import reduction_plans as P

P._want = lambda: 4 * 132  # an H100 / H200
PTR = {"bfloat16": "bf16", "float32": "fp32"}


def loads(plan, x_dtype):
    # each launch of the plan compiled as Triton specialises it on the GPU (aligned pointers,
    # integers equal to 1 as constants, divisibility by 16): its global loads
    out = []
    fn = P.kernels().reduce
    names = fn.arg_names
    for ln in plan.launches:
        sig, attrs, consts = {}, {}, dict(ln.constexprs)
        for k, i in enumerate(ln.args):
            dt = x_dtype if i == 0 else plan.allocs[i - 1][1]
            sig[names[k]] = "*" + PTR[np.dtype(dt).name]
            attrs[(k,)] = [["tt.divisibility", 16]]
        for k, v in enumerate(ln.scalars, 5):
            if type(v) is float:
                sig[names[k]] = "fp32"
            elif v == 1:
                sig[names[k]], consts[names[k]] = "constexpr", 1
            else:
                sig[names[k]] = "i32" if -2**31 <= v < 2**31 else "i64"
                if v % 16 == 0:
                    attrs[(k,)] = [["tt.divisibility", 16]]
        for n in consts:
            sig[n] = "constexpr"
        k = triton.compile(ASTSource(fn, signature=sig, constexprs=consts, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": ln.warps})
        out.append(sorted(set(re.findall(r"ld\.global[.\w]*", k.asm["ptx"]))))
    return out


bf, f32 = np.dtype(ember.bfloat16.np), np.dtype(np.float32)
cases = [((16384, 768), bf, (1,), 1), ((16384, 768), bf, (0,), 2),
         ((4096, 4096), f32, (0, 1), 2)]
for shape, dt, axes, count in cases:
    plan = P._build(shape, (shape[1], 1), (P.SUM, axes, False, dt, dt, 0, None, 0))
    got = loads(plan, dt)
    assert len(got) == count and all(g == ["ld.global.v4.b32"] for g in got), (shape, axes, got)
print("ok")
"""


def test_gpu_plans_load_16_bytes_at_a_time():
    """The row sum, the bias-gradient column sum (partials and their reduction) and the full
    sum of the benchmarks, planned for a 132-SM GPU and compiled for sm_90 as Triton
    specialises them there: every global load is a 16-byte vector load."""
    compile_for_sm90(VECTOR_LOADS)
