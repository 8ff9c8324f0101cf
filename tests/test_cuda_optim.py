"""ember's fused optimizer steps on CUDA (backends/cuda/optim.py) against PyTorch on CUDA (the
GPU tier: ``-m cuda``): Adam / AdamW / SGD training a small MLP for 10 steps, default and
``fused=True``, one launch per parameter dtype and step; float32 Adam gives the CPU step's
bits; half precision like PyTorch's fused step.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from test_cuda import GPU_TIER

torch = pytest.importorskip("torch")

pytestmark = GPU_TIER


def launches():
    """Kernel launches so far: (the fused steps', every other ember Triton kernel's)."""
    from ember.backends.cuda import optim, pointwise, rows
    return optim.STATS["launches"], pointwise.STATS["launches"] + rows.STATS["launches"]


OPTIMIZERS = [
    ("AdamW", dict(lr=1e-2, weight_decay=0.1)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, weight_decay=0.05, amsgrad=True)),
    ("Adam", dict(lr=1e-2, maximize=True, betas=(0.8, 0.95))),
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.2, maximize=True)),
]


@pytest.mark.parametrize("fused", [None, True])
@pytest.mark.parametrize("name,kwargs", OPTIMIZERS)
def test_mlp_training_matches_torch_cuda(name, kwargs, fused):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 16)).astype(np.float32)
    ys = rng.standard_normal((32, 4)).astype(np.float32)
    ember.manual_seed(0)
    enet = ember.nn.Sequential(ember.nn.Linear(16, 33), ember.nn.Tanh(), ember.nn.Linear(33, 4))
    tnet = torch.nn.Sequential(torch.nn.Linear(16, 33), torch.nn.Tanh(), torch.nn.Linear(33, 4))
    with torch.no_grad():
        for tp, ep in zip(tnet.parameters(), enet.parameters()):
            tp.copy_(torch.tensor(ep.detach().numpy()))
    enet.cuda()
    tnet.cuda()
    kw = dict(kwargs, fused=fused)
    eopt = getattr(ember.optim, name)(enet.parameters(), **kw)
    topt = getattr(torch.optim, name)(tnet.parameters(), **kw)
    ex, ey = ember.tensor(xs).cuda(), ember.tensor(ys).cuda()
    tx, ty = torch.tensor(xs).cuda(), torch.tensor(ys).cuda()
    for i in range(10):
        for net, opt, x, y, m in ((enet, eopt, ex, ey, ember), (tnet, topt, tx, ty, torch)):
            opt.zero_grad()
            m.nn.functional.mse_loss(net(x), y).backward()
            if m is ember:
                before = launches()
            opt.step()
            if m is ember:
                after = launches()
                assert after[0] - before[0] == 1  # every parameter in one launch
                if i:  # (the first step makes the state)
                    assert after[1] == before[1]  # and nothing else of ember's ran
    for pe, pt in zip(enet.parameters(), tnet.parameters()):
        assert pe.is_cuda
        np.testing.assert_allclose(pe.detach().cpu().numpy(), pt.detach().cpu().numpy(),
                                   rtol=1e-4, atol=1e-5)
    for pe, pt in zip(enet.parameters(), tnet.parameters()):
        es, ts = eopt.state[pe], topt.state[pt]
        assert set(es) == set(ts)
        for key in es:
            if key != "step":
                assert es[key].is_cuda
                np.testing.assert_allclose(es[key].cpu().numpy(), ts[key].cpu().numpy(),
                                           rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("AdamW", dict(lr=1e-3, weight_decay=0.1)),
                                         ("Adam", dict(lr=1e-3, weight_decay=0.1,
                                                       amsgrad=True, maximize=True))])
def test_adam_float32_gives_the_cpu_steps_bits(name, kwargs):
    """The Triton step rounds each operation as the CPU's does (IEEE division and square
    root, no contraction): the same bits, step after step."""
    rng = np.random.default_rng(1)
    sizes = [(0,), (1,), (7,), (1000,), (33, 65), (100_003,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    results = []
    for dev in ("cpu", "cuda"):
        ps = [ember.tensor(a, device=dev, requires_grad=True) for a in params]
        opt = getattr(ember.optim, name)(ps, **kwargs)
        g_rng = np.random.default_rng(2)
        for _ in range(4):
            for p in ps:
                p.grad = ember.tensor(g_rng.standard_normal(p.shape).astype(np.float32),
                                      device=dev)
            opt.step()
        results.append([p.detach().cpu().numpy() for p in ps])
    for a, b in zip(*results):
        assert np.array_equal(a.view(np.int32), b.view(np.int32))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,kwargs", [("AdamW", dict(lr=1e-2, weight_decay=0.1)),
                                         ("SGD", dict(lr=0.1, momentum=0.9))])
def test_half_precision_like_torch_fused(name, kwargs, dtype):
    """Half-precision parameters keep their state in their dtype and compute in float32,
    rounded once at each store, as PyTorch's fused step."""
    rng = np.random.default_rng(3)
    sizes = [(5,), (1000,), (33, 65)]
    params = [rng.standard_normal(s) for s in sizes]
    out = []
    for m in (ember, torch):
        dt = getattr(m, dtype)
        ps = [m.tensor(a, dtype=dt, device="cuda", requires_grad=True) for a in params]
        opt = getattr(m.optim, name)(ps, fused=True, **kwargs)
        g_rng = np.random.default_rng(4)
        for _ in range(5):
            for p in ps:
                p.grad = m.tensor(g_rng.standard_normal(tuple(p.shape)), dtype=dt, device="cuda")
            opt.step()
        out.append(([p.detach().float().cpu().numpy() for p in ps], opt))
    (got, eopt), (want, _) = out
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2)
    for state in eopt.state.values():
        for key, t in state.items():
            if key != "step":
                assert str(t.dtype) == f"ember.{dtype}"


def test_gpt2_like_parameter_list_in_one_launch():
    """148 parameters (GPT-2's count, small sizes) of float32 plus two bfloat16 ones: one
    launch per dtype and step; the table is uploaded once while the arrays stay put."""
    from ember.backends.cuda import optim
    rng = np.random.default_rng(5)
    sizes = [(rng.integers(1, 3000),) for _ in range(148)]
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32), device="cuda",
                       requires_grad=True) for s in sizes]
    ps += [ember.zeros(300, dtype=ember.bfloat16, device="cuda", requires_grad=True)
           for _ in range(2)]
    opt = ember.optim.AdamW(ps, lr=1e-3)
    for p in ps:
        p.grad = ember.ones_like(p)
    opt.step()
    n, tables = optim.STATS["launches"], optim.STATS["tables"]
    for _ in range(3):
        opt.step()
    assert optim.STATS["launches"] - n == 6
    assert optim.STATS["tables"] == tables
    ember.cuda.synchronize()
    assert all(bool(ember.isfinite(p).all()) for p in ps)


def test_fused_requires_float_params_on_cuda():
    q = ember.zeros(3, dtype=ember.int32, device="cuda")
    q.grad = ember.ones(3, dtype=ember.int32, device="cuda")
    with pytest.raises(RuntimeError, match="`fused=True` requires all the params"):
        ember.optim.Adam([q], fused=True).step()
