"""ember's fused optimizer steps for CUDA (backends/cuda/optim_kernels.py, wrappers optim.py)
through Triton's interpreter on CPU: the steps on numpy arrays, and ember's Adam / AdamW / SGD
with the CPU backend's fused steps swapped for them (restored after), against ember's own CPU
step (bit for bit where the arithmetic is the same, within an ulp where the CPU rounds a
multiply-add once) and against PyTorch on CPU. Parameters of many sizes (0, one element, not
a multiple of the block, several programs each) go in one launch. Last, the kernels compile
for sm_90 (no GPU needed).
"""

from __future__ import annotations


import numpy as np
import pytest

import ember
from triton_util import INTERPRETED, compile_for_sm90
from ember.backends import cpu
from ember.backends.cuda import optim as cuda_optim

torch = pytest.importorskip("torch")

pytestmark = INTERPRETED

SIZES = [(0,), (1,), (5,), (33,), (7, 11), (100,)]  # with BLOCK 16, ITERS 2: up to 4 programs


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 16 and chunks of 32 elements, so the small parameters here take several
    programs, full blocks and tails."""
    monkeypatch.setattr(cuda_optim, "BLOCK", 16)
    monkeypatch.setattr(cuda_optim, "ITERS", 2)


@pytest.fixture
def triton_steps(monkeypatch):
    """The CPU backend's fused Adam and SGD steps swapped for the Triton ones (restored
    after: monkeypatch puts the native Adam step back and removes the SGD one)."""
    monkeypatch.setitem(cpu.BACKEND.fused_steps, "adam", cuda_optim.AdamStep())
    monkeypatch.setitem(cpu.BACKEND.fused_steps, "sgd", cuda_optim.SGDStep())


def ulps(a, b) -> int:
    """The largest distance in units in the last place between float32/float64 arrays."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    it = {4: np.int32, 8: np.int64}[a.itemsize]

    def ordered(x):
        i = x.view(it).astype(np.int64)
        return np.where(i < 0, np.iinfo(it).min - i, i)
    return int(np.abs(ordered(a) - ordered(b)).max(initial=0))


def data(seed, steps=3, sizes=SIZES):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in sizes]
    grads = [[rng.standard_normal(s) for s in sizes] for _ in range(steps)]
    return params, grads


def run(opt_cls, kwargs, params, grads, dtype=ember.float32, lib=ember):
    """Parameters of ``dtype`` after ``len(grads)`` steps of ``opt_cls`` (ember's or torch's)
    given those gradients."""
    dt = getattr(lib, str(dtype).split(".")[-1])
    ps = [lib.tensor(a, dtype=dt, requires_grad=True) for a in params]
    opt = opt_cls(ps, **kwargs)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = lib.tensor(g, dtype=dt)
        opt.step()
    return [p.detach() for p in ps], opt


def as_np(ts):
    return [t.numpy() if t.dtype in (ember.float32, ember.float64) else t.float().numpy()
            for t in ts]


ADAM_CASES = [
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, weight_decay=0.1)),
    ("Adam", dict(lr=1e-2, weight_decay=0.1, maximize=True, eps=1e-6)),
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=3e-3, weight_decay=0.5, betas=(0.8, 0.99))),
    ("Adam", dict(lr=1e-2, amsgrad=True)),
    ("AdamW", dict(lr=1e-2, amsgrad=True, maximize=True, weight_decay=0.2)),
    ("Adam", dict(lr=1e-2, fused=True)),
    ("AdamW", dict(lr=1e-2, foreach=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", ADAM_CASES)
def test_adam_matches_cpu_step_bit_for_bit(name, kwargs, dtype, monkeypatch):
    """Adam / AdamW through the Triton step, one launch per step, gives the CPU step's bits
    (its native kernel, or numpy's with amsgrad)."""
    params, grads = data(0)
    dt = getattr(ember, dtype)
    ref, _ = run(getattr(ember.optim, name), kwargs, params, grads, dt)
    monkeypatch.setitem(cpu.BACKEND.fused_steps, "adam", cuda_optim.AdamStep())
    before = cuda_optim.STATS["launches"]
    got, opt = run(getattr(ember.optim, name), kwargs, params, grads, dt)
    assert cuda_optim.STATS["launches"] - before == len(grads)  # one launch per step
    for r, g in zip(as_np(ref), as_np(got)):
        assert ulps(r, g) == 0
    for p in opt.param_groups[0]["params"]:
        state = opt.state[p]
        assert float(state["step"]) == len(grads)
        assert set(state) == {"step", "exp_avg", "exp_avg_sq"} | (
            {"max_exp_avg_sq"} if kwargs.get("amsgrad") else set())


@pytest.mark.parametrize("name,kwargs", ADAM_CASES)
def test_adam_matches_torch(name, kwargs, triton_steps):
    params, grads = data(1)
    kw = dict(kwargs)
    got, _ = run(getattr(ember.optim, name), kw, params, grads)
    want, topt = run(getattr(torch.optim, name), kw, params, grads, lib=torch)
    for g, w in zip(as_np(got), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,kwargs", [("AdamW", dict(lr=1e-2, fused=True)),
                                         ("Adam", dict(lr=1e-2, weight_decay=0.1,
                                                       amsgrad=True, fused=True))])
def test_adam_half_precision_like_torch_fused(name, kwargs, dtype, triton_steps):
    """Half-precision parameters: state in their dtype, computed in float32 and rounded once
    at each store, as PyTorch's fused step (on CPU here) does."""
    params, grads = data(2)
    dt = getattr(ember, dtype)
    before = cuda_optim.STATS["launches"]
    got, opt = run(getattr(ember.optim, name), kwargs, params, grads, dt)
    assert cuda_optim.STATS["launches"] - before == len(grads)
    want, topt = run(getattr(torch.optim, name), kwargs, params, grads, dt, lib=torch)
    for g, w in zip(got, want):
        assert g.dtype is dt
        np.testing.assert_allclose(g.float().numpy(), w.float().numpy(), rtol=1e-2, atol=1e-3)
    p, tp = opt.param_groups[0]["params"][-1], topt.param_groups[0]["params"][-1]
    for key in ("exp_avg", "exp_avg_sq"):
        assert opt.state[p][key].dtype is dt
        np.testing.assert_allclose(opt.state[p][key].float().numpy(),
                                   topt.state[tp][key].float().numpy(), rtol=1e-2, atol=1e-4)


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.01, maximize=True),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True, fused=True),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kwargs", SGD_CASES)
def test_sgd_matches_cpu_step(kwargs, dtype, monkeypatch):
    """SGD through the Triton step (the buffer's first step included) against ember's op-by-op
    CPU step: within an ulp or two (the kernel's multiply-adds are exact fma on the GPU, two
    roundings in the interpreter; the CPU's axpy rounds once)."""
    params, grads = data(3, steps=4)
    dt = getattr(ember, dtype)
    ref, ropt = run(ember.optim.SGD, kwargs, params, grads, dt)
    monkeypatch.setitem(cpu.BACKEND.fused_steps, "sgd", cuda_optim.SGDStep())
    before = cuda_optim.STATS["launches"]
    got, opt = run(ember.optim.SGD, kwargs, params, grads, dt)
    assert cuda_optim.STATS["launches"] - before == len(grads)
    for r, g in zip(as_np(ref), as_np(got)):
        assert ulps(r, g) <= 2
    for p, rp in zip(opt.param_groups[0]["params"], ropt.param_groups[0]["params"]):
        assert set(opt.state[p]) == set(ropt.state[rp])
        if kwargs.get("momentum"):
            assert ulps(opt.state[p]["momentum_buffer"].numpy(),
                        ropt.state[rp]["momentum_buffer"].numpy()) <= 2


@pytest.mark.parametrize("kwargs", SGD_CASES)
def test_sgd_matches_torch(kwargs, triton_steps):
    params, grads = data(4, steps=4)
    got, _ = run(ember.optim.SGD, kwargs, params, grads)
    want, _ = run(torch.optim.SGD, kwargs, params, grads, lib=torch)
    for g, w in zip(as_np(got), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def test_sgd_half_precision(triton_steps):
    """bfloat16 SGD against PyTorch's for-loop step (its CPU fused SGD in bfloat16 is off by
    tenths on parameters of 33 elements in torch 2.13: not an oracle here)."""
    params, grads = data(5)
    kw = dict(lr=0.1, momentum=0.9, weight_decay=0.01)
    got, opt = run(ember.optim.SGD, dict(kw, fused=True), params, grads, ember.bfloat16)
    want, _ = run(torch.optim.SGD, dict(kw, foreach=False), params, grads, ember.bfloat16,
                  lib=torch)
    for g, w in zip(got, want):
        assert g.dtype is ember.bfloat16
        np.testing.assert_allclose(g.float().numpy(), w.float().numpy(), rtol=2e-2, atol=1e-2)


# ---------------------------------------------------------------------- the steps on arrays
def test_adam_step_on_arrays_one_launch_and_cached_table():
    """The step itself on numpy arrays: every size in one launch, sizes 0 included; the table
    is built once while the arrays stay where they are."""
    rng = np.random.default_rng(6)
    items = [tuple(rng.standard_normal(s).astype(np.float32) for _ in range(4)) for s in SIZES]
    for q in items:
        np.abs(q[3], out=q[3])
    ref = [tuple(a.copy() for a in q) for q in items]
    step = cuda_optim.AdamStep()
    assert all(step.fits(*q) for q in items)
    launches, tables = cuda_optim.STATS["launches"], cuda_optim.STATS["tables"]
    hyper = (False, 1, 1 - 1e-3 * 0.1, 0.1, 0.9, 0.999, (1 - 0.999 ** 2) ** 0.5, 1e-8,
             -(1e-3 / (1 - 0.9 ** 2)))
    for _ in range(3):
        step(items, *hyper)
    assert cuda_optim.STATS["launches"] - launches == 3
    assert cuda_optim.STATS["tables"] - tables == 1
    for _ in range(3):  # numpy, as optim/adam.py's _fused_update computes it
        for P, G, M, V in ref:
            P *= 1 - 1e-3 * 0.1
            M += (1 - 0.9) * (G - M)
            V *= 0.999
            V += (1 - 0.999) * (G * G)
            d = np.sqrt(V)
            d /= (1 - 0.999 ** 2) ** 0.5
            d += 1e-8
            s = M / d
            s *= -(1e-3 / (1 - 0.9 ** 2))
            P += s
    for q, r in zip(items, ref):
        for a, b in zip(q, r):
            assert ulps(a, b) == 0


def test_amsgrad_max_propagates_nan():
    p, g, m, v, w = (np.zeros(20, np.float32) for _ in range(5))
    w[3] = np.nan
    g[5] = np.nan
    cuda_optim.AdamStep()([(p, g, m, v, w)], False, 0, 1.0, 0.0, 0.9, 0.999, 1.0, 1e-8, -0.1)
    assert np.isnan(w[3]) and np.isnan(w[5]) and np.isnan(p[[3, 5]]).all()
    assert not np.isnan(np.delete(p, [3, 5])).any()


def test_fits():
    fits = cuda_optim.fits
    a = [np.zeros(8, np.float32) for _ in range(4)]
    assert fits(*a)
    assert fits(*(np.zeros(8, ember.bfloat16.np) for _ in range(4)))
    assert not fits(a[0], a[1], a[2], a[2])  # state arrays that overlap
    assert not fits(a[0], a[1].astype(np.float64), a[2], a[3])
    assert not fits(a[0], np.zeros(16, np.float32)[::2], a[2], a[3])  # not contiguous
    assert not fits(np.zeros(8, np.int32), *(np.zeros(8, np.int32) for _ in range(3)))
    assert not fits(np.zeros(9, np.float32)[1:], a[1], a[2], a[3])  # not 16-byte aligned
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    assert not fits(ro, a[1], a[2], a[3]) and fits(a[0], ro, a[2], a[3])  # grads read only


def test_unfit_parameters_take_the_other_path(triton_steps):
    """A parameter the kernel does not take (a non-contiguous one) is updated by numpy's
    path in the same step, with the same result."""
    params, grads = data(7, sizes=[(6, 4), (5,)])
    ref, _ = run(ember.optim.AdamW, dict(lr=1e-2), params, grads)
    ps = [ember.tensor(np.ascontiguousarray(params[0].T), dtype=ember.float32).t().detach()
          .requires_grad_(),
          ember.tensor(params[1], dtype=ember.float32, requires_grad=True)]
    assert not ps[0].is_contiguous()
    opt = ember.optim.AdamW(ps, lr=1e-2)
    before = cuda_optim.STATS["launches"]
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = ember.tensor(g, dtype=ember.float32)
        opt.step()
    assert cuda_optim.STATS["launches"] - before == len(grads)  # the contiguous one
    for r, p in zip(ref, ps):
        assert ulps(r.numpy(), np.ascontiguousarray(p.detach().numpy())) == 0


def test_fused_true_needs_floating_point_params():
    q = ember.zeros(3, dtype=ember.int32)
    q.grad = ember.ones(3, dtype=ember.int32)
    for opt in (ember.optim.Adam([q], fused=True), ember.optim.SGD([q], lr=0.1, fused=True)):
        with pytest.raises(RuntimeError, match="`fused=True` requires all the params to be "
                                               "floating point Tensors of supported devices"):
            opt.step()
    p = ember.zeros(3, requires_grad=True)
    for cls in (ember.optim.SGD, ember.optim.Adagrad, ember.optim.Adam):
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` "
                                               "together"):
            cls([p], lr=0.1, fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            cls([p], lr=0.1, fused=True, differentiable=True)


def test_cpu_steps_restored():
    """The fixtures above leave the CPU backend as it was: its native Adam step, no SGD
    step."""
    assert not isinstance(cpu.BACKEND.fused_step("adam"), cuda_optim.AdamStep)
    assert cpu.BACKEND.fused_step("sgd") is None


def test_mlp_training_matches_cpu_and_torch(triton_steps):
    """A small MLP trained 10 steps with AdamW through the Triton step: ember's CPU step's
    bits, PyTorch's values within rounding."""
    rng = np.random.default_rng(8)
    xs, ys = rng.standard_normal((16, 12)), rng.standard_normal((16, 3))
    results = []
    for lib, swap in ((ember, True), (ember, False), (torch, False)):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(12, 20), lib.nn.Tanh(), lib.nn.Linear(20, 3))
        if lib is torch:  # ember's initial weights
            with torch.no_grad():
                for tp, ep in zip(net.parameters(), results[0][1]):
                    tp.copy_(torch.tensor(ep))
        opt = lib.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1)
        init = [p.detach().clone().numpy() for p in net.parameters()]
        fused = cpu.BACKEND.fused_steps.pop("adam") if not swap and lib is ember else None
        try:
            for _ in range(10):
                opt.zero_grad()
                loss = ((net(lib.tensor(xs, dtype=lib.float32)) -
                         lib.tensor(ys, dtype=lib.float32)) ** 2).mean()
                loss.backward()
                opt.step()
        finally:
            if fused is not None:
                cpu.BACKEND.fused_steps["adam"] = fused
        results.append(([p.detach().numpy() for p in net.parameters()], init))
    (tri, _), (numpy_path, _), (ref, _) = results
    for a, b, c in zip(tri, numpy_path, ref):
        assert ulps(a, b) == 0
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- compiled for the GPU
COMPILE = r"""
import itertools
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ember.backends.cuda import optim_kernels as K

def build(fn, **consts):
    sig = {a: "constexpr" if a in consts else {"table": "*i64", "hyper": "*fp64"}.get(a, "i32")
           for a in fn.arg_names}
    return triton.compile(ASTSource(fn, signature=sig, constexprs=consts),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "enable_fp_fusion": False})

for dt, acc, wd, flag in [(tl.float32, tl.float32, 1, False), (tl.bfloat16, tl.float32, 2, True),
                          (tl.float16, tl.float32, 0, True), (tl.float64, tl.float64, 2, False)]:
    k = build(K.adam, DT=dt, ACC=acc, MAXIMIZE=flag, WD_MODE=wd, AMSGRAD=flag, BLOCK=1024,
              ITERS=16)
    if dt == tl.float32:  # full blocks load 16 bytes a thread at a time; no contraction
        assert "ld.global.v4" in k.asm["ptx"] and "fma.rn.f32" not in k.asm["ptx"]
    for mom, first, nest in itertools.product((False, True), repeat=3):
        build(K.sgd, DT=dt, ACC=acc, MAXIMIZE=flag, WD=flag, MOMENTUM=mom, FIRST=first,
              NESTEROV=nest, BLOCK=1024, ITERS=16)
print("ok")
"""


def test_kernels_compile_for_sm90():
    """Every kernel (a sample of its variants) through Triton's compiler to a Hopper cubin."""
    compile_for_sm90(COMPILE)
